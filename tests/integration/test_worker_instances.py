"""Instances end to end on the sandbox: `kubectl create` an Instance, and a real worker runs it as a Pod that
real Kueue admits through the per-card check, the scheduler binds, and the device manager allocates.

One `gpustack-operator worker` (controllers, aggregated API, webhooks) serves the module; the Instances use
the H100 pool the worker derives from the sandbox's nodes (h100-0, h100-1: 8 cards each). Each test removes
its Instances (their Pods go with them) and leaves the pool as it found it.

Named `test_worker_*` to run with the other tests that start a real worker, after the chain tests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, INSTANCE_TYPES, INSTANCES, PODS, SECRETS
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.test_admission_check import H100, LONG, h100_in_service
from tests.integration.test_device_plugin import cards_of, ledger, stand_in_record
from tests.integration.test_worker_webhooks import UNITS, create, instance
from tests.integration.worker_support import Kubectl, Served, serving_worker

EXCLUSIVE, SLICED_MODE = 1, 3
FREE = (0, 1_600_000)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(sandbox, kube, tmp_path_factory.mktemp("instances"), "inst-0") as served:
        await h100_in_service(kube)
        yield served


@pytest_asyncio.fixture(loop_scope="session")
async def space(kube: Client, kueue_namespace: str, served: Served) -> AsyncIterator[str]:
    """A namespace Kueue knows, whose Instances are deleted (and their Pods gone) at the end."""
    yield kueue_namespace
    for obj in await kube.list(INSTANCES, kueue_namespace):
        await kube.delete(INSTANCES, obj["metadata"]["name"], kueue_namespace)

    async def pods_gone() -> bool:
        return not await kube.list(PODS, kueue_namespace)

    await eventually(pods_gone, timeout=LONG, what="the Instances' Pods gone")


async def status_of(kube: Client, namespace: str, name: str) -> JSONObj:
    return (await kube.get(INSTANCES, name, namespace)).get("status") or {}


async def reaches(kube: Client, namespace: str, name: str, phase: str) -> JSONObj:
    async def there() -> JSONObj:
        status = await status_of(kube, namespace, name)
        assert status.get("phase") == phase, f"not yet: {status}"
        return status

    return await eventually(there, timeout=LONG, what=f"Instance {namespace}/{name} {phase}")


def allocated_cards(status: JSONObj) -> list[tuple[str, int]]:
    """(card UUID, mode) of every card in the Instance's status allocations."""
    return [
        (acc["id"], acc["mode"])
        for group in status.get("allocations") or []
        for acc in group.get("accelerators") or []
    ]


async def offering(kube: Client, type_name: str = H100) -> None:
    """Wait until the type offers whole cards (none while its queue drains, as in test 4)."""

    async def offered() -> bool:
        it = await kube.get(INSTANCE_TYPES, type_name)
        once = ((it.get("status") or {}).get("accelerator") or {}).get("onceMaxRequest")
        return once not in (None, "0", 0)

    await eventually(offered, timeout=LONG, what=f"InstanceType {type_name} offering whole cards")


async def started(kube: Client, kubectl: Kubectl, namespace: str, **spec: Any) -> str:
    await offering(kube)
    obj, err = await create(kubectl, instance(namespace, H100, **spec))
    assert obj is not None, err
    return str(obj["metadata"]["name"])


async def test_1_a_two_card_instance_runs_in_its_queue_and_shows_its_cards(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 2})
    status = await reaches(kube, space, name, "Running")
    pod = await kube.get(PODS, name, space)
    entrance = (await kube.get(INSTANCE_TYPES, H100))["status"]["entrance"]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == entrance
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert status["nodeName"] == pod["spec"]["nodeName"]
    cards = allocated_cards(status)
    assert len(cards) == 2
    assert {mode for _, mode in cards} == {EXCLUSIVE}
    assert sorted(card for card, _, _ in cards_of(pod)) == sorted(card for card, _ in cards)
    out = await kubectl.ok("get", "instances", "-n", space)
    header, row = out.splitlines()[0].split(), next(r.split() for r in out.splitlines() if r.startswith(name))
    assert header == ["NAME", "TYPE", "PHASE", "NODE", "STOP", "AGE"]
    assert row[1:4] == [H100, "Running", status["nodeName"]]  # STOP is blank while unset


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric in a Prometheus scrape, by their sorted labels."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


