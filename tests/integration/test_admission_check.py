"""The per-card `gpustack-node-devices` AdmissionCheck on the sandbox, end to end on real Kueue.

The whole scheduling chain (controllers.setup.CONTROLLERS, the two admission-check controllers included:
the check's decisions and its Active condition) runs in-process against real Kueue v0.17 with the chain's
credit transformations, the real scheduler, kwok and a device manager plus kubelet stand-in per GPU node
(so every Pod on a card gets a real Allocate call and moves its node's Devices ledger). Scenarios on the
H100 pool (h100-0 and h100-1, 8 cards each); queued Pods join through the pool's entrance LocalQueue:

a. fragmentation: 3 free cards on h100-0 and 2 on h100-1 (the pool has the credits for 5): a 5-card Pod
   gets Retry and stays gated; two cards freed on h100-0: Ready, admitted, bound there, 5 distinct cards;
b. two 4-card Pods queued together where only one node has 4 free cards: never both admitted, the
   second admitted once the first is gone, 20 rounds;
c. a Workload whose check is Retry, then evicted (deactivated) and deleted: the controller writes
   nothing to it afterwards and does not hot-loop (writes and reconciles counted in-process).

Cards are taken away with plain Pods (not queued: Kueue leaves them alone) pinned by
`kubernetes.io/hostname`, one exclusive `nvidia.com/gpu` each, so the device manager records them in the
ledger exactly as any Pod's. Every Pod is removed at the end of each test, and the module's teardown retires
the inventory's pools and flavors as test_chain_scenarios_pools does, so later tests find the cluster as
it was.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK as CHECK
from gpustack_operator.api.keys import SETTINGS_SECRET
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers import node_devices_admission_check
from gpustack_operator.controllers.setup import CONTROLLERS
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
    SECRETS,
    WORKLOADS,
)
from gpustack_operator.rules.admission.placement import READY_MESSAGE, RETRY_MESSAGE
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.worker.prepare import install_admission_check
from tests.helpers import consistently, eventually
from tests.integration.chain_support import running_controllers
from tests.integration.test_chain_scenarios_pools import (
    POOLS,
    by_name,
    entrances,
    found_before,
    leave_as_found,
)
from tests.integration.test_device_plugin import allocation, cards_of, ledger

H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
NODES = ("h100-0", "h100-1")
GATE = "kueue.x-k8s.io/admission"
FULL = 1_600_000
LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded 2-core machine, not an expectation)."""
ROUNDS = 20
"""Times scenario b submits its pair (each round waits out Kueue's 30 s retry, so about 11 minutes)."""


def say(line: str) -> None:
    print(f"[admission-check] {line}", flush=True)


