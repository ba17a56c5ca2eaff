"""What an admin does to a running chain, and what a user then sees with kubectl, on the real worker process.

One `gpustack-operator worker` (worker_support) runs for the module in a system namespace of its own and
builds the whole chain from the sandbox's nodes: ResourceFlavors, derived InstanceTypes, ClusterQueues,
LocalQueues in every namespace. Pods are queued into the A10 pool through its entrance LocalQueue, Kueue
admits them, the scheduler binds them to a10-0, the kubelet stand-in calls the real device manager, and
its Devices ledger is what the InstanceType's views are computed from. The scenarios:

- 4: `spec.inactive` holds the pool's queue (StopPolicy Hold): what runs keeps running, what comes waits
  gated, and clearing it admits the waiting Pod (contract §7.9, kueue-api §3.4);
- 6: the three views (exclusive, shared, sliced) drop by the contract's per-card math as Pods take cards,
  and rise back when they go (contract §7.9 "Three-view math");
- 7: deleting an InstanceType drains and deletes its queue, then releases the finalizer; the type comes
  back only while `instance-type-derived-from-node` is on (NodeFlavor authors it create-only);
- 9: bad input (a node with over-long and garbage labels, a Devices of an unknown manufacturer, a setting
  that does not parse) gets a Warning Event on the object and a log line naming it, while a node added
  meanwhile still gets its flavor and every pool stays Active;
- 10: the worker SIGKILLed at 20 random moments while it builds the chain from scratch ends with the
  same objects (names, labels, specs) as an undisturbed build, with no duplicate or orphaned queue.

The module starts from a clean chain (what an earlier module may have left is removed) and removes every
chain object its worker made before it ends, restoring every setting it changed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    ACCELERATOR_ALLOCATED_ANNOTATION,
    CONTROLLED_FINALIZER,
    DERIVED_FROM_NODE_LABEL,
    GENERAL_FEATURE_PREFIX,
    MANAGED_LABEL,
    QUEUE_ANNOTATION,
    RESOURCE_TYPE_LABEL,
    SETTINGS_SECRET,
)
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import conditions
from gpustack_operator.kube.resources import (
    CLUSTER_QUEUES,
    DEVICES,
    EVENTS,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODE_FEATURES,
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    SECRETS,
    WORKLOADS,
    Resource,
)
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Worker, Workers, ready, worker_pool

A10 = "gpustack--nvidia-a10-linux-amd64"
A10_NODE = "a10-0"
CPU_POOL = "gpustack--generic-linux-amd64"
DERIVED = {
    A10,
    CPU_POOL,
    "gpustack--generic-linux-arm64",
    "gpustack--nvidia-h100-80gb-hbm3-linux-amd64",
    "gpustack--ascend-910b2-linux-arm64",
}
"""The InstanceTypes the sandbox's inventory derives (aware-cpu-manufacturer off, mixed on node)."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
CPU_MODEL = "feature.node.kubernetes.io/cpu-model."
DEVICE_LABEL = "acceleratable.feature.gpustack.ai/"
D = 1_600_000
"""Ledger units of one card (contract §5.1)."""
EXCLUSIVE = {"nvidia.com/gpu": "1"}
SHARED = {"nvidia.com/gpu.shared": "1"}
SLICED_25 = {
    "nvidia.com/gpu.sliced": "1",
    "nvidia.com/gpu.sliced.memory-percentage": "25",
    "nvidia.com/gpu.sliced.units": "400000",
    "nvidia.com/gpu.sliced.cores-percentage": "100",
}
"""A quarter of a card's VRAM with the units the Pod webhook would fold in (it does not exist yet)."""
SETTING_DERIVED = "instance-type-derived-from-node"
SETTING_AWARE = "instance-type-aware-cpu-manufacturer"
CHAOS_ARGS = ("--kube-leader-election=false", "--kube-api-qps=10", "--kube-api-burst=10")
"""How scenario 10 runs the workers it kills: at once (no lease to wait for), and slowly enough that kills
land in the middle of the build (at the default rate the whole build is done about a second after the
controllers start, within the first life)."""


