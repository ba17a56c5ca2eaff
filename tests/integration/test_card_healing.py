"""Cards that fail and heal on the sandbox, and a vendor whose cards go and come back, with nothing restarted.

The sandbox's A10 node (a10-0, 4 cards) runs `device-manager serve --backend simulated` with a faults file
(`<run dir>/nodes/a10-0/faults.yaml`), next to a kubelet stand-in that publishes capacity = advertised
devices and allocatable = healthy ones, as the kubelet does. Writing a card's UUID there is what a user
does to fault a card on the sandbox; the device manager re-reads it every 5 s.

1. A card turns unhealthy: ListAndWatch reports it unhealthy, so the node's allocatable drops by one card
   in every mode while its capacity stays; its Devices object says `unhealthy: true`; with the worker's
   controllers running in-process, the A10 InstanceType's three views drop by one card (capacity kept).
   The fault clears: only after the device manager's recovery checks (3 healthy readings 5 s apart, so
   not before 10 s) does the card read healthy again, and both come back.
2. Every A10 card disappears (the driver unloads): the vendor's plugin servers stop and their sockets go,
   so nothing of it is allocatable; the cards return: the servers come back and register again.

The device manager's process is the same one throughout. Each test puts the faults file back empty.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gpustack_operator.controllers import (
    devices_labels,
    instance_type,
    node_capacity,
    node_feature,
    node_flavor,
    node_queue,
)
from gpustack_operator.device_manager.health import DEFAULT_RECOVERY_CHECKS
from gpustack_operator.device_manager.serve import parse_duration
from gpustack_operator.device_manager.simulated import Faults, simulated_uuid
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import DEVICES, INSTANCE_TYPES, NAMESPACES, NODES
from gpustack_operator.sandbox import nodeagents
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.chain_support import running_controllers
from tests.integration.test_admission_check import retire_inventory_pools
from tests.integration.test_chain_scenarios_pools import POOLS, found_before, leave_as_found
from tests.integration.test_device_plugin import ledger

NODE = "a10-0"
CARDS = [simulated_uuid(NODE, "nvidia", index) for index in range(4)]
A10 = "gpustack--nvidia-a10-linux-amd64"
RESOURCES = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/gpu.sliced",
    "device.gpustack.ai/nvidia.visibility",
)
VIEWS = {"accelerator": 1, "acceleratorShared": 10, "acceleratorSliced": 100}
"""Each view's units per card: whole cards, owner shares, VRAM percent."""
FACTORIES = (
    node_feature.controller,
    node_capacity.controller,
    devices_labels.controller,
    node_flavor.controller,
    instance_type.controller,
    node_queue.controller,
)
LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded 2-core machine, not an expectation)."""
FULL = 1_600_000
HELD_AT_LEAST = (DEFAULT_RECOVERY_CHECKS - 1) * parse_duration(nodeagents.MONITOR_PERIOD) - 0.5
"""The first healthy reading may come right after the fault clears; the last of the checks in a row comes
whole periods later (less a margin for the instant the file was written)."""


def say(line: str) -> None:
    print(f"[card-healing] {line}", flush=True)


def faults_file(sandbox: Sandbox) -> Path:
    return nodeagents.faults_file(sandbox.run_dir, NODE)


async def extended(kube: Client) -> dict[str, tuple[int, int]]:
    """The A10 resources of the node as the scheduler reads them: (capacity, allocatable)."""
    status = (await kube.get(NODES, NODE)).get("status") or {}
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    return {r: (int(capacity.get(r, "0")), int(allocatable.get(r, "0"))) for r in RESOURCES}


async def card_health(kube: Client) -> dict[str, bool]:
    """Card UUID -> unhealthy, as the node's Devices object reports it."""
    devices = await kube.get(DEVICES, NODE)
    return {
        acc["id"]: bool(acc["status"]["unhealthy"])
        for group in (devices.get("spec") or {}).get("groups") or []
        for acc in group.get("accelerators") or []
    }


async def views(kube: Client) -> dict[str, tuple[int, int]]:
    """Each accelerator view of the A10 InstanceType: (capacity, remaining); empty before its status."""
    it = await kube.get_or_none(INSTANCE_TYPES, A10)
    status = (it or {}).get("status") or {}
    return {v: (int(status[v]["capacity"]), int(status[v]["remaining"])) for v in VIEWS if v in status}


def device_manager_pid(sandbox: Sandbox) -> int:
    assert sandbox.state is not None
    name = nodeagents.device_manager_name(NODE)
    assert sandbox.state.alive(name), "the device manager is running"
    return sandbox.state.pids[name]


@pytest_asyncio.fixture(loop_scope="session")
async def chain(sandbox: Sandbox, kube: Client) -> AsyncIterator[dict[str, tuple[int, int]]]:
    """The worker's node-to-InstanceType controllers, in-process; yields the A10 views once they are whole."""
    found = await found_before(kube)
    system = f"heal-system-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": system}})
    try:
        async with running_controllers(kube, FACTORIES, namespace=system):
            started = time.monotonic()

            async def whole() -> dict[str, tuple[int, int]] | None:
                shown = await views(kube)
                return shown if shown.get("accelerator", (0, 0))[0] == 4 else None

            shown = await eventually(whole, timeout=LONG, what="the A10 InstanceType shows its 4 cards")
            say(f"chain built, A10 views {shown} {time.monotonic() - started:.1f}s after start")
            try:
                yield shown
            finally:
                await retire_inventory_pools(kube, system, POOLS.keys() - found.types)
    finally:
        await leave_as_found(kube, found)
        await kube.delete(NAMESPACES, system)