def conditions(obj: JSONObj | None) -> dict[str, str]:
    return {c["type"]: c["status"] for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def check_entry(wl: JSONObj | None) -> JSONObj:
    entries = ((wl or {}).get("status") or {}).get("admissionChecks") or []
    return next((e for e in entries if e.get("name") == CHECK), {})


def admitted(wl: JSONObj | None) -> bool:
    return conditions(wl).get("Admitted") == "True"


# ---- counting the check controller's writes ----------------------------------------------------------------


@dataclass
class CountingClient:
    """Stands in for the check reconciler's client: forwards everything, records each status write."""

    inner: Client
    writes: list[tuple[float, str, str]] = field(default_factory=list)
    """(monotonic time, workload key, state written)."""

    async def apply(self, res: Any, body: JSONObj, **kwargs: Any) -> JSONObj:
        meta = body.get("metadata") or {}
        states = [e.get("state", "") for e in (body.get("status") or {}).get("admissionChecks") or []]
        self.writes.append(
            (time.monotonic(), f"{meta.get('namespace')}/{meta.get('name')}", ",".join(states))
        )
        return await self.inner.apply(res, body, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def of(self, key: str, since: float = 0.0) -> list[tuple[float, str, str]]:
        return [w for w in self.writes if w[1] == key and w[0] >= since]


@dataclass
class Chain:
    kube: Client
    manager: Manager
    writes: CountingClient
    entrance: str

    @property
    def reconciler(self) -> node_devices_admission_check.NodeDevicesAdmissionReconciler:
        rec = self.manager.controllers[node_devices_admission_check.NAME].spec.reconciler
        assert isinstance(rec, node_devices_admission_check.NodeDevicesAdmissionReconciler)
        return rec

    def reconciles(self) -> float:
        total = 0.0
        for metric in self.manager.metrics.registry.collect():
            for sample in metric.samples:
                name, controller = sample.name, sample.labels.get("controller")
                if (
                    name == "gpustack_controller_reconcile_total"
                    and controller == node_devices_admission_check.NAME
                ):
                    total += sample.value
        return total


# ---- the chain, in-process, for the module -----------------------------------------------------------------


async def set_setting(kube: Client, namespace: str, name: str, value: str) -> None:
    data = {name: base64.b64encode(value.encode()).decode()}
    try:
        await kube.patch(SECRETS, SETTINGS_SECRET, {"data": data}, namespace=namespace)
    except errors.NotFound:
        await kube.create(SECRETS, {"metadata": {"name": SETTINGS_SECRET}, "data": data}, namespace)


async def h100_gated_by_check(kube: Client) -> str | None:
    """The H100 queue Kueue accepts, gated by our check (Active); its type's entrance. While not, an
    AssertionError says what is missing (`eventually` reports the last one)."""
    check = await kube.get_or_none(ADMISSION_CHECKS, CHECK)
    queue = await kube.get_or_none(CLUSTER_QUEUES, H100)
    it = await kube.get_or_none(INSTANCE_TYPES, H100)
    strategy = ((queue or {}).get("spec") or {}).get("admissionChecksStrategy") or {}
    entrance = (((it or {}).get("status") or {}).get("entrance")) or None
    named = [
        f["name"]
        for group in ((queue or {}).get("spec") or {}).get("resourceGroups") or []
        for f in group.get("flavors") or []
    ]
    flavors = {f["metadata"]["name"] for f in await kube.list(RESOURCE_FLAVORS)}
    state = {
        "queue flavors missing": [name for name in named if name not in flavors] if named else "none named",
        "check Active": conditions(check).get("Active"),
        "queue Active": conditions(queue).get("Active"),
        "queue stopPolicy": ((queue or {}).get("spec") or {}).get("stopPolicy"),
        "queue checks": [c.get("name") for c in strategy.get("admissionChecks") or []],
        "type": None
        if it is None
        else ((it.get("status") or {}).get("phase"), (it.get("spec") or {}).get("inactive")),
        "entrance": entrance,
    }
    ready = (
        state["check Active"] == "True"
        and state["queue Active"] == "True"
        and state["queue stopPolicy"] in (None, "None")
        and state["queue checks"] == [CHECK]
        and state["queue flavors missing"] == []
        and entrance
    )
    assert ready, f"not yet: {state}"
    return str(entrance)


async def h100_in_service(kube: Client) -> str:
    """Wait for the H100 pool in service under a real worker; its entrance.

    An earlier module's teardown deletes the inventory's ResourceFlavors while derived types and queues
    remain, and the chain then drains the pool and marks its type inactive for good (an admin must bring a
    pool that lost its nodes back, controllers.instance_type_queue). This clears that as an admin would.
    """

    async def in_service() -> str | None:
        it = await kube.get_or_none(INSTANCE_TYPES, H100)
        if it is not None and (it.get("spec") or {}).get("inactive") is True:
            await kube.patch(INSTANCE_TYPES, H100, {"spec": {"inactive": None}})
        return await h100_gated_by_check(kube)

    async def settled() -> str:
        """In service, and still so 10 s later: a worker that has just started may recreate the pool's
        flavors, and drain and mark the type inactive on the way (then clear it again)."""
        entrance = await in_service()
        await asyncio.sleep(10)
        assert await in_service() == entrance, "the pool left service again"
        return str(entrance)

    entrance = await eventually(settled, timeout=LONG, what="the H100 pool in service, gated by the check")
    return str(entrance)


@contextlib.asynccontextmanager
async def chain_setup(kube: Client) -> AsyncIterator[tuple[str, Any]]:
    """The system namespace and the AdmissionCheck for a run of the chain; on exit the cluster is left as
    it was found (yields the namespace and what was found)."""
    found = await found_before(kube)
    system = f"ac-system-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": system}})
    had_check = await kube.get_or_none(ADMISSION_CHECKS, CHECK) is not None
    await install_admission_check(kube)
    try:
        yield system, found
    finally:
        if not had_check:
            await kube.delete(ADMISSION_CHECKS, CHECK)
            await eventually(
                lambda: _gone(kube, ADMISSION_CHECKS, CHECK), timeout=LONG, what="the AdmissionCheck deleted"
            )
        await leave_as_found(kube, found)
        await kube.delete(NAMESPACES, system)