# ---- the module's worker -----------------------------------------------------------------------------------
class Chain:
    """The module's worker (restartable) and the admin's knobs: its settings Secret and its log."""

    def __init__(self, kube: Client, pool: Workers) -> None:
        self.kube, self.pool = kube, pool
        self.namespace = pool.namespace
        self.worker: Worker | None = None
        self._starts = 0

    async def start(self, *args: str) -> Worker:
        self._starts += 1
        worker = await self.pool.start(f"admin-worker-{self._starts}", *args)
        self.worker = worker
        await eventually(lambda: ready(worker), timeout=180, what=f"{worker.name} ready")
        return worker

    async def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None and worker.proc.returncode is None:
            worker.signal(signal.SIGTERM)
            await worker.wait(timeout=120)

    def running(self) -> Worker:
        assert self.worker is not None, "the module's worker is not running"
        assert self.worker.proc.returncode is None, f"the worker died:\n{self.worker.tail()}"
        return self.worker

    def log(self) -> str:
        return "\n".join(w.log.read_text(errors="replace") for w in self.pool.started)

    async def setting(self, name: str) -> str | None:
        secret = await self.kube.get(SECRETS, SETTINGS_SECRET, self.namespace)
        value = (secret.get("data") or {}).get(name)
        return None if value is None else base64.b64decode(value).decode()

    async def set(self, name: str, value: str | None) -> None:
        data = {name: None if value is None else base64.b64encode(value.encode()).decode()}
        await self.kube.patch(SECRETS, SETTINGS_SECRET, {"data": data}, namespace=self.namespace)

    @contextlib.asynccontextmanager
    async def setting_changed(self, name: str, value: str) -> AsyncIterator[None]:
        """The setting at `value` inside the block, what it was after it (even when the block fails)."""
        before = await self.setting(name)
        await self.set(name, value)
        try:
            yield
        finally:
            await self.set(name, before)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chain(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Chain]:
    async with worker_pool(sandbox, kube, tmp_path_factory.mktemp("admin-workers")) as pool:
        await purge(kube)
        chain = Chain(kube, pool)
        await chain.start()
        try:
            await eventually(lambda: converged(kube), timeout=240, what="the chain built from the inventory")
            yield chain
        finally:
            await chain.stop()
            await purge(kube)


# ---- reading the chain as kubectl shows it -----------------------------------------------------------------
def meta(obj: JSONObj) -> JSONObj:
    return obj.get("metadata") or {}


def name_of(obj: JSONObj) -> str:
    return str(meta(obj).get("name"))


def labels_of(obj: JSONObj) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def owned(obj: JSONObj, kind: str) -> bool:
    return labels_of(obj).get(RESOURCE_TYPE_LABEL) == kind


def worker_feature(obj: JSONObj) -> bool:
    return name_of(obj).endswith("-gpustack-worker")


def chain_label(key: str) -> bool:
    """A label the worker puts on a Node (through NFD) or copies onto a Devices."""
    return key == MANAGED_LABEL or key.startswith(GENERAL_FEATURE_PREFIX)


async def live_namespaces(kube: Client) -> set[str]:
    return {name_of(ns) for ns in await kube.list(NAMESPACES) if not meta(ns).get("deletionTimestamp")}


async def snapshot(kube: Client, system_namespace: str) -> JSONObj:
    """Every object the chain owns, as names -> (labels, spec): what scenario 10 compares."""
    namespaces = await live_namespaces(kube) - {system_namespace}
    local_queues = {
        f"{meta(lq)['namespace']}/{name_of(lq)}": {
            "queue": (meta(lq).get("annotations") or {}).get(QUEUE_ANNOTATION),
            "spec": lq.get("spec"),
            "owners": [
                (o["kind"], o["name"], o.get("controller")) for o in meta(lq).get("ownerReferences", [])
            ],
        }
        for lq in await kube.list(LOCAL_QUEUES)
        if QUEUE_ANNOTATION in (meta(lq).get("annotations") or {}) and meta(lq)["namespace"] in namespaces
    }
    features = await kube.list(NODE_FEATURES)
    return {
        "instancetypes": {name_of(o): (labels_of(o), o.get("spec")) for o in await kube.list(INSTANCE_TYPES)},
        "clusterqueues": {
            name_of(o): (labels_of(o), o.get("spec"))
            for o in await kube.list(CLUSTER_QUEUES)
            if owned(o, "instancetypes")
        },
        "resourceflavors": {
            name_of(o): (labels_of(o), meta(o).get("annotations"), o.get("spec"))
            for o in await kube.list(RESOURCE_FLAVORS)
            if owned(o, "nodes")
        },
        "localqueues": local_queues,
        "nodefeatures": {
            f"{meta(o)['namespace']}/{name_of(o)}": o["spec"].get("labels")
            for o in features
            if worker_feature(o)
        },
        "devices": {
            name_of(o): {k: v for k, v in labels_of(o).items() if chain_label(k)}
            for o in await kube.list(DEVICES)
        },
        "nodes": {
            name_of(o): {k: v for k, v in labels_of(o).items() if chain_label(k)}
            for o in await kube.list(NODES)
        },
    }