async def test_1b_the_workers_metrics_show_the_pool_as_its_instancetype_does_and_count_the_decision(
    kube: Client, kubectl: Kubectl, space: str, served: Served
) -> None:
    name = await started(kube, kubectl, space, resources={"accelerator": 2})
    await reaches(kube, space, name, "Running")
    pool = (("pool", H100),)

    async def as_the_instancetype_says() -> bool:  # the status catches up with the ledger, the scrape too
        status = (await kube.get(INSTANCE_TYPES, H100))["status"]["accelerator"]
        text = await served.worker.metrics()
        seen = {
            field: samples(text, f"gpustack_pool_{part}_cards").get(pool)
            for field, part in (
                ("capacity", "capacity"),
                ("remaining", "remaining"),
                ("onceMaxRequest", "once_max_request"),
            )
        }
        assert seen == {field: float(status[field]) for field in seen}, (seen, status)
        assert seen["remaining"] is not None
        assert seen["capacity"] is not None
        assert seen["remaining"] <= seen["capacity"] - 2, "the Instance's two cards are not counted"
        return True

    await eventually(as_the_instancetype_says, timeout=LONG, what="the pool's metrics as its InstanceType")
    text = await served.worker.metrics()
    assert samples(text, "gpustack_pool_active").get(pool) == 1.0
    decided = samples(text, "gpustack_admission_check_decision_seconds_count")
    assert decided.get((("reason", "fits"), ("result", "Ready")), 0) >= 1, decided


async def test_2_a_sliced_instance_runs_on_a_slice_the_ledger_shows(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(
        kube,
        kubectl,
        space,
        resources={"acceleratorSlicedMemoryPercentage": 25, "acceleratorSlicedCoresPercentage": 50},
    )
    status = await reaches(kube, space, name, "Running")
    limits = (await kube.get(PODS, name, space))["spec"]["containers"][0]["resources"]["limits"]
    assert (limits[UNITS], limits["nvidia.com/gpu.sliced.cores-percentage"]) == ("400k", "50")
    ((card, mode),) = allocated_cards(status)
    assert mode == SLICED_MODE

    async def charged() -> bool:
        return (await ledger(kube, status["nodeName"])).get(card) == (SLICED_MODE, 1_200_000)

    await eventually(charged, timeout=60, what="the ledger shows a quarter of the card taken")


async def test_3_stop_frees_the_cards_and_start_brings_it_back(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space)
    status = await reaches(kube, space, name, "Running")
    ((card, _),) = allocated_cards(status)
    node = status["nodeName"]
    patch = ("patch", "instance", name, "-n", space, "--type=merge", "-p")
    await kubectl.ok(*patch, '{"spec":{"stop":true}}')
    await reaches(kube, space, name, "Stopped")
    assert await kube.get_or_none(PODS, name, space) is None

    async def freed() -> bool:
        return (await ledger(kube, node)).get(card) == FREE

    await eventually(freed, timeout=LONG, what="the stopped Instance's card free again")
    await kubectl.ok(*patch, '{"spec":{"stop":false}}')
    status = await reaches(kube, space, name, "Running")
    assert len(allocated_cards(status)) == 1


async def _events(kube: Client, namespace: str, name: str, reason: str) -> list[str]:
    """Notes of the Events about the Instance (its Pod has the same name, and Kueue's Events)."""
    events = await kube.list(resources.EVENTS, namespace)
    return [
        str(e.get("note") or "")
        for e in events
        if (e.get("regarding") or {}).get("kind") == "Instance"
        and (e.get("regarding") or {}).get("name") == name
        and e.get("reason") == reason
    ]


async def _set_stop_policy(kube: Client, policy: str) -> None:
    await kube.patch(CLUSTER_QUEUES, H100, {"spec": {"stopPolicy": policy}})


async def _set_inactive(kube: Client, inactive: bool) -> None:
    await kube.patch(INSTANCE_TYPES, H100, {"spec": {"inactive": inactive}})


async def test_4_an_admin_hold_keeps_instances_and_a_drain_stops_them(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    running = await started(kube, kubectl, space)
    await reaches(kube, space, running, "Running")
    try:
        await _set_inactive(kube, True)  # the admin's Hold: the queue admits nothing new

        async def held() -> bool:
            return (await kube.get(CLUSTER_QUEUES, H100))["spec"].get("stopPolicy") == "Hold"

        await eventually(held, timeout=LONG, what="the H100 queue on Hold")
        waiting = await started(kube, kubectl, space)
        await reaches(kube, space, waiting, "Pending")
        await asyncio.sleep(3)
        assert (await status_of(kube, space, running))["phase"] == "Running"
        assert not (await kube.get(INSTANCES, running, space))["spec"].get("stop")

        await _set_stop_policy(kube, "HoldAndDrain")  # what the chain does to a pool that lost its nodes
        for name in (running, waiting):
            await reaches(kube, space, name, "Stopped")
            assert (await kube.get(INSTANCES, name, space))["spec"]["stop"] is True
            notes = await eventually(
                lambda name=name: _events(kube, space, name, "Stopped"), timeout=60, what="a Stopped Event"
            )
            assert "draining" in notes[0]
    finally:
        await _set_stop_policy(kube, "Hold")
        await _set_inactive(kube, False)

        async def resumed() -> bool:
            return (await kube.get(CLUSTER_QUEUES, H100))["spec"].get("stopPolicy") == "None"

        await eventually(resumed, timeout=LONG, what="the H100 queue running again")


async def test_5_the_ssh_sidecar_sees_the_same_card_and_the_ledger_counts_it_once(
    sandbox: Sandbox, kube: Client, kubectl: Kubectl, space: str
) -> None:
    key = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "my-key"},
        "stringData": {"key": "ssh-ed25519 AAAA test"},
    }
    await kube.create(SECRETS, key, space)
    name = await started(kube, kubectl, space, sshPublicKey={"name": "my-key"})
    status = await reaches(kube, space, name, "Running")
    pod = await kube.get(PODS, name, space)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "sshd"]
    ((card, mode),) = allocated_cards(status)
    assert mode == EXCLUSIVE
    record = (await stand_in_record(sandbox, status["nodeName"], space, name))["containers"]
    main_env = record["main"]["nvidia.com/gpu"]["envs"]
    sshd_env = record["sshd"]["device.gpustack.ai/nvidia.visibility"]["envs"]
    assert main_env["NVIDIA_VISIBLE_DEVICES"] == sshd_env["NVIDIA_VISIBLE_DEVICES"] == card
    cards = await ledger(kube, status["nodeName"])
    assert cards[card] == (EXCLUSIVE, 0)
    assert len(cards_of(pod)) == 1