@contextlib.asynccontextmanager
async def running_chain(kube: Client, system: str, retire: Iterable[str] = ()) -> AsyncIterator[Chain]:
    """The worker's controllers, in-process, until the H100 queue is gated by the check; on exit the
    `retire` InstanceTypes are retired first (while the controllers still run)."""
    async with running_controllers(kube, CONTROLLERS, namespace=system) as manager:
        rec = manager.controllers[node_devices_admission_check.NAME].spec.reconciler
        assert isinstance(rec, node_devices_admission_check.NodeDevicesAdmissionReconciler)
        counting = CountingClient(rec.client)
        rec.client = counting  # type: ignore[assignment]  # a transparent proxy
        started = time.monotonic()
        entrance = await eventually(
            lambda: h100_gated_by_check(kube), timeout=LONG, what="the H100 queue gated by the check"
        )
        say(f"chain built, H100 queue gated by the check {time.monotonic() - started:.1f}s after start")
        try:
            yield Chain(kube, manager, counting, entrance)
        finally:
            if retire:
                await retire_inventory_pools(kube, system, retire)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chain(sandbox: Sandbox, kube: Client) -> AsyncIterator[Chain]:
    async with (
        chain_setup(kube) as (system, found),
        running_chain(kube, system, retire=POOLS.keys() - found.types) as running,
    ):
        yield running


async def _gone(kube: Client, res: Any, name: str, namespace: str | None = None) -> bool:
    return await kube.get_or_none(res, name, namespace) is None


async def retire_inventory_pools(kube: Client, system: str, ours: Iterable[str]) -> None:
    """While the controllers run: the inventory's InstanceTypes deleted (derivation off, so they stay so);
    their queues drain and go, and the entrances with them."""
    ours = set(ours)
    await set_setting(kube, system, "instance-type-derived-from-node", "false")
    for name in ours:
        await kube.delete(INSTANCE_TYPES, name)

    async def retired() -> bool:
        left = (await by_name(kube, INSTANCE_TYPES)).keys() | (await by_name(kube, CLUSTER_QUEUES)).keys()
        return not left & ours and not await entrances(kube, ours)

    await eventually(retired, timeout=LONG, what="the inventory's types, queues and entrances retired")


# ---- Pods --------------------------------------------------------------------------------------------------


def blocker(name: str, node: str) -> JSONObj:
    """A plain Pod (no queue: Kueue leaves it alone) holding one whole card of `node`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }


def queued(name: str, queue: str, cards: int) -> JSONObj:
    """A Pod joining the pool through its entrance, asking `cards` whole cards."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(cards)}}}
            ],
        },
    }


async def free_cards(kube: Client, node: str) -> int:
    return sum(1 for _, remaining in (await ledger(kube, node)).values() if remaining >= FULL)


async def frees(kube: Client) -> tuple[int, ...]:
    return tuple([await free_cards(kube, node) for node in NODES])