async def test_a_faulted_card_leaves_allocatable_and_the_views_then_comes_back_once_healed(
    sandbox: Sandbox, kube: Client, chain: dict[str, tuple[int, int]]
) -> None:
    pid = device_manager_pid(sandbox)
    free = [card for card, (_, remaining) in (await ledger(kube, NODE)).items() if remaining >= FULL]
    assert free, "a free A10 card to fault"
    sick = free[-1]
    before = await extended(kube)
    assert all(cap > 0 and alloc == cap for cap, alloc in before.values()), before

    async def views_settled() -> dict[str, tuple[int, int]] | None:
        """Eventually consistent: the views once they agree with the free cards the ledger shows."""
        shown = await views(kube)
        free_now = sum(1 for _, remaining in (await ledger(kube, NODE)).values() if remaining >= FULL)
        return shown if shown.get("accelerator", (0, -1))[1] == free_now else None

    healthy_views = await eventually(views_settled, timeout=LONG, what="the A10 views settled")
    per_card = {r: cap // 4 for r, (cap, _) in before.items()}
    dropped = {r: (cap, alloc - per_card[r]) for r, (cap, alloc) in before.items()}
    sick_views = {v: (cap, remaining - VIEWS[v]) for v, (cap, remaining) in healthy_views.items()}

    Faults(unhealthy={sick}).save(faults_file(sandbox))
    started = time.monotonic()
    try:

        async def reported_unhealthy() -> bool:
            return (await card_health(kube)).get(sick) is True

        await eventually(reported_unhealthy, timeout=LONG, what=f"card {sick} unhealthy in Devices")
        say(f"fault reported in Devices after {time.monotonic() - started:.1f}s")

        async def allocatable_dropped() -> bool:
            return await extended(kube) == dropped

        await eventually(allocatable_dropped, timeout=LONG, what=f"node allocatable {dropped}")
        say(f"allocatable dropped by one card after {time.monotonic() - started:.1f}s: {dropped}")

        async def views_dropped() -> bool:
            return await views(kube) == sick_views

        await eventually(views_dropped, timeout=LONG, what=f"A10 views {sick_views}")
        say(f"InstanceType views dropped after {time.monotonic() - started:.1f}s: {sick_views}")
        assert (await ledger(kube, NODE))[sick] == (0, FULL), "the ledger still lists the card, untouched"
    finally:
        Faults().save(faults_file(sandbox))
    cleared = time.monotonic()

    async def healed() -> bool:
        return (await card_health(kube)).get(sick) is False

    await eventually(healed, timeout=LONG, what=f"card {sick} healthy again in Devices")
    healed_after = time.monotonic() - cleared
    say(f"healed in Devices {healed_after:.1f}s after the fault cleared ({DEFAULT_RECOVERY_CHECKS} checks)")
    assert healed_after >= HELD_AT_LEAST, "a cleared fault is held until enough healthy checks in a row"

    async def allocatable_back() -> bool:
        return await extended(kube) == before

    await eventually(allocatable_back, timeout=LONG, what=f"node allocatable back to {before}")

    async def views_back() -> bool:
        return await views(kube) == healthy_views

    await eventually(views_back, timeout=LONG, what=f"A10 views back to {healthy_views}")
    say(f"allocatable and views back {time.monotonic() - cleared:.1f}s after the fault cleared")
    assert device_manager_pid(sandbox) == pid, "nothing was restarted"


async def test_a_vendor_whose_cards_all_go_stops_serving_and_serves_again_when_they_return(
    sandbox: Sandbox, kube: Client
) -> None:
    pid = device_manager_pid(sandbox)
    sockets = nodeagents.plugin_dir(sandbox.run_dir, NODE)
    before = await extended(kube)
    assert all(alloc == cap > 0 for cap, alloc in before.values()), before

    def served() -> list[str]:
        return sorted(path.name for path in sockets.glob("gpustack-nvidia-*.sock"))

    serving = served()
    assert len(serving) == 4, serving
    Faults(missing=set(CARDS)).save(faults_file(sandbox))
    started = time.monotonic()
    try:

        async def stopped() -> bool:
            nothing = all(alloc == 0 for _, alloc in (await extended(kube)).values())
            return nothing and not served()

        await eventually(stopped, timeout=LONG, what="the NVIDIA plugins stopped, their sockets gone")
        say(f"A10 cards gone: plugins stopped, nothing allocatable {time.monotonic() - started:.1f}s later")
    finally:
        Faults().save(faults_file(sandbox))
    cleared = time.monotonic()

    async def back() -> bool:
        return served() == serving and await extended(kube) == before

    await eventually(back, timeout=LONG, what=f"the NVIDIA plugins serving again, allocatable {before}")
    say(f"cards back: plugins registered and allocatable whole {time.monotonic() - cleared:.1f}s later")
    assert device_manager_pid(sandbox) == pid, "nothing was restarted"
