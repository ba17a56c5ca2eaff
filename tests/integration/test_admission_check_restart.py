"""The per-card check keeps deciding across a worker restart and a Devices informer relist (410 Gone).

On the sandbox, with real Kueue, the real scheduler, kwok and a device manager per H100 node, as in
test_admission_check (whose helpers this reuses):

1. Worker restart. With 3 cards free on h100-0 and 2 on h100-1, a 5-card Pod's check is Retry. The
   worker's controllers stop; while they are down two cards of h100-0 are freed (the device manager moves
   the ledger, nobody decides). A new set of controllers starts from a fresh list: the Pod is admitted,
   bound to h100-0 and Allocate hands it 5 distinct cards.
2. Devices relist. With h100-0 full, a second 5-card Pod is Retry. etcd's history is compacted and
   kube-apiserver restarted, so the running Devices informer's resume version is gone: it must relist
   (its relist counter moves). Then the first Pod leaves; the relisted ledger shows h100-0's 5 cards free
   again and the second Pod is admitted there.
"""

from __future__ import annotations

import time

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import PODS
from gpustack_operator.rules.admission.placement import RETRY_MESSAGE
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import compact_etcd, eventually
from tests.integration.test_admission_check import (
    LONG,
    POOLS,
    JSONObj,
    _equals,
    admitted,
    all_free,
    block,
    chain_setup,
    check_entry,
    entrance_ready,
    frees,
    queued,
    remove_pods,
    retried,
    running_chain,
    say,
    workload_of,
)
from tests.integration.test_device_plugin import allocation, cards_of
from tests.integration.test_informer import restart_apiserver


async def running_with_cards(kube: Client, ns: str, name: str) -> JSONObj | None:
    pod = await kube.get(PODS, name, ns)
    return pod if pod["status"].get("phase") == "Running" and allocation(pod) else None


def devices_relists(manager: Manager) -> float:
    """The Devices informer's relist count, from the manager's own metrics."""
    for metric in manager.metrics.registry.collect():
        for sample in metric.samples:
            if "relist" in sample.name and str(sample.labels.get("informer", "")).startswith("devices."):
                return sample.value
    raise AssertionError("no relist metric for the Devices informer")


async def five_cards_on_h100_0(kube: Client, ns: str, name: str) -> None:
    pod = await eventually(
        lambda: running_with_cards(kube, ns, name), timeout=LONG, what=f"{name} running with its cards"
    )
    assert pod["spec"]["nodeName"] == "h100-0"
    cards = [card for card, _, _ in cards_of(pod)]
    assert len(cards) == len(set(cards)) == 5, cards
    wl = await workload_of(kube, ns, name)
    assert admitted(wl)
    assert check_entry(wl)["state"] == "Ready"


async def test_the_check_keeps_deciding_across_a_worker_restart_and_a_devices_relist(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    ns = kueue_namespace
    async with chain_setup(kube) as (system, found):
        async with running_chain(kube, system) as first:
            await all_free(kube)
            await entrance_ready(kube, ns, first.entrance)
            blockers = await block(kube, ns, {"h100-0": 5, "h100-1": 6})
            await kube.create(PODS, queued("five", first.entrance, 5), ns)
            wl = await eventually(lambda: retried(kube, ns, "five"), timeout=LONG, what="five: Retry")
            assert check_entry(wl)["message"] == RETRY_MESSAGE
        say("restart: controllers stopped with five in Retry")

        await remove_pods(kube, ns, [n for n in blockers if n.startswith("block-h100-0-")][:2])
        await eventually(lambda: _equals(frees(kube), (5, 2)), timeout=LONG, what="ledger: 5 + 2 free")
        assert not admitted(await workload_of(kube, ns, "five")), "admitted with no check controller running"

        retire = POOLS.keys() - found.types
        async with running_chain(kube, system, retire=retire) as second:
            clock = time.monotonic()
            await five_cards_on_h100_0(kube, ns, "five")
            say(f"restart: five admitted and running {time.monotonic() - clock:.1f}s after the new start")

            await kube.create(PODS, queued("six", second.entrance, 5), ns)
            await eventually(lambda: retried(kube, ns, "six"), timeout=LONG, what="six: Retry")
            relists = devices_relists(second.manager)
            await compact_etcd(sandbox.state.ports["etcd"])  # type: ignore[union-attr]
            await restart_apiserver(sandbox, kube)
            await eventually(
                lambda: _true(devices_relists(second.manager) > relists),
                timeout=LONG,
                what="the Devices informer relisted",
            )
            say(f"relist: Devices informer relisted ({relists:.0f} -> {devices_relists(second.manager):.0f})")

            await remove_pods(kube, ns, ["five"])
            clock = time.monotonic()
            await five_cards_on_h100_0(kube, ns, "six")
            say(f"relist: six admitted and running {time.monotonic() - clock:.1f}s after five left")

            await remove_pods(kube, ns)
            await all_free(kube)


async def _true(value: bool) -> bool:
    return value