async def block(kube: Client, namespace: str, counts: dict[str, int], tag: str = "block") -> list[str]:
    """`counts[node]` blockers on each node, Running with their cards in the ledger."""
    names = {f"{tag}-{node}-{i}": node for node, n in counts.items() for i in range(n)}
    await asyncio.gather(*(kube.create(PODS, blocker(n, node), namespace) for n, node in names.items()))
    want = tuple(8 - counts.get(node, 0) for node in NODES)

    async def held() -> bool:
        for name in names:
            pod = await kube.get(PODS, name, namespace)
            if pod["status"].get("phase") != "Running" or not allocation(pod):
                return False
        return await frees(kube) == want

    await eventually(held, timeout=LONG, what=f"blockers running, free cards {want}")
    return list(names)


async def remove_pods(kube: Client, namespace: str, names: Iterable[str] | None = None) -> None:
    """The Pods (all of the namespace when None) deleted and gone."""
    names = (
        [p["metadata"]["name"] for p in await kube.list(PODS, namespace)] if names is None else list(names)
    )
    for name in names:
        await kube.delete(PODS, name, namespace)

    async def gone() -> bool:
        return all([await _gone(kube, PODS, name, namespace) for name in names])

    await eventually(gone, timeout=LONG, what=f"{len(names)} pods of {namespace} deleted")


async def all_free(kube: Client) -> None:
    async def free() -> bool:
        return await frees(kube) == (8, 8)

    await eventually(free, timeout=LONG, what="every H100 card free")


async def workload_of(kube: Client, namespace: str, pod: str) -> JSONObj | None:
    for wl in await kube.list(WORKLOADS, namespace):
        if pod in [o.get("name") for o in wl["metadata"].get("ownerReferences") or []]:
            return wl
    return None


def key_of(wl: JSONObj) -> str:
    return f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"


async def exclusive_remaining(kube: Client) -> int:
    it = await kube.get(INSTANCE_TYPES, H100)
    return Quantity.parse(str(it["status"]["accelerator"]["remaining"])).value()


def gated(pod: JSONObj) -> bool:
    return GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []] and not pod["spec"].get(
        "nodeName"
    )


async def entrance_ready(kube: Client, namespace: str, entrance: str) -> None:
    async def there() -> bool:
        return await kube.get_or_none(LOCAL_QUEUES, entrance, namespace) is not None

    await eventually(there, timeout=LONG, what=f"entrance {entrance} in {namespace}")


async def retried(kube: Client, namespace: str, pod: str) -> JSONObj | None:
    wl = await workload_of(kube, namespace, pod)
    if wl is None or check_entry(wl).get("state") != "Retry":
        return None
    return wl


# ---- a. fragmentation --------------------------------------------------------------------------------------