async def converged(kube: Client) -> bool:
    """Every derived type Active, with a filled queue and its entrance in every user namespace."""
    types = {name_of(it): it for it in await kube.list(INSTANCE_TYPES)}
    if set(types) != DERIVED or any(
        (it.get("status") or {}).get("phase") != "Active" for it in types.values()
    ):
        return False
    queues = {name_of(q): q for q in await kube.list(CLUSTER_QUEUES) if owned(q, "instancetypes")}
    if set(queues) != DERIVED or not all(q["spec"].get("resourceGroups") for q in queues.values()):
        return False
    entrances = {(meta(lq)["namespace"], name_of(lq)) for lq in await kube.list(LOCAL_QUEUES, "default")}
    return all(("default", format_local_queue_name(t)) in entrances for t in DERIVED)


async def instance_type(kube: Client, name: str = A10) -> JSONObj | None:
    return await kube.get_or_none(INSTANCE_TYPES, name)


async def status_of(kube: Client, name: str = A10) -> JSONObj:
    return dict(((await instance_type(kube, name)) or {}).get("status") or {})


def views_of(status: JSONObj) -> dict[str, tuple[int, int, int]]:
    """(capacity, remaining, onceMaxRequest) of each accelerator view of an InstanceType status."""
    views = {}
    for view in ("accelerator", "acceleratorShared", "acceleratorSliced"):
        shown = status.get(view) or {}
        views[view] = (int(shown["capacity"]), int(shown["remaining"]), int(shown["onceMaxRequest"]))
    return views


def views_from_ledger(devices: JSONObj, group: str = "a10") -> dict[str, tuple[int, int, int]]:
    """The three views of a one-node pool, computed here from the Devices ledger by contract §7.9."""
    sliceable = any(
        g["id"] == group
        and (g.get("acceleratorsFeature") or {}).get("logicalSliced", {}).get("maxSize", 0) > 0
        for g in devices["spec"]["groups"]
    )
    cards = [a for g in devices["status"]["groups"] if g["id"] == group for a in g["accelerators"]]
    free = [a.get("remaining", 0) >= D for a in cards]
    shares = [
        a.get("remaining", 0) // (D // 10) if f or a["mode"] == 2 else 0
        for a, f in zip(cards, free, strict=True)
    ]
    percent = [
        a.get("remaining", 0) // (D // 100) if sliceable and (f or a["mode"] == 3) else 0
        for a, f in zip(cards, free, strict=True)
    ]
    n = len(cards)
    return {
        "accelerator": (n, sum(free), sum(free)),
        "acceleratorShared": (n * 10, sum(shares), sum(shares)),
        "acceleratorSliced": (n * 100 if sliceable else 0, sum(percent), max(percent, default=0)),
    }


async def warning_events(kube: Client, kind: str, name: str, namespace: str | None = None) -> list[JSONObj]:
    """Warning Events regarding the object (as `kubectl describe` lists them)."""
    return [
        e
        for e in await kube.list(EVENTS)
        if e.get("type") == "Warning"
        and (e["regarding"]["kind"], e["regarding"]["name"]) == (kind, name)
        and e["regarding"].get("namespace") == namespace
    ]


def metric_sum(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


# ---- pods in a pool ----------------------------------------------------------------------------------------
def queued_pod(name: str, entrance: str, limits: dict[str, str]) -> JSONObj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: entrance}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]},
    }


async def entrance_ready(kube: Client, namespace: str, type_name: str = A10) -> str:
    """The type's entrance LocalQueue, once it exists in `namespace` (the worker creates it there)."""
    entrance = str((await status_of(kube, type_name))["entrance"])

    async def there() -> bool:
        return await kube.get_or_none(LOCAL_QUEUES, entrance, namespace) is not None

    await eventually(there, timeout=60, what=f"LocalQueue {entrance} in {namespace}")
    return entrance


def allocated_cards(pod: JSONObj) -> list[tuple[str, int]]:
    text = (meta(pod).get("annotations") or {}).get(ACCELERATOR_ALLOCATED_ANNOTATION)
    record = json.loads(text) if text else {}
    return [
        (acc["id"], acc["mode"])
        for entry in record.values()
        for group in entry["devices"]["groups"]
        for acc in group["accelerators"]
    ]


async def running_pod(kube: Client, namespace: str, name: str) -> JSONObj | None:
    pod = await kube.get(PODS, name, namespace)
    assert pod["status"].get("phase") != "Failed", pod["status"].get("message")
    return pod if pod["status"].get("phase") == "Running" and allocated_cards(pod) else None


async def start_pod(
    kube: Client, namespace: str, name: str, entrance: str, limits: dict[str, str]
) -> JSONObj:
    """Queue a Pod into the pool and wait until it runs on a card the device manager recorded."""
    await kube.create(PODS, queued_pod(name, entrance, limits), namespace)
    return await eventually(
        lambda: running_pod(kube, namespace, name), timeout=180, what=f"pod {name} admitted and Running"
    )


async def ledger(kube: Client, node: str = A10_NODE) -> dict[str, tuple[int, int]]:
    devices = await kube.get(DEVICES, node)
    return {
        a["id"]: (a["mode"], a.get("remaining", 0))
        for g in (devices.get("status") or {}).get("groups", [])
        for a in g["accelerators"]
    }