async def test_6_a_pod_deleted_by_someone_else_is_recreated_and_runs_again(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    name = await started(kube, kubectl, space)
    await reaches(kube, space, name, "Running")
    lost = (await kube.get(PODS, name, space))["metadata"]["uid"]
    await kubectl.ok("delete", "pod", name, "-n", space, "--wait=false")

    async def replaced() -> JSONObj:
        pod = await kube.get_or_none(PODS, name, space)
        assert pod is not None, "no Pod yet"
        assert pod["metadata"]["uid"] != lost, "still the deleted Pod"
        return pod

    pod = await eventually(replaced, timeout=LONG, what="the Instance's Pod recreated")
    assert pod["metadata"]["ownerReferences"][0]["name"] == name

    async def follows_the_new_pod() -> bool:  # Running again, with the cards the new Pod was given
        status = await status_of(kube, space, name)
        now = await kube.get(PODS, name, space)
        assert now["metadata"]["uid"] == pod["metadata"]["uid"]
        assert status.get("phase") == "Running", status
        assert status.get("nodeName") == now["spec"].get("nodeName")
        assert sorted(card for card, _ in allocated_cards(status)) == sorted(c for c, _, _ in cards_of(now))
        assert len(allocated_cards(status)) == 1
        return True

    await eventually(follows_the_new_pod, timeout=LONG, what="the Instance running on its new Pod")


async def _quiet(kube: Client, namespace: str, name: str, seconds: float = 8.0) -> int:
    """How many times the Instance changed over `seconds` (its resourceVersion)."""
    versions = set()
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        versions.add((await kube.get(INSTANCES, name, namespace))["metadata"]["resourceVersion"])
        await asyncio.sleep(0.5)
    return len(versions) - 1


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        pytest.param(
            {"volume": {"persistent": {"name": "no-such-claim"}}},
            'PersistentVolumeClaim "no-such-claim"',
            id="pvc",
        ),
        pytest.param(
            {"imagePullSecret": {"name": "no-such-secret"}}, 'Secret "no-such-secret"', id="pull-secret"
        ),
        pytest.param({"sshPublicKey": {"name": "no-such-key"}}, 'Secret "no-such-key"', id="ssh-key"),
    ],
)
async def test_7_a_missing_claim_or_secret_is_said_on_the_instance_without_a_hot_loop(
    kube: Client, kubectl: Kubectl, space: str, spec: JSONObj, says: str
) -> None:
    name = await started(kube, kubectl, space, **spec)

    async def said() -> JSONObj | None:
        status = await status_of(kube, space, name)
        return status if says in str(status.get("phaseMessage")) else None

    status = await eventually(said, timeout=LONG, what="the Instance saying what it waits for")
    assert status["phase"] == "Pending"
    notes = await eventually(
        lambda: _events(kube, space, name, "MissingDependency"), timeout=60, what="an Event"
    )
    assert says in notes[0]
    assert await kube.get_or_none(PODS, name, space) is None
    assert await _quiet(kube, space, name) == 0


async def test_7_an_instance_whose_type_goes_away_is_stopped_with_an_event(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    h100 = await kube.get(INSTANCE_TYPES, H100)
    twin = f"twin-{uuid.uuid4().hex[:6]}"
    spec = {k: v for k, v in h100["spec"].items() if k not in ("inactive", "displayName", "description")}
    manifest = {"apiVersion": INSTANCE_TYPES.api_version, "kind": "InstanceType", "metadata": {"name": twin}}
    await kube.create(INSTANCE_TYPES, {**manifest, "spec": spec})
    try:
        await offering(kube, twin)
        obj, err = await create(kubectl, instance(space, twin))
        assert obj is not None, err
        name = obj["metadata"]["name"]
        await kube.delete(INSTANCE_TYPES, twin)
        await reaches(kube, space, name, "Stopped")
        notes = await eventually(
            lambda: _events(kube, space, name, "Stopped"), timeout=60, what="a Stopped Event"
        )
        assert twin in notes[0]
    finally:
        await kube.delete(INSTANCE_TYPES, twin)