async def test_a_five_card_pod_waits_while_no_node_has_five_free_cards_then_lands_whole_on_one(
    chain: Chain, kueue_namespace: str
) -> None:
    kube, ns = chain.kube, kueue_namespace
    await all_free(kube)
    await entrance_ready(kube, ns, chain.entrance)
    # The spread is forced by pinning: 5 one-card blockers on h100-0 and 6 on h100-1 (nodeSelector
    # kubernetes.io/hostname); 3 + 2 cards are free, the pool's quota (16 cards of credits) has room for 5.
    blockers = await block(kube, ns, {"h100-0": 5, "h100-1": 6})
    assert await frees(kube) == (3, 2)
    await eventually(lambda: _equals(exclusive_remaining(kube), 5), timeout=LONG, what="exclusive view 5")

    clock = time.monotonic()
    await kube.create(PODS, queued("five", chain.entrance, 5), ns)
    wl = await eventually(lambda: retried(kube, ns, "five"), timeout=LONG, what="the 5-card check Retry")
    say(f"a: 3+2 free: Retry {time.monotonic() - clock:.1f}s after the Pod was created")
    entry = check_entry(wl)
    assert entry["message"] == RETRY_MESSAGE
    assert entry.get("requeueAfterSeconds") == 30
    assert conditions(wl).get("QuotaReserved") == "True", "Kueue's quota had room: only the check refused"
    assert not admitted(wl)

    # It stays unadmitted and gated through a whole Kueue retry cycle (30 s, then evicted and requeued).
    cycle_end, states = time.monotonic() + 40, set[str]()
    while time.monotonic() < cycle_end:
        now = await workload_of(kube, ns, "five")
        pod = await kube.get(PODS, "five", ns)
        assert not admitted(now), "admitted while no node has 5 free cards"
        assert gated(pod), pod["spec"]
        states.add(str(check_entry(now).get("state")))
        await asyncio.sleep(1)
    say(f"a: over 40 s the check went through {sorted(states)}; never admitted, Pod gated")

    freed = [n for n in blockers if n.startswith("block-h100-0-")][:2]
    await remove_pods(kube, ns, freed)
    clock = time.monotonic()

    async def landed() -> JSONObj | None:
        pod = await kube.get(PODS, "five", ns)
        return pod if pod["status"].get("phase") == "Running" and allocation(pod) else None

    pod = await eventually(landed, timeout=LONG, what="the 5-card Pod running with its cards")
    say(f"a: h100-0 has 5 free: Pod Running with 5 cards {time.monotonic() - clock:.1f}s after freeing")
    done = await workload_of(kube, ns, "five")
    assert admitted(done)
    assert check_entry(done)["state"] == "Ready"
    assert check_entry(done)["message"] == READY_MESSAGE
    assert pod["spec"]["nodeName"] == "h100-0"
    cards = [card for card, mode, _ in cards_of(pod)]
    assert len(cards) == len(set(cards)) == 5
    assert all(mode == 1 for _, mode, _ in cards_of(pod))
    await eventually(lambda: _equals(frees(kube), (0, 2)), timeout=LONG, what="ledger: 0 + 2 free")
    # the exclusive view: 5 before, +2 freed, -5 taken
    await eventually(lambda: _equals(exclusive_remaining(kube), 2), timeout=LONG, what="exclusive view 2")

    await remove_pods(kube, ns)
    await all_free(kube)


async def _equals(value: Any, want: Any) -> bool:
    return bool(await value == want)


# ---- b. the last four cards, twice asked -------------------------------------------------------------------


async def one_running(
    kube: Client, ns: str, pair: tuple[str, str], names: tuple[str, ...], broken: list[str]
) -> str | None:
    """The first of `names` Running with its cards; what must never be is noted in `broken`."""
    wls = [await workload_of(kube, ns, n) for n in pair]
    pods = {n: await kube.get_or_none(PODS, n, ns) for n in pair}
    if sum(admitted(w) for w in wls) > 1:
        broken.append(f"{pair}: both admitted at once")
    if sum(1 for p in pods.values() if p and p["spec"].get("nodeName")) > 1:
        broken.append(f"{pair}: both bound at once")
    for n in names:
        pod = pods[n]
        if pod and pod["status"].get("phase") == "Running" and allocation(pod):
            if pod["spec"]["nodeName"] != "h100-0":
                broken.append(f"{n} bound to {pod['spec']['nodeName']}")
            return n
    return None