async def remove_pods(kube: Client, namespace: str) -> None:
    for pod in await kube.list(PODS, namespace):
        await kube.delete(PODS, name_of(pod), namespace)

    async def gone() -> bool:
        return not await kube.list(PODS, namespace)

    await eventually(gone, timeout=180, what=f"pods of {namespace} gone")

    async def all_free() -> bool:
        return all(state == (0, D) for state in (await ledger(kube)).values())

    await eventually(all_free, timeout=120, what=f"every card of {A10_NODE} free in the ledger")


async def workload_of(kube: Client, namespace: str, pod: str) -> JSONObj | None:
    for wl in await kube.list(WORKLOADS, namespace):
        if any(o.get("name") == pod for o in meta(wl).get("ownerReferences") or []):
            return wl
    return None


def gated(pod: JSONObj) -> bool:
    return ADMISSION_GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def steady(probe: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    """`probe` holds at every look for `seconds` (a condition that must not change)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert await probe(), f"{what} no longer holds"
        await asyncio.sleep(0.5)


# ---- from scratch ------------------------------------------------------------------------------------------
async def purge(kube: Client) -> None:
    """Remove every object the chain owns, as if no worker had ever run (its worker must be stopped).

    InstanceTypes lose their finalizer first (no worker is there to release it); queues are drained so
    Kueue lets them go; flavors go once no queue names them; the worker's NodeFeatures go, and nfd-master
    takes their labels off the nodes; the marks copied onto Devices go too.
    """
    for it in await kube.list(INSTANCE_TYPES):
        if CONTROLLED_FINALIZER in (meta(it).get("finalizers") or []):
            await kube.patch(INSTANCE_TYPES, name_of(it), {"metadata": {"finalizers": None}})
        await kube.delete(INSTANCE_TYPES, name_of(it))
    for cq in await kube.list(CLUSTER_QUEUES):
        if owned(cq, "instancetypes"):
            with contextlib.suppress(errors.NotFound):
                await kube.patch(CLUSTER_QUEUES, name_of(cq), {"spec": {"stopPolicy": "HoldAndDrain"}})
            await kube.delete(CLUSTER_QUEUES, name_of(cq))
    for lq in await kube.list(LOCAL_QUEUES):
        if QUEUE_ANNOTATION in (meta(lq).get("annotations") or {}):
            await kube.delete(LOCAL_QUEUES, name_of(lq), meta(lq)["namespace"])
    for feature in await kube.list(NODE_FEATURES):
        if worker_feature(feature):
            await kube.delete(NODE_FEATURES, name_of(feature), meta(feature)["namespace"])
    for devices in await kube.list(DEVICES):
        marks = {k: None for k in labels_of(devices) if chain_label(k)}
        if marks:
            await kube.patch(DEVICES, name_of(devices), {"metadata": {"labels": marks}})

    async def flavors_deleted() -> bool:
        for rf in await kube.list(RESOURCE_FLAVORS):
            if owned(rf, "nodes") and not meta(rf).get("deletionTimestamp"):
                await kube.delete(RESOURCE_FLAVORS, name_of(rf))
        return True

    async def nothing_left() -> bool:
        await flavors_deleted()
        left = await snapshot(kube, "")
        nodes = {n: marks for n, marks in left["nodes"].items() if marks}
        lists = ("instancetypes", "clusterqueues", "resourceflavors", "localqueues", "nodefeatures")
        assert not any(left[k] for k in lists), {k: sorted(left[k]) for k in lists}
        assert not nodes, nodes
        return True

    await eventually(nothing_left, timeout=180, what="every chain object removed")


# ---- scenario 4: inactive ----------------------------------------------------------------------------------
async def test_4_an_inactive_type_holds_its_queue_running_pods_keep_running_new_ones_wait_until_cleared(
    chain: Chain, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace
    entrance = await entrance_ready(kube, namespace)
    try:
        first = await start_pod(kube, namespace, "running", entrance, EXCLUSIVE)
        await kube.patch(INSTANCE_TYPES, A10, {"spec": {"inactive": True}})

        async def held() -> JSONObj | None:
            queue = await kube.get(CLUSTER_QUEUES, A10)
            status = await status_of(kube)
            return (
                status
                if queue["spec"].get("stopPolicy") == "Hold" and status.get("phase") == "Inactive"
                else None
            )

        status = await eventually(held, timeout=60, what="queue Hold, type Inactive")
        assert status["phaseMessage"] == "cluster queue is held"

        await kube.create(PODS, queued_pod("waiting", entrance, EXCLUSIVE), namespace)

        async def queued() -> bool:
            return await workload_of(kube, namespace, "waiting") is not None

        await eventually(queued, timeout=60, what="the new Pod's workload")

        async def both_as_they_were() -> bool:
            running = await kube.get(PODS, "running", namespace)
            waiting = await kube.get(PODS, "waiting", namespace)
            admitted = conditions(await workload_of(kube, namespace, "running") or {}).get("Admitted") or {}
            reserved = (
                conditions(await workload_of(kube, namespace, "waiting") or {}).get("QuotaReserved") or {}
            )
            return (
                running["status"].get("phase") == "Running"
                and not meta(running).get("deletionTimestamp")
                and admitted.get("status") == "True"
                and gated(waiting)
                and not waiting["spec"].get("nodeName")
                and reserved.get("status") != "True"
            )

        await steady(both_as_they_were, 15, "Hold keeps the running Pod and the waiting one gated")
        assert (await kube.get(PODS, "running", namespace))["metadata"]["uid"] == first["metadata"]["uid"]

        await kube.patch(INSTANCE_TYPES, A10, {"spec": {"inactive": None}})
        t0 = time.monotonic()
        await eventually(
            lambda: running_pod(kube, namespace, "waiting"), timeout=120, what="waiting Pod admitted"
        )
        print(f"\n[scenario 4] cleared inactive -> waiting Pod Running in {time.monotonic() - t0:.1f}s")
        queue = await kube.get(CLUSTER_QUEUES, A10)
        assert queue["spec"]["stopPolicy"] == "None"
        await eventually(lambda: phase_is(kube, A10, "Active"), timeout=60, what="type Active again")
        assert "inactive" not in (await instance_type(kube) or {})["spec"]
    finally:
        await kube.patch(INSTANCE_TYPES, A10, {"spec": {"inactive": None}})
        await remove_pods(kube, namespace)


async def phase_is(kube: Client, name: str, phase: str) -> bool:
    return (await status_of(kube, name)).get("phase") == phase


# ---- scenario 6: the three views ---------------------------------------------------------------------------
async def test_6_the_three_views_drop_by_the_per_card_math_as_pods_take_cards_and_rise_when_they_go(
    chain: Chain, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace
    entrance = await entrance_ready(kube, namespace)
    free = {"accelerator": (4, 4, 4), "acceleratorShared": (40, 40, 40), "acceleratorSliced": (400, 400, 100)}
    steps = [
        ("whole", EXCLUSIVE, 1, {"accelerator": (4, 3, 3), "acceleratorShared": (40, 30, 30),
                                  "acceleratorSliced": (400, 300, 100)}),
        ("share", SHARED, 2, {"accelerator": (4, 2, 2), "acceleratorShared": (40, 29, 29),
                               "acceleratorSliced": (400, 200, 100)}),
        ("slice", SLICED_25, 3, {"accelerator": (4, 1, 1), "acceleratorShared": (40, 19, 19),
                                  "acceleratorSliced": (400, 175, 100)}),
    ]  # fmt: skip

    async def views_are(want: dict[str, tuple[int, int, int]]) -> dict[str, tuple[int, int, int]] | None:
        got = views_of(await status_of(kube))
        return got if got == want else None

    await eventually(lambda: views_are(free), timeout=60, what="the A10 pool all free")
    try:
        for name, limits, mode, want in steps:
            pod = await start_pod(kube, namespace, name, entrance, limits)
            ((card, got_mode),) = allocated_cards(pod)
            assert got_mode == mode

            async def charged(card: str = card, mode: int = mode) -> bool:
                return (await ledger(kube))[card][0] == mode

            await eventually(charged, timeout=60, what=f"ledger shows {name}'s card in mode {mode}")
            views = await eventually(
                lambda want=want: views_are(want), timeout=60, what=f"views after {name}"
            )
            assert views == views_from_ledger(await kube.get(DEVICES, A10_NODE)), (
                "status differs from §7.9 math"
            )
            print(f"\n[scenario 6] after {name}: {views}")
        cards = {card for pod in await kube.list(PODS, namespace) for card, _ in allocated_cards(pod)}
        assert len(cards) == 3, "three modes, three cards"
    finally:
        await remove_pods(kube, namespace)
    assert (
        await eventually(lambda: views_are(free), timeout=60, what="views back once the Pods are gone")
        == free
    )


# ---- scenario 7: deleting a type ---------------------------------------------------------------------------
async def test_7_a_deleted_type_is_drained_and_released_then_derived_again_only_while_derived_from_node_is_on(
    chain: Chain, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace
    entrance = await entrance_ready(kube, namespace)
    old = await kube.get(INSTANCE_TYPES, A10)
    old_queue = await kube.get(CLUSTER_QUEUES, A10)
    try:
        await start_pod(kube, namespace, "victim", entrance, EXCLUSIVE)
        await kube.delete(INSTANCE_TYPES, A10)
        t0 = time.monotonic()
        seen: dict[str, float] = {}

        async def teardown() -> bool:
            it = await instance_type(kube)
            queue = await kube.get_or_none(CLUSTER_QUEUES, A10)
            pod = await kube.get_or_none(PODS, "victim", namespace)
            now = round(time.monotonic() - t0, 1)
            if it is not None and meta(it)["uid"] == old["metadata"]["uid"]:
                status = it.get("status") or {}
                if (status.get("phase"), status.get("phaseMessage")) == (
                    "Inactive",
                    "instance type is terminating",
                ):
                    seen.setdefault("type terminating, Inactive", now)
            same_queue = queue is not None and meta(queue)["uid"] == old_queue["metadata"]["uid"]
            if (
                same_queue
                and queue["spec"].get("stopPolicy") == "HoldAndDrain"
                and meta(queue).get("deletionTimestamp")
            ):
                seen.setdefault("queue deleting and HoldAndDrain", now)
            if pod is None or meta(pod).get("deletionTimestamp") or pod["status"].get("phase") == "Failed":
                seen.setdefault("pod evicted", now)
            if queue is None or meta(queue)["uid"] != old_queue["metadata"]["uid"]:
                seen.setdefault("queue gone", now)
            if it is None or meta(it)["uid"] != old["metadata"]["uid"]:
                seen.setdefault("type released", now)
            return "type released" in seen

        await eventually(teardown, timeout=180, interval=0.1, what="the type torn down")
        print(f"\n[scenario 7] teardown timeline (s after delete): {seen}")
        assert seen["queue gone"] <= seen["type released"], "the finalizer went before the queue"
        assert "pod evicted" in seen, "the queue was deleted without draining its workload"

        # instance-type-derived-from-node is on (default): NodeFlavor authors the type again, create-only.
        async def derived_again() -> JSONObj | None:
            it = await instance_type(kube)
            fresh = it is not None and meta(it)["uid"] != old["metadata"]["uid"]
            return it if fresh and (it.get("status") or {}).get("phase") == "Active" else None

        again = await eventually(derived_again, timeout=120, what="the type derived again and Active")
        assert labels_of(again) == {DERIVED_FROM_NODE_LABEL: "true"}
        assert again["spec"] == old["spec"]
        await entrance_ready(kube, namespace)

        # With derived-from-node off, a deleted type stays deleted; turning it on brings it back.
        async with chain.setting_changed(SETTING_DERIVED, "false"):
            await kube.delete(INSTANCE_TYPES, A10)
            await eventually(lambda: gone(kube, INSTANCE_TYPES, A10), timeout=180, what="type deleted")
            await eventually(lambda: gone(kube, CLUSTER_QUEUES, A10), timeout=60, what="its queue deleted")

            async def stays_gone() -> bool:
                return await instance_type(kube) is None

            await steady(stays_gone, 15, "a deleted type stays deleted while derived-from-node is off")
            flavors = [name_of(rf) for rf in await kube.list(RESOURCE_FLAVORS) if "nvidia-a10" in name_of(rf)]
            assert flavors == ["gpustack--intel-6-106--nvidia-a10-linux-amd64-4d"], "the pool's flavor stays"
            await eventually(
                lambda: gone(kube, LOCAL_QUEUES, format_local_queue_name(A10), namespace),
                timeout=60,
                what="its entrance garbage-collected with its queue",
            )
        await eventually(
            lambda: phase_is(kube, A10, "Active"), timeout=120, what="type derived once it is on"
        )
        await entrance_ready(kube, namespace)
    finally:
        await remove_pods(kube, namespace)
        await eventually(lambda: phase_is(kube, A10, "Active"), timeout=120, what="the A10 type back")


async def gone(kube: Client, resource: Resource, name: str, namespace: str | None = None) -> bool:
    return await kube.get_or_none(resource, name, namespace) is None


# ---- scenario 9: bad input ---------------------------------------------------------------------------------
def kwok_node(
    name: str, labels: dict[str, str], cpus: str = "8", annotations: dict[str, str] | None = None
) -> JSONObj:
    capacity = {"cpu": cpus, "memory": "32Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    base = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": base | labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", **(annotations or {})},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


async def test_9_bad_input_is_warned_on_the_object_and_in_the_log_while_everything_else_converges(
    chain: Chain, kube: Client
) -> None:
    worker = chain.running()
    errors_before = metric_sum(await worker.metrics(), "gpustack_controller_reconcile_errors_total")
    a10_before = views_of(await status_of(kube))
    junk, late = "junk-0", "late-0"
    # A CPU vendor as long as a label value may be (its CPU key then makes label keys no object may have),
    # a device count and memory that are not numbers, a CPU name annotation of 600 characters of noise.
    junk_labels = {
        CPU_MODEL + "vendor_id": "Z" * 63,
        CPU_MODEL + "family": "1",
        CPU_MODEL + "id": "2",
        DEVICE_LABEL + "nvidia-zz9": "true",
        DEVICE_LABEL + "nvidia-zz9.count": "lots",
        DEVICE_LABEL + "nvidia-zz9.memory": "notmem",
    }
    noise = {"feature.gpustack.ai/cpu-name": "\u2603 (TM) @@ " * 60}
    late_labels = {CPU_MODEL + "vendor_id": "AMD", CPU_MODEL + "family": "99", CPU_MODEL + "id": "7"}
    late_flavor = "gpustack--amd-99-7-linux-amd64-16c"
    try:
        node = await kube.create(NODES, kwok_node(junk, junk_labels, annotations=noise))
        owner = {"apiVersion": "v1", "kind": "Node", "name": junk, "uid": node["metadata"]["uid"]}
        accelerator = {
            "id": "acme-0",
            "index": 0,
            "physicalIndexes": [0],
            "topology": {
                "pciBusId": "0000:01:00.0",
                "pciRootId": "",
                "pciClass": "0302",
                "numaAffinity": "",
                "cpuAffinity": "",
            },
            "status": {"unhealthy": False},
        }
        group = {
            "id": "x1",
            "manufacturer": "acme",
            "name": "Acme X1",
            "memory": 1024,
            "accelerators": [accelerator],
        }
        await kube.create(
            DEVICES,
            {
                "apiVersion": DEVICES.api_version,
                "kind": DEVICES.kind,
                "metadata": {"name": junk, "ownerReferences": [owner]},
                "spec": {"groups": [group]},
            },
        )
        async with chain.setting_changed(SETTING_AWARE, "maybe"):
            # Meanwhile a good node joins: it must get its flavor, and the CPU pool its quota.
            await kube.create(NODES, kwok_node(late, late_labels, cpus="16"))

            async def late_pooled() -> bool:
                queue = await kube.get(CLUSTER_QUEUES, CPU_POOL)
                flavors = [f["name"] for g in queue["spec"].get("resourceGroups") or [] for f in g["flavors"]]
                return (
                    late_flavor in flavors
                    and await kube.get_or_none(RESOURCE_FLAVORS, late_flavor) is not None
                )

            await eventually(late_pooled, timeout=120, what=f"{late} gets its flavor in the CPU pool")

            expected = {
                ("Node", junk, None): "InvalidNodeLabels",
                ("Devices", junk, None): "UnknownManufacturer",
                ("Secret", SETTINGS_SECRET, chain.namespace): "InvalidSetting",
            }

            async def warned() -> dict[tuple[str, str], JSONObj] | None:
                found = {}
                for (kind, name, namespace), reason in expected.items():
                    events = [
                        e for e in await warning_events(kube, kind, name, namespace) if e["reason"] == reason
                    ]
                    if not events:
                        return None
                    found[(kind, name)] = events[0]
                return found

            events = await eventually(warned, timeout=60, what="a Warning Event on each bad object")
            for (kind, name), event in events.items():
                print(f"\n[scenario 9] Warning {event['reason']} on {kind} {name}: {event['note'][:160]}")
            assert "not a valid label key" in events[("Node", junk)]["note"]
            assert "'acme'" in events[("Devices", junk)]["note"]
            assert (
                f"setting {SETTING_AWARE} is unusable ('maybe'" in events[("Secret", SETTINGS_SECRET)]["note"]
            )

            log = chain.log()
            assert f"Node {junk}: InvalidNodeLabels" in log
            assert f"Devices {junk}: UnknownManufacturer" in log
            assert f"Secret {chain.namespace}/{SETTINGS_SECRET}: InvalidSetting" in log
            feature = await kube.get(NODE_FEATURES, f"{junk}-gpustack-worker", chain.namespace)
            assert all(len(key.rpartition("/")[2]) <= 63 for key in feature["spec"]["labels"])

            # Everything else converged: the same pools, all Active, the A10 views untouched, and the
            # unparseable awareness reads as its default (no per-CPU pools appeared).
            await eventually(lambda: converged(kube), timeout=120, what="every pool still Active")
            assert views_of(await status_of(kube)) == a10_before
            assert {name_of(it) for it in await kube.list(INSTANCE_TYPES)} == DERIVED
            assert not await warning_events(kube, "Node", late)
            assert chain.running().proc.returncode is None
            errors_after = metric_sum(await worker.metrics(), "gpustack_controller_reconcile_errors_total")
            assert errors_after == errors_before, "a controller failed on the bad input"
            # One warning per bad object, not one per reconcile.
            assert len([line for line in chain.log().splitlines() if f"Devices {junk}: " in line]) == 1
    finally:
        for name in (junk, late):
            await kube.delete(NODES, name)
        await kube.delete(DEVICES, junk)
        await eventually(
            lambda: gone(kube, RESOURCE_FLAVORS, late_flavor), timeout=120, what="late flavor gone"
        )
        await eventually(lambda: converged(kube), timeout=120, what="the chain as it was")


# ---- scenario 10: SIGKILL while converging -----------------------------------------------------------------
async def stable_snapshot(kube: Client, system_namespace: str, quiet: float = 6.0) -> JSONObj:
    """The chain once converged and unchanged for `quiet` seconds."""
    await eventually(lambda: converged(kube), timeout=240, what="the chain converged")
    last = await snapshot(kube, system_namespace)

    async def unchanged_over_quiet() -> JSONObj | None:
        nonlocal last
        await asyncio.sleep(quiet)  # the observation window itself, not a poll interval
        now, before = await snapshot(kube, system_namespace), last
        last = now
        return now if now == before else None

    return await eventually(unchanged_over_quiet, timeout=240, what=f"the chain unchanged for {quiet:g}s")


def no_duplicates_or_orphans(state: JSONObj, namespaces: set[str]) -> None:
    types, queues = set(state["instancetypes"]), set(state["clusterqueues"])
    assert types == queues, f"types without queue {types - queues}, queues without type {queues - types}"
    by_namespace: dict[str, set[str]] = {}
    for key, lq in state["localqueues"].items():
        ns, name = key.split("/", 1)
        assert lq["queue"] in queues, f"LocalQueue {key} feeds {lq['queue']}, which no type owns"
        assert name == format_local_queue_name(lq["queue"])
        assert lq["owners"] == [("ClusterQueue", lq["queue"], True)], f"{key} owners {lq['owners']}"
        by_namespace.setdefault(ns, set()).add(lq["queue"])
    for ns in namespaces:
        assert by_namespace.get(ns) == queues, f"namespace {ns} has entrances to {by_namespace.get(ns)}"
    listed = [
        f["name"]
        for _, spec in state["clusterqueues"].values()
        for g in spec.get("resourceGroups") or []
        for f in g["flavors"]
    ]
    assert sorted(listed) == sorted(state["resourceflavors"]), "each flavor in exactly one queue"


async def test_10_sigkilled_twenty_times_while_building_the_chain_it_ends_as_an_undisturbed_build(
    chain: Chain, kube: Client
) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    await chain.stop()
    await purge(kube)
    t_start = time.monotonic()
    await chain.start()
    await eventually(lambda: converged(kube), timeout=240, what="the undisturbed build")
    t_undisturbed = time.monotonic() - t_start
    undisturbed = await stable_snapshot(kube, chain.namespace)
    await chain.stop()
    await purge(kube)

    kills: list[str] = []
    t_chaos = time.monotonic()
    for n in range(20):
        # Even rounds count from the process start (Prepare, informers syncing), odd ones from ready (the
        # controllers building the chain). No lease, so each start reconciles at once; the API rate is
        # throttled so that a build spans several lives instead of finishing within the first.
        delay = rng.uniform(0.0, 3.0)
        worker = await chain.pool.start(f"chaos-{n:02d}", *CHAOS_ARGS)
        if n % 2:
            await eventually(lambda worker=worker: ready(worker), timeout=180, what=f"{worker.name} ready")
        await asyncio.sleep(delay)
        worker.signal(signal.SIGKILL)
        await worker.wait()
        at_kill = await snapshot(kube, chain.namespace)
        counts = " ".join(f"{k[:6]}={len(v)}" for k, v in at_kill.items() if k not in ("devices", "nodes"))
        kills.append(f"{worker.name} killed {delay:.2f}s after {'ready' if n % 2 else 'start'}: {counts}")
    print(f"\n[scenario 10] seed {seed}; kills:\n  " + "\n  ".join(kills))
    await chain.start()
    try:

        async def same_as_undisturbed() -> bool:
            return await snapshot(kube, chain.namespace) == undisturbed

        await eventually(
            same_as_undisturbed, timeout=240, interval=1.0, what="the chain as an undisturbed build"
        )
    except AssertionError:
        now = await snapshot(kube, chain.namespace)
        for kind, objects in now.items():
            if objects != undisturbed[kind]:
                print(f"[scenario 10] {kind} differs:\n  now {objects}\n  undisturbed {undisturbed[kind]}")
        raise
    final = await stable_snapshot(kube, chain.namespace)
    assert final == undisturbed
    namespaces = await live_namespaces(kube) - {chain.namespace, "kube-system"}
    no_duplicates_or_orphans(final, namespaces)
    print(
        f"[scenario 10] undisturbed build {t_undisturbed:.1f}s from process start; 20 kills and the rebuild "
        f"{time.monotonic() - t_chaos:.0f}s; {sum(len(v) for v in final.values())} objects compared"
    )