async def test_two_four_card_pods_asking_for_the_last_four_cards_are_never_both_admitted(
    chain: Chain, kueue_namespace: str
) -> None:
    kube, ns = chain.kube, kueue_namespace
    await all_free(kube)
    await entrance_ready(kube, ns, chain.entrance)
    await block(kube, ns, {"h100-0": 4, "h100-1": 8})
    rounds, waits = 0, []
    broken: list[str] = []
    while rounds < ROUNDS:
        pair = (f"r{rounds}-a", f"r{rounds}-b")
        clock = time.monotonic()
        await asyncio.gather(*(kube.create(PODS, queued(n, chain.entrance, 4), ns) for n in pair))

        first = await eventually(
            partial(one_running, kube, ns, pair, pair, broken),
            timeout=LONG,
            interval=0.5,
            what="one of the pair",
        )
        second = pair[1] if first == pair[0] else pair[0]
        assert not admitted(await workload_of(kube, ns, second))
        await kube.delete(PODS, first, ns)
        freed = time.monotonic()
        await eventually(
            partial(one_running, kube, ns, pair, (second,), broken),
            timeout=LONG,
            interval=0.5,
            what="the second",
        )
        waits.append(time.monotonic() - freed)
        assert not broken, broken
        await remove_pods(kube, ns, pair)
        await eventually(lambda: _equals(frees(kube), (4, 0)), timeout=LONG, what="4 free on h100-0 again")
        rounds += 1
        say(
            f"b: round {rounds}: one admitted, the other after the first left ({waits[-1]:.1f}s), "
            f"round {time.monotonic() - clock:.1f}s"
        )
    say(
        f"b: {rounds} rounds, never both admitted; second admitted after the first left: "
        f"max {max(waits):.1f}s, mean {sum(waits) / len(waits):.1f}s"
    )
    await remove_pods(kube, ns)
    await all_free(kube)


# ---- c. Retry, then evicted and deleted --------------------------------------------------------------------


async def test_a_retry_workload_evicted_or_deleted_is_left_alone_without_a_hot_loop(
    chain: Chain, kueue_namespace: str
) -> None:
    kube, ns = chain.kube, kueue_namespace
    await all_free(kube)
    await entrance_ready(kube, ns, chain.entrance)
    await block(kube, ns, {"h100-0": 4, "h100-1": 4})
    await kube.create(PODS, queued("stuck", chain.entrance, 5), ns)
    wl = await eventually(lambda: retried(kube, ns, "stuck"), timeout=LONG, what="the 5-card check Retry")
    key = key_of(wl)
    since, reconciles = time.monotonic(), chain.reconciles()

    # Kueue's own cycle: Retry keeps the reservation 30 s, then evicts and requeues; each new reservation
    # is decided once more (one write per cycle at most), never a loop.
    def cycling_calmly() -> bool:
        writes = chain.writes.of(key, since)
        assert len(writes) <= 3, writes
        assert all(state == "Retry" for _, _, state in writes), writes
        assert chain.reconciles() - reconciles <= 40, chain.reconciles() - reconciles
        return True

    await consistently(cycling_calmly, duration=65, interval=1.0, what="at most one Retry write per cycle")
    writes = chain.writes.of(key, since)
    spent = chain.reconciles() - reconciles
    say(f"c: 65 s of Retry cycles: {len(writes)} writes {[w[2] for w in writes]}, {spent:.0f} reconciles")

    # Evicted by deactivation: Kueue resets the check; we write nothing to it any more.
    await kube.patch(WORKLOADS, wl["metadata"]["name"], {"spec": {"active": False}}, namespace=ns)

    async def evicted() -> JSONObj | None:
        found = await workload_of(kube, ns, "stuck")
        return found if conditions(found).get("Evicted") == "True" else None

    wl = await eventually(evicted, timeout=LONG, what="the workload evicted")
    state = check_entry(wl).get("state")
    since, reconciles = time.monotonic(), chain.reconciles()

    async def left_alone() -> bool:
        assert chain.writes.of(key, since) == []
        assert check_entry(await workload_of(kube, ns, "stuck")).get("state") == state
        assert chain.reconciles() - reconciles <= 10
        assert key not in chain.reconciler.promises
        return True

    await consistently(left_alone, duration=20, interval=1.0, what="the evicted workload's check left alone")
    say(
        f"c: evicted: check {state!r}, then {len(chain.writes.of(key, since))} writes, "
        f"{chain.reconciles() - reconciles:.0f} reconciles in 20 s"
    )

    since = time.monotonic()
    await remove_pods(kube, ns)

    def no_write() -> bool:
        assert chain.writes.of(key, since) == []
        assert key not in chain.reconciler.promises
        return True

    await consistently(no_write, duration=5, what="no write once its pods are gone")
    await all_free(kube)
