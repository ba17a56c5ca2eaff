"""Scenarios of the scheduling chain, run by the real `gpustack-operator worker`, as kubectl shows them.

One worker process (worker_support) runs for the module, in a system namespace of its own, against the
session sandbox: its seven controllers build the chain from the inventory's kwok GPU nodes (contract §7.9).
Each scenario changes what an admin or the hardware would change and reads back what a user sees:

1. the default inventory gives exactly the documented flavors, pools, InstanceTypes and entrances, with the
   contract's labels, and the worker writes nothing at rest (30 s) while its /metrics show no error;
2. a node leaves: its flavor is deleted and leaves the pool's quota; it comes back: both are restored;
3. a pool loses every node: its queue is drained (HoldAndDrain) and emptied and its type goes Inactive;
   the nodes return: the queue is resumed, re-held by the sticky Inactive, until an admin clears it;
5. `instance-type-aware-cpu-manufacturer` on: per-CPU pools appear, flavors untouched; off: back;
8. `node-management-manual=true`: only nodes an admin labels `gpustack.ai/managed=true` join a pool.

Inventory nodes are never changed (other tests use them); scenarios 2, 3 and 8 use fresh kwok nodes with
a CPU identity nobody else uses, reported as the sandbox's nfd-worker stand-in reports hardware (and, for
cards, as a device manager reports them). Everything a scenario creates or switches is put back.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    CONTROLLED_FINALIZER,
    DEVICE_MANAGER_NODE_FEATURE_SUFFIX,
    DRAINED_ANNOTATION,
    MANAGED_LABEL,
    SETTINGS_SECRET,
    WORKER_NODE_FEATURE_SUFFIX,
)
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import (
    CLUSTER_QUEUES,
    DEVICES,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODE_FEATURES,
    NODES,
    RESOURCE_FLAVORS,
    SECRETS,
    Resource,
)
from gpustack_operator.kube.watch import watch
from gpustack_operator.rules.naming.groups import extract_acceleratable_node_keys
from gpustack_operator.rules.naming.nodekeys import extract_general_node_key
from gpustack_operator.rules.naming.nodes import Node
from gpustack_operator.rules.naming.objects import node_feature
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.sandbox import inventory, nfdworker
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Worker, ready, worker_pool

G, A = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/"
ACC, OS, ARCH, TYPE = (
    "feature.gpustack.ai/acceleratable",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "resource.gpustack.ai/type",
)
DERIVED = "schedule.gpustack.ai/derived-from-node"
AWARE, MANUAL = "instance-type-aware-cpu-manufacturer", "node-management-manual"
CONTROLLERS = (
    "node-feature",
    "node-capacity",
    "node-devices",
    "node-flavor",
    "instance-type",
    "node-queue",
    "node-queue-entrance",
)
LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded 2-core machine, not an expectation)."""

# What the worker builds from src/gpustack_operator/sandbox/inventory.yaml (contract §7.6, §7.9), per flavor:
# CPU key, accelerator key, arch (os is linux), per-node count (CPUs or cards), contributing nodes.
FLAVOR_TABLE = """
gpustack--amd-25-1-linux-amd64-128c                       amd-25-1        -                     amd64 128 1
gpustack--amd-25-17--nvidia-h100-80gb-hbm3-linux-amd64-8d amd-25-17       nvidia-h100-80gb-hbm3 amd64 8   2
gpustack--amd-25-17-linux-amd64-192c                      amd-25-17       -                     amd64 192 2
gpustack--generic-8-3393--ascend-910b2-linux-arm64-8d     generic-8-3393  ascend-910b2          arm64 8   1
gpustack--generic-8-3393-linux-arm64-96c                  generic-8-3393  -                     arm64 96  1
gpustack--intel-6-106--nvidia-a10-linux-amd64-4d          intel-6-106     nvidia-a10            amd64 4   1
gpustack--intel-6-106-linux-amd64-64c                     intel-6-106     -                     amd64 64  1
gpustack--intel-6-207-linux-amd64-128c                    intel-6-207     -                     amd64 128 1
"""
# The pools (ClusterQueue = InstanceType name): CPU key ("generic": collapsed), accelerator key, arch.
POOL_TABLE = """
gpustack--ascend-910b2-linux-arm64                        generic         ascend-910b2          arm64
gpustack--generic-linux-amd64                             generic         -                     amd64
gpustack--generic-linux-arm64                             generic         -                     arm64
gpustack--nvidia-a10-linux-amd64                          generic         nvidia-a10            amd64
gpustack--nvidia-h100-80gb-hbm3-linux-amd64               generic         nvidia-h100-80gb-hbm3 amd64
"""
# The pools with `instance-type-aware-cpu-manufacturer` on (split per CPU key).
AWARE_POOL_TABLE = """
gpustack--amd-25-1-linux-amd64                            amd-25-1        -                     amd64
gpustack--amd-25-17-linux-amd64                           amd-25-17       -                     amd64
gpustack--amd-25-17--nvidia-h100-80gb-hbm3-linux-amd64    amd-25-17       nvidia-h100-80gb-hbm3 amd64
gpustack--generic-8-3393-linux-arm64                      generic-8-3393  -                     arm64
gpustack--generic-8-3393--ascend-910b2-linux-arm64        generic-8-3393  ascend-910b2          arm64
gpustack--intel-6-106-linux-amd64                         intel-6-106     -                     amd64
gpustack--intel-6-106--nvidia-a10-linux-amd64             intel-6-106     nvidia-a10            amd64
gpustack--intel-6-207-linux-amd64                         intel-6-207     -                     amd64
"""


@dataclass(frozen=True)
class Flavor:
    g_key: str
    a_key: str
    arch: str
    count: int
    nodes: int

    @property
    def feature_key(self) -> str:
        return A + self.a_key if self.a_key else G + self.g_key

    def labels(self) -> dict[str, str]:
        """Its labels (contract §7.9): pool discriminators, feature key with `.count` and `.capacity`."""
        key = self.feature_key
        own = {key: "true", f"{key}.count": str(self.count), f"{key}.capacity": str(self.count * self.nodes)}
        pool = {OS: "linux", ARCH: self.arch, ACC: str(bool(self.a_key)).lower(), TYPE: "nodes"}
        return own | pool | ({G + self.g_key: "true"} if self.a_key else {})

    def node_labels(self) -> dict[str, str]:
        """Its spec.nodeLabels: managed nodes of this os/arch, CPU key, feature key and per-node count."""
        key = self.feature_key
        pinned = {MANAGED_LABEL: "true", OS: "linux", ARCH: self.arch, G + self.g_key: "true"}
        return pinned | {key: "true", f"{key}.count": str(self.count)}


@dataclass(frozen=True)
class Pool:
    g_key: str
    a_key: str
    arch: str

    def labels(self) -> dict[str, str]:
        """The queue's labels: PoolScheduleLabels (contract §7.7) and the ownership label."""
        labels = {ACC: str(bool(self.a_key)).lower(), OS: "linux", ARCH: self.arch, TYPE: "instancetypes"}
        labels |= {A + self.a_key: "true"} if self.a_key else {}
        return labels | ({G + self.g_key: "true"} if self.g_key != "generic" else {})

    def identity(self) -> dict[str, Any]:
        """The InstanceType's spec identity (contract §7.6 DerivedInstanceTypeIdentity)."""
        return {
            "acceleratable": bool(self.a_key),
            "generalGroup": self.g_key,
            "acceleratorGroup": self.a_key or None,
            "os": "linux",
            "arch": self.arch,
        }

    def flavors(self) -> list[str]:
        """Its flavors as the queue lists them: smallest per-node count first (contract §7.9), then name."""
        mine = [
            (f.count, name)
            for name, f in FLAVORS.items()
            if f.a_key == self.a_key and f.arch == self.arch and self.g_key in ("generic", f.g_key)
        ]
        return [name for _, name in sorted(mine)]


def _rows(table: str) -> list[list[str]]:
    return [[cell if cell != "-" else "" for cell in line.split()] for line in table.strip().splitlines()]


FLAVORS = {r[0]: Flavor(r[1], r[2], r[3], int(r[4]), int(r[5])) for r in _rows(FLAVOR_TABLE)}
POOLS = {r[0]: Pool(r[1], r[2], r[3]) for r in _rows(POOL_TABLE)}
AWARE_POOLS = {r[0]: Pool(r[1], r[2], r[3]) for r in _rows(AWARE_POOL_TABLE)}
CPU_POOL = "gpustack--generic-linux-amd64"


def say(line: str) -> None:
    """A measured number, printed for the report (pytest -s shows it)."""
    print(f"[pools] {line}", flush=True)


# ---- reading what kubectl shows --------------------------------------------------------------------------


def meta(obj: JSONObj | None) -> JSONObj:
    return (obj or {}).get("metadata") or {}


def labels(obj: JSONObj | None) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: JSONObj | None) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def spec(obj: JSONObj | None) -> JSONObj:
    return (obj or {}).get("spec") or {}


def status(obj: JSONObj | None) -> JSONObj:
    return (obj or {}).get("status") or {}


def condition(obj: JSONObj | None, kind: str) -> str | None:
    for c in status(obj).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return None


def quota(queue: JSONObj | None) -> list[tuple[str, str]]:
    """(flavor, nominal quota of its first covered resource), as `kubectl get clusterqueue -o yaml` has it."""
    groups = spec(queue).get("resourceGroups") or []
    return [(f["name"], f["resources"][0]["nominalQuota"]) for g in groups for f in g["flavors"]]


def flavors_of(queue: JSONObj | None) -> list[str]:
    return [name for name, _ in quota(queue)]


async def by_name(kube: Client, resource: Resource, namespace: str | None = None) -> dict[str, JSONObj]:
    return {meta(o)["name"]: o for o in await kube.list(resource, namespace)}


async def gone(kube: Client, resource: Resource, name: str, namespace: str | None = None) -> bool:
    return await kube.get_or_none(resource, name, namespace) is None


def timed() -> Callable[[], float]:
    start = time.monotonic()
    return lambda: round(time.monotonic() - start, 1)


# ---- the worker and its settings -------------------------------------------------------------------------


@dataclass
class Chain:
    """The module's worker: its process, its system namespace, when it started."""

    kube: Client
    worker: Worker
    namespace: str
    started: float

    async def setting(self, name: str) -> str:
        secret = await self.kube.get(SECRETS, SETTINGS_SECRET, self.namespace)
        return base64.b64decode(secret["data"][name]).decode()

    async def set(self, name: str, value: str) -> None:
        data = {name: base64.b64encode(value.encode()).decode()}
        await self.kube.patch(SECRETS, SETTINGS_SECRET, {"data": data}, namespace=self.namespace)

    @contextlib.asynccontextmanager
    async def switched(self, name: str, value: str) -> AsyncIterator[None]:
        """The setting at `value` inside the block, restored to what it was afterwards."""
        before = await self.setting(name)
        await self.set(name, value)
        try:
            yield
        finally:
            await self.set(name, before)

    async def metrics(self) -> dict[tuple[str, str], float]:
        """(controller, result) -> reconciles, and (controller, "raised") -> reconcile errors."""
        text = await self.worker.metrics()
        found: dict[tuple[str, str], float] = {}
        for line in text.splitlines():
            m = re.match(
                r'gpustack_controller_reconcile_total\{controller="([^"]+)",result="([^"]+)"\} (\S+)', line
            )
            if m:
                found[(m[1], m[2])] = float(m[3])
            m = re.match(r'gpustack_controller_reconcile_errors_total\{controller="([^"]+)"\} (\S+)', line)
            if m:
                found[(m[1], "raised")] = float(m[2])
        return found

    async def assert_no_reconcile_errors(self) -> dict[tuple[str, str], float]:
        counts = await self.metrics()
        failed = {k: v for k, v in counts.items() if k[1] in ("error", "terminal", "raised") and v}
        assert not failed, f"reconciles failed: {failed}\n{self.worker.tail(80)}"
        return counts


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chain(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Chain]:
    log_dir: Path = tmp_path_factory.mktemp("pools-worker")
    found = await found_before(kube)
    async with worker_pool(sandbox, kube, log_dir) as pool:
        started = time.monotonic()
        worker = await pool.start("pools-worker")
        await eventually(
            lambda: ready(worker), timeout=LONG, what="worker ready (Prepare done, caches synced)"
        )
        say(f"worker ready {time.monotonic() - started:.1f}s after start")
        chain = Chain(kube, worker, pool.namespace, started)
        try:
            yield chain
        finally:
            await retire_inventory_pools(chain, found)
        # the pool then stops the worker, prints its log and drops its namespace (Secret, NodeFeatures)
    await leave_as_found(kube, found)


@dataclass(frozen=True)
class Found:
    """What of the inventory's chain existed before the module's worker started (another test's)."""

    flavors: set[str]
    types: set[str]
    devices_marks: dict[str, dict[str, str]]
    """Per inventory Devices, the labels the worker keeps in step there (management mark, CPU keys)."""


def copied_marks(devices: JSONObj) -> dict[str, str]:
    return {k: v for k, v in labels(devices).items() if k == MANAGED_LABEL or k.startswith(G)}


async def found_before(kube: Client) -> Found:
    nodes = {n.name for n in inventory.load()}
    return Found(
        flavors=(await by_name(kube, RESOURCE_FLAVORS)).keys() & FLAVORS.keys(),
        types=(await by_name(kube, INSTANCE_TYPES)).keys() & POOLS.keys(),
        devices_marks={n: copied_marks(d) for n, d in (await by_name(kube, DEVICES)).items() if n in nodes},
    )


async def retire_inventory_pools(chain: Chain, found: Found) -> None:
    """While the worker still runs: delete the inventory's InstanceTypes it derived (with derivation off,
    so they stay deleted); its teardown drains and deletes their queues, and their entrances follow."""
    kube, ours = chain.kube, POOLS.keys() - found.types
    await chain.set("instance-type-derived-from-node", "false")  # the Secret goes with the namespace
    for name in ours:
        await kube.delete(INSTANCE_TYPES, name)

    async def retired() -> bool:
        left = (await by_name(kube, INSTANCE_TYPES)).keys() | (await by_name(kube, CLUSTER_QUEUES)).keys()
        return not left & ours and not await entrances(kube, ours)

    clock = timed()
    await eventually(retired, timeout=LONG, what="the inventory's types, queues and entrances retired")
    say(f"teardown: {len(ours)} inventory types retired with their queues and entrances in {clock()}s")


async def leave_as_found(kube: Client, found: Found) -> None:
    """With the worker gone: delete the flavors it made (no queue holds them now) and put the Devices
    marks back as they were."""
    ours = FLAVORS.keys() - found.flavors

    async def flavors_gone() -> bool:
        left = (await by_name(kube, RESOURCE_FLAVORS)).keys() & ours
        for name in left:
            await kube.delete(RESOURCE_FLAVORS, name)
        return not left

    await eventually(flavors_gone, timeout=LONG, what="the inventory's flavors deleted")
    for name, marks in found.devices_marks.items():
        devices = await kube.get_or_none(DEVICES, name)
        now = copied_marks(devices) if devices else marks
        patch: dict[str, str | None] = {k: v for k, v in marks.items() if now.get(k) != v}
        patch |= {k: None for k in now if k not in marks}
        if patch:
            await kube.patch(DEVICES, name, {"metadata": {"labels": patch}})


# ---- fresh hardware of this module's own -----------------------------------------------------------------


class FreshNodes:
    """kwok nodes with a CPU identity no other test uses (AMD family 25, a fresh model id).

    Each node is what the sandbox makes of an inventory entry: the Node a kubelet would register, and the
    NodeFeature the nfd-worker stand-in writes for its CPU (and PCI cards); cards are reported the way a
    device manager reports them (`<node>-gpustack-device-manager`), as NVIDIA `T<model>` with 15Gi each.
    """

    def __init__(self, kube: Client, namespace: str, tag: str) -> None:
        self.kube, self.namespace, self.tag = kube, namespace, tag
        self.model = str(uuid.uuid4().int % 10**9)
        self.g_key = f"amd-25-{self.model}"
        self.a_key = f"nvidia-t{self.model}"
        self.names: list[str] = []

    def cpu_flavor(self, cpus: int = 8) -> str:
        return f"gpustack--{self.g_key}-linux-amd64-{cpus}c"

    def gpu_flavor(self, cards: int) -> str:
        return f"gpustack--{self.g_key}--{self.a_key}-linux-amd64-{cards}d"

    @property
    def gpu_pool(self) -> str:
        return f"gpustack--{self.a_key}-linux-amd64"

    def _hardware(self, name: str, cards: int) -> inventory.InventoryNode:
        cpu = inventory.CPU(vendor="AMD", model="", family="25", id=self.model, cores=4)
        gpus = (inventory.GPU("nvidia", f"T{self.model}", cards, 15360),) if cards else ()
        return inventory.InventoryNode(name, cpu, "64Gi", gpus=gpus)

    async def add(self, suffix: str, *, cards: int = 0) -> str:
        """Register the node and report its hardware; returns its name."""
        name = f"pools-{self.tag}-{self.model}-{suffix}"
        hardware = self._hardware(name, cards)
        if name not in self.names:
            self.names.append(name)
        node = await self.kube.create(NODES, inventory.node_manifest(hardware))
        await self.kube.apply(
            NODE_FEATURES, nfdworker.node_feature(hardware, node), field_manager=nfdworker.FIELD_MANAGER
        )
        if cards:
            model = A + self.a_key
            reported = {
                ACC: "true",
                A + "nvidia": "true",
                model: "true",
                f"{model}.product": f"T{self.model}",
                f"{model}.memory": "15Gi",
                f"{model}.cores": "2560",
                f"{model}.count": str(cards),
            }
            feature = node_feature(node, DEVICE_MANAGER_NODE_FEATURE_SUFFIX, self.namespace, reported)
            await self.kube.apply(NODE_FEATURES, feature, field_manager="gpustack-device-manager")
        return name

    async def remove(self, name: str) -> None:
        """Delete the node and wait until the garbage collector took its NodeFeatures with it."""
        await self.kube.delete(NODES, name)
        features = (
            (name, nfdworker.NAMESPACE),
            (name + WORKER_NODE_FEATURE_SUFFIX, self.namespace),
            (name + DEVICE_MANAGER_NODE_FEATURE_SUFFIX, self.namespace),
        )

        async def collected() -> bool:
            left = [n for n, ns in features if not await gone(self.kube, NODE_FEATURES, n, ns)]
            return not left and await gone(self.kube, NODES, name)

        await eventually(collected, timeout=LONG, what=f"node {name} and its NodeFeatures gone")

    async def remove_all(self) -> None:
        for name in self.names:
            if not await gone(self.kube, NODES, name):
                await self.remove(name)

    async def no_flavor_left(self) -> None:
        """Wait until no flavor of this hardware is left (Kueue lets a flavor go once no queue uses it)."""

        async def none_left() -> bool:
            mine = (f"gpustack--{self.g_key}-", f"gpustack--{self.g_key}--")
            return not [n for n in await by_name(self.kube, RESOURCE_FLAVORS) if n.startswith(mine)]

        await eventually(none_left, timeout=LONG, what=f"flavors of {self.g_key} deleted")


@contextlib.asynccontextmanager
async def fresh_nodes(chain: Chain, tag: str) -> AsyncIterator[FreshNodes]:
    nodes = FreshNodes(chain.kube, chain.namespace, tag)
    try:
        yield nodes
    finally:
        await nodes.remove_all()
        await nodes.no_flavor_left()


# ---- scenario 1: the default inventory -------------------------------------------------------------------


async def inventory_nodes(kube: Client) -> list[JSONObj]:
    wanted = {n.name for n in inventory.load()}
    return [n for n in (await by_name(kube, NODES)).values() if meta(n)["name"] in wanted]


async def inventory_keys(kube: Client) -> tuple[set[str], set[str]]:
    """The CPU keys and accelerator keys of the inventory's nodes, as the worker reads them off the Nodes."""
    nodes = [cast(Node, n) for n in await inventory_nodes(kube)]
    g_keys = {extract_general_node_key(n) for n in nodes}
    return g_keys, {k for n in nodes for k in extract_acceleratable_node_keys(n)}


def built_from(rf: JSONObj, g_keys: Iterable[str]) -> bool:
    """A node flavor whose CPU key is one of `g_keys` (device flavors carry `general.<gKey>=true` too)."""
    return labels(rf).get(TYPE) == "nodes" and any(labels(rf).get(G + g) == "true" for g in g_keys)


async def user_namespaces(kube: Client, system: str) -> set[str]:
    live = {
        meta(ns)["name"]
        for ns in (await by_name(kube, NAMESPACES)).values()
        if status(ns).get("phase") != "Terminating"
    }
    return live - {system, "kube-system"}


async def entrances(kube: Client, queues: Iterable[str]) -> dict[tuple[str, str], JSONObj]:
    """(namespace, cluster queue) -> its LocalQueue, for `queues` (`kubectl get localqueues -A`)."""
    names = {format_local_queue_name(q): q for q in queues}
    return {
        (meta(lq)["namespace"], names[meta(lq)["name"]]): lq
        for lq in await kube.list(LOCAL_QUEUES)
        if meta(lq)["name"] in names and spec(lq).get("clusterQueue") == names[meta(lq)["name"]]
    }


def identity(it: JSONObj | None) -> dict[str, Any]:
    return {k: spec(it).get(k) for k in ("acceleratable", "generalGroup", "acceleratorGroup", "os", "arch")}


async def pools_serving(kube: Client, pools: dict[str, Pool]) -> bool:
    """Every pool's queue labelled for it, holding its flavors, accepted by Kueue; its type Active."""
    queues, types = await by_name(kube, CLUSTER_QUEUES), await by_name(kube, INSTANCE_TYPES)
    for name, pool in pools.items():
        queue, it = queues.get(name), types.get(name)
        if labels(queue) != pool.labels() or flavors_of(queue) != pool.flavors():
            return False
        if condition(queue, "Active") != "True" or status(it).get("phase") != "Active":
            return False
        if identity(it) != pool.identity():
            return False
    return True


async def inventory_chain(chain: Chain) -> dict[str, Any] | None:
    """Everything the worker builds from the inventory, once it is all there and Kueue took it."""
    kube = chain.kube
    g_keys, _ = await inventory_keys(kube)
    if not g_keys >= {"amd-25-1", "amd-25-17", "generic-8-3393", "intel-6-106", "intel-6-207"}:
        return None  # NFD has not folded every CPU identity onto the nodes yet
    rfs = {n: rf for n, rf in (await by_name(kube, RESOURCE_FLAVORS)).items() if built_from(rf, g_keys)}
    if set(rfs) != set(FLAVORS) or not all(meta(rf).get("finalizers") for rf in rfs.values()):
        return None
    if any(labels(rf) != FLAVORS[n].labels() for n, rf in rfs.items()):
        return None
    if not await pools_serving(kube, POOLS):
        return None
    queues = await by_name(kube, CLUSTER_QUEUES)
    types = await by_name(kube, INSTANCE_TYPES)
    found = await entrances(kube, POOLS)
    if set(found) != {(ns, pool) for ns in await user_namespaces(kube, chain.namespace) for pool in POOLS}:
        return None
    features = await by_name(kube, NODE_FEATURES, chain.namespace)
    nodes = await inventory_nodes(kube)
    if not all(f"{meta(n)['name']}{WORKER_NODE_FEATURE_SUFFIX}" in features for n in nodes):
        return None
    return {"rfs": rfs, "queues": queues, "types": types, "entrances": found, "features": features}


async def at_rest_snapshot(chain: Chain) -> dict[str, Any]:
    """What would change if the worker wrote: resourceVersion + generation of every RF, InstanceType and
    worker NodeFeature; spec and metadata (not status: Kueue writes it) of every ClusterQueue and
    LocalQueue; the labels of every Devices ledger (the worker copies the mark and the CPU keys there)."""
    kube = chain.kube

    def versioned(objs: Iterable[JSONObj]) -> dict[str, tuple[str, Any]]:
        return {meta(o)["name"]: (meta(o)["resourceVersion"], meta(o).get("generation")) for o in objs}

    def declared(obj: JSONObj) -> tuple[Any, ...]:
        m = meta(obj)
        return (
            m.get("generation"),
            m.get("labels"),
            m.get("annotations"),
            m.get("finalizers"),
            m.get("ownerReferences"),
            spec(obj),
        )

    rfs = [rf for n, rf in (await by_name(kube, RESOURCE_FLAVORS)).items() if n in FLAVORS]
    types = [it for n, it in (await by_name(kube, INSTANCE_TYPES)).items() if n in POOLS]
    queues = {n: declared(q) for n, q in (await by_name(kube, CLUSTER_QUEUES)).items() if n in POOLS}
    local = {f"{ns}/{cq}": declared(lq) for (ns, cq), lq in (await entrances(kube, POOLS)).items()}
    features = (await by_name(kube, NODE_FEATURES, chain.namespace)).values()
    ours = {meta(n)["name"] for n in await inventory_nodes(kube)}
    devices = {n: labels(d) for n, d in (await by_name(kube, DEVICES)).items() if n in ours}
    return {
        "ResourceFlavor": versioned(rfs),
        "InstanceType": versioned(types),
        "ClusterQueue": queues,
        "LocalQueue": local,
        "NodeFeature": versioned(features),
        "Devices labels": devices,
        "namespaces": await user_namespaces(kube, chain.namespace),
    }


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    """Objects that differ; a LocalQueue only in a namespace live in both (a namespace going away takes
    its LocalQueues with it, which is no write of the worker's)."""
    live = before["namespaces"] & after["namespaces"]
    out: dict[str, list[str]] = {}
    for kind, objs in before.items():
        if kind == "namespaces":
            continue
        names = set(objs) | set(after[kind])
        if kind == "LocalQueue":
            names = {n for n in names if n.partition("/")[0] in live}
        differ = sorted(n for n in names if objs.get(n) != after[kind].get(n))
        if differ:
            out[kind] = differ
    return out


async def test_the_default_inventory_builds_exactly_the_documented_chain_and_then_rests(chain: Chain) -> None:
    kube = chain.kube
    built = await eventually(lambda: inventory_chain(chain), timeout=LONG, what="the inventory's chain built")
    say(f"scenario 1: the inventory's chain built {time.monotonic() - chain.started:.1f}s after worker start")

    # ResourceFlavors: exactly the documented names, with the contract's labels and node pinning.
    _, a_keys = await inventory_keys(kube)
    assert a_keys == {"nvidia-h100-80gb-hbm3", "nvidia-a10", "ascend-910b2"}
    assert sorted(built["rfs"]) == sorted(FLAVORS)
    for name, flavor in FLAVORS.items():
        rf = built["rfs"][name]
        assert labels(rf) == flavor.labels(), name
        assert spec(rf)["nodeLabels"] == flavor.node_labels(), name
        assert spec(rf)["tolerations"] == [{"operator": "Exists"}], name

    # ClusterQueues and InstanceTypes: one pool per (accelerator, os, arch), the CPUs collapsed to generic.
    assert sorted(built["queues"].keys() & POOLS.keys()) == sorted(POOLS)
    for name, pool in POOLS.items():
        queue, it = built["queues"][name], built["types"][name]
        assert spec(queue)["stopPolicy"] == "None"
        assert "cohortName" not in spec(queue)
        assert labels(it) == {DERIVED: "true"}, name
        assert CONTROLLED_FINALIZER in meta(it)["finalizers"]
        assert identity(it) == pool.identity(), name
        assert status(it)["entrance"] == format_local_queue_name(name)
    assert quota(built["queues"]["gpustack--nvidia-h100-80gb-hbm3-linux-amd64"]) == [
        ("gpustack--amd-25-17--nvidia-h100-80gb-hbm3-linux-amd64-8d", "25600k")  # 16 cards x 1.6M credits
    ]
    assert quota(built["queues"][CPU_POOL]) == [
        ("gpustack--intel-6-106-linux-amd64-64c", "64"),
        ("gpustack--amd-25-1-linux-amd64-128c", "128"),
        ("gpustack--intel-6-207-linux-amd64-128c", "128"),
        ("gpustack--amd-25-17-linux-amd64-192c", "384"),
    ]

    # The types' status follows its queue and ledgers (coalesced over the worker's fan-in period).
    async def views_settled() -> bool:
        h100 = await kube.get(INSTANCE_TYPES, "gpustack--nvidia-h100-80gb-hbm3-linux-amd64")
        assert status(h100)["accelerator"]["capacity"] == "16"
        return await cpu_type_capacity(kube) == 704

    await eventually(views_settled, timeout=LONG, what="the pools' views: 16 H100 cards, 704 CPUs")

    # Nothing else built by anyone refers to an inventory node or flavor.
    nodes = await inventory_nodes(kube)
    for name, rf in (await by_name(kube, RESOURCE_FLAVORS)).items():
        if name.startswith("gpustack--") and name not in FLAVORS:
            selector = spec(rf).get("nodeLabels") or {}
            hits = [meta(n)["name"] for n in nodes if selector and selector.items() <= labels(n).items()]
            assert not hits, f"{name} selects inventory nodes {hits}"
    for name, queue in (await by_name(kube, CLUSTER_QUEUES)).items():
        if name not in POOLS:
            assert not set(flavors_of(queue)) & set(FLAVORS), f"{name} holds inventory flavors"

    # Entrances: a LocalQueue per pool in every namespace but the worker's and kube-system.
    namespaces = await user_namespaces(kube, chain.namespace)
    assert set(built["entrances"]) == {(ns, pool) for ns in namespaces for pool in POOLS}
    lq = built["entrances"][("default", CPU_POOL)]
    assert meta(lq)["annotations"]["schedule.gpustack.ai/queue"] == CPU_POOL
    assert meta(lq)["ownerReferences"][0]["name"] == CPU_POOL
    assert not await kube.list(LOCAL_QUEUES, chain.namespace)

    # The worker's NodeFeatures: the management mark and the CPU key with its count; NFD put them on nodes.
    for node in nodes:
        name = meta(node)["name"]
        g_key = extract_general_node_key(cast(Node, node))
        cpus = status(node)["capacity"]["cpu"]
        want = {
            MANAGED_LABEL: "true",
            G + g_key.split("-")[0]: "true",
            G + g_key: "true",
            f"{G}{g_key}.count": cpus,
        }
        assert spec(built["features"][name + WORKER_NODE_FEATURE_SUFFIX])["labels"] == want, name
        assert want.items() <= labels(node).items(), name

    # At rest: once a 5 s look shows nothing moving, 30 s in which the worker writes nothing at all.
    async def settled() -> dict[str, Any] | None:
        first = await at_rest_snapshot(chain)
        await asyncio.sleep(5)
        return first if not changed(first, await at_rest_snapshot(chain)) else None

    before = await eventually(settled, timeout=LONG, interval=0, what="the chain settled")
    counts_before = await chain.metrics()
    await asyncio.sleep(30)
    after = await at_rest_snapshot(chain)
    assert not changed(before, after), f"written at rest: {changed(before, after)}"
    watched = sum(len(objs) for kind, objs in before.items() if kind != "namespaces")
    counts = await chain.assert_no_reconcile_errors()
    for controller in CONTROLLERS:
        assert counts.get((controller, "success"), 0) > 0, f"{controller} never reconciled: {counts}"
    during = {c: counts.get((c, "success"), 0) - counts_before.get((c, "success"), 0) for c in CONTROLLERS}
    say(
        f"scenario 1: 0 writes at rest in 30s over {watched} objects; reconciles during the window "
        f"{ {c: int(n) for c, n in during.items() if n} }; totals "
        f"{ {f'{c}/{r}': int(n) for (c, r), n in sorted(counts.items())} }"
    )


# ---- scenario 2: a node leaves and comes back ------------------------------------------------------------


async def cpu_pool_quota(kube: Client) -> dict[str, str]:
    return dict(quota(await kube.get_or_none(CLUSTER_QUEUES, CPU_POOL)))


async def cpu_type_capacity(kube: Client) -> int:
    """The CPU column of `kubectl get instancetype gpustack--generic-linux-amd64`."""
    it = await kube.get(INSTANCE_TYPES, CPU_POOL)
    return int(((status(it).get("cpu") or {}).get("capacity")) or 0)


async def settled_cpu_capacity(kube: Client) -> int:
    """The CPU column once it has caught up with the pool's quota (the type's status follows its queue)."""

    async def settled() -> int | None:
        total = sum(int(value) for value in (await cpu_pool_quota(kube)).values())
        return total if await cpu_type_capacity(kube) == total else None

    return await eventually(settled, timeout=LONG, what="the CPU pool's type showing its queue's quota")


async def capacity(kube: Client, flavor: str, key: str) -> str | None:
    rf = await kube.get_or_none(RESOURCE_FLAVORS, flavor)
    return None if rf is None else labels(rf).get(f"{key}.capacity")


async def test_a_node_that_leaves_takes_its_flavor_out_of_the_pool_and_brings_it_back(chain: Chain) -> None:
    kube = chain.kube
    async with fresh_nodes(chain, "move") as hw:
        flavor, key = hw.cpu_flavor(), G + hw.g_key
        before = await settled_cpu_capacity(kube)

        async def pool_has(nodes: int) -> bool:
            """The flavor's capacity, the pool's quota and the type's CPU column all count `nodes` x 8."""
            nominal = str(8 * nodes) if nodes else None
            return (
                (await cpu_pool_quota(kube)).get(flavor) == nominal
                and await capacity(kube, flavor, key) == nominal
                and await cpu_type_capacity(kube) == before + 8 * nodes
            )

        clock = timed()
        first, second = await hw.add("a"), await hw.add("b")
        await eventually(lambda: pool_has(2), timeout=LONG, what="two nodes in the CPU pool (16 cpus)")
        say(f"scenario 2: two fresh nodes in the pool after {clock()}s")
        inventory_quota = {f: q for f, q in (await cpu_pool_quota(kube)).items() if f in FLAVORS}
        assert list(inventory_quota) == POOLS[CPU_POOL].flavors()

        clock = timed()
        await hw.remove(second)
        await eventually(lambda: pool_has(1), timeout=LONG, what="one node left: capacity 8")
        say(f"scenario 2: one of two nodes removed, capacity 16 -> 8 in {clock()}s")

        clock = timed()
        await kube.delete(NODES, first)
        await eventually(lambda: gone(kube, RESOURCE_FLAVORS, flavor), timeout=LONG, what="flavor deleted")
        assert flavor not in await cpu_pool_quota(kube)
        await eventually(lambda: pool_has(0), timeout=LONG, what="the type's CPU capacity back")
        say(f"scenario 2: last node removed, flavor deleted and out of the pool in {clock()}s")
        await hw.remove(first)
        assert {f: q for f, q in (await cpu_pool_quota(kube)).items() if f in FLAVORS} == inventory_quota

        clock = timed()
        await hw.add("a")
        await eventually(lambda: pool_has(1), timeout=LONG, what="flavor restored in the pool")
        say(f"scenario 2: node back, flavor restored in the pool in {clock()}s")
        rf = await kube.get(RESOURCE_FLAVORS, flavor)
        assert labels(rf)[f"{key}.count"] == "8"
        it = await kube.get(INSTANCE_TYPES, CPU_POOL)
        assert status(it)["phase"] == "Active"
    await chain.assert_no_reconcile_errors()


# ---- scenario 3: a pool loses every node -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def stop_policies(kube: Client, name: str) -> AsyncIterator[list[str]]:
    """The queue's stopPolicy at each change from now on, as `kubectl get clusterqueue <name> -w` shows it."""
    current = await kube.get(CLUSTER_QUEUES, name)
    seen = [str(spec(current).get("stopPolicy", "None"))]

    async def follow() -> None:
        version = meta(current)["resourceVersion"]
        while True:
            events = watch(
                kube,
                CLUSTER_QUEUES,
                resource_version=version,
                field_selector=f"metadata.name={name}",
                timeout_seconds=60,
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    version = meta(event["object"])["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        policy = str(spec(event["object"]).get("stopPolicy", "None"))
                        if policy != seen[-1]:
                            seen.append(policy)

    task = asyncio.create_task(follow())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def pool_state(kube: Client, pool: str) -> tuple[JSONObj | None, JSONObj | None]:
    return await kube.get_or_none(CLUSTER_QUEUES, pool), await kube.get_or_none(INSTANCE_TYPES, pool)


async def test_a_pool_that_loses_every_node_drains_and_stays_inactive_when_they_return(chain: Chain) -> None:
    kube = chain.kube
    assert await chain.setting("instance-type-drain-when-no-flavors") == "true"  # the default (§6)
    async with fresh_nodes(chain, "pool") as hw:
        pool, flavor = hw.gpu_pool, hw.gpu_flavor(2)
        try:
            await _lose_and_recover(chain, hw, pool, flavor)
        finally:
            await hw.remove_all()
            await hw.no_flavor_left()
            await kube.delete(INSTANCE_TYPES, pool)  # derived, create-only: nothing deletes it but an admin
            await eventually(lambda: gone(kube, INSTANCE_TYPES, pool), timeout=LONG, what=f"{pool} deleted")
            await eventually(
                lambda: gone(kube, CLUSTER_QUEUES, pool), timeout=LONG, what=f"queue {pool} gone"
            )
            await eventually(partial(no_entrance, kube, pool), timeout=LONG, what="its entrances collected")
    await chain.assert_no_reconcile_errors()


async def no_entrance(kube: Client, pool: str) -> bool:
    return not await entrances(kube, [pool])


async def _lose_and_recover(chain: Chain, hw: FreshNodes, pool: str, flavor: str) -> None:
    kube = chain.kube

    async def serving() -> bool:
        queue, it = await pool_state(kube, pool)
        return (
            quota(queue) == [(flavor, "6400k")]  # 2 nodes x 2 cards x 1.6M credits
            and spec(queue).get("stopPolicy") == "None"
            and status(it).get("phase") == "Active"
        )

    clock = timed()
    names = [await hw.add("a", cards=2), await hw.add("b", cards=2)]
    await eventually(serving, timeout=LONG, what=f"pool {pool} serving its four cards")
    say(f"scenario 3: a fresh 2-node pool built and Active in {clock()}s")
    queue, it = await pool_state(kube, pool)
    assert labels(it) == {DERIVED: "true"}
    assert spec(it)["acceleratorGroup"] == hw.a_key
    assert labels(queue)[A + hw.a_key] == "true"

    async def drained() -> bool:
        queue, it = await pool_state(kube, pool)
        return (
            await gone(kube, RESOURCE_FLAVORS, flavor)
            and not spec(queue).get("resourceGroups")
            and spec(queue).get("stopPolicy") == "HoldAndDrain"
            and spec(it).get("inactive") is True
            and status(it).get("phase") == "Inactive"
            and status(it).get("phaseMessage") == "cluster queue is held and drained"
        )

    clock = timed()
    async with stop_policies(kube, pool) as policies:
        for name in names:
            await kube.delete(NODES, name)
        await eventually(drained, timeout=LONG, what="the pool drained, emptied, its type Inactive")
        say(
            f"scenario 3: every node gone -> flavor deleted, queue HoldAndDrain and emptied, type Inactive "
            f"in {clock()}s"
        )
        await eventually(partial(_is, policies, ["None", "HoldAndDrain"]), timeout=30, what="watched drain")
    queue, it = await pool_state(kube, pool)
    assert annotations_of(queue).get(DRAINED_ANNOTATION) == "no-flavors"
    assert await kube.get_or_none(INSTANCE_TYPES, pool) is not None  # never deleted for lack of flavors
    for name in names:
        await hw.remove(name)

    async def recovered_but_held() -> bool:
        queue, it = await pool_state(kube, pool)
        return (
            quota(queue) == [(flavor, "6400k")]
            and spec(queue).get("stopPolicy") == "Hold"
            and DRAINED_ANNOTATION not in annotations_of(queue)
            and spec(it).get("inactive") is True
            and status(it).get("phase") == "Inactive"
            and status(it).get("phaseMessage") == "cluster queue is held"
        )

    clock = timed()
    async with stop_policies(kube, pool) as policies:
        for name in ("a", "b"):
            await hw.add(name, cards=2)
        await eventually(recovered_but_held, timeout=LONG, what="quota back, queue resumed then re-held")
        say(f"scenario 3: nodes back -> quota restored, queue None then Hold (type Inactive) in {clock()}s")
        # NodeQueue resumes the queue it drained (None); the sticky Inactive holds it again (§7.9, Stage 4).
        want = ["HoldAndDrain", "None", "Hold"]
        await eventually(partial(_is, policies, want), timeout=30, what="watched resume and re-hold")

    clock = timed()
    await kube.patch(INSTANCE_TYPES, pool, {"spec": {"inactive": False}})
    await eventually(serving, timeout=LONG, what="the admin cleared Inactive: the pool serves again")
    say(f"scenario 3: admin cleared Inactive -> queue None, type Active in {clock()}s")


# ---- scenario 5: CPU-manufacturer awareness --------------------------------------------------------------


async def inventory_flavor_versions(kube: Client) -> dict[str, str]:
    return {
        n: meta(rf)["resourceVersion"]
        for n, rf in (await by_name(kube, RESOURCE_FLAVORS)).items()
        if n in FLAVORS
    }


async def test_cpu_awareness_splits_pools_per_cpu_and_back_without_touching_a_flavor(chain: Chain) -> None:
    kube = chain.kube
    await eventually(lambda: inventory_chain(chain), timeout=LONG, what="the inventory's chain in place")
    versions = await inventory_flavor_versions(kube)
    unaware = {
        n: (labels(q), quota(q)) for n, q in (await by_name(kube, CLUSTER_QUEUES)).items() if n in POOLS
    }
    assert sorted(versions) == sorted(FLAVORS)
    try:
        clock = timed()
        async with chain.switched(AWARE, "true"):
            await eventually(lambda: aware_pools(chain), timeout=LONG, what="a pool per CPU key")
            say(f"scenario 5: awareness on -> {len(AWARE_POOLS)} per-CPU pools Active in {clock()}s")
            assert await inventory_flavor_versions(kube) == versions, "a ResourceFlavor was rewritten"
            types = await by_name(kube, INSTANCE_TYPES)
            assert all(labels(types[name]) == {DERIVED: "true"} for name in AWARE_POOLS)
            h100 = status(types["gpustack--amd-25-17--nvidia-h100-80gb-hbm3-linux-amd64"])
            assert h100["accelerator"]["capacity"] == "16"  # the CPU-aware pool finds its Devices ledgers
            assert status(types["gpustack--amd-25-17-linux-amd64"])["cpu"]["capacity"] == "384"
            queues = await by_name(kube, CLUSTER_QUEUES)
            assert {n: (labels(q), quota(q)) for n, q in queues.items() if n in POOLS} == unaware
            clock = timed()
        # Off again. The aware InstanceTypes were derived create-only and nothing deletes an InstanceType for
        # lack of flavors (contract §7.9, Stage 4; the original does the same), so they stay; their queues'
        # labels follow PoolScheduleLabels with awareness off (§7.7: no general key), the stale
        # `general.<gKey>` label is pruned, and each aware queue re-points at the collapsed pool: the same
        # flavors as its unaware twin. The unaware pools never changed; an admin deletes the leftovers.
        await eventually(lambda: collapsed(chain, unaware), timeout=LONG, what="aware queues collapsed")
        say(f"scenario 5: awareness off -> aware queues collapsed onto the unaware pools in {clock()}s")
        assert await inventory_flavor_versions(kube) == versions, "a ResourceFlavor was rewritten"
        assert {n for n in await by_name(kube, INSTANCE_TYPES) if n in AWARE_POOLS} == set(AWARE_POOLS)
    finally:
        if await chain.setting(AWARE) != "false":
            await chain.set(AWARE, "false")
        clock = timed()
        for pool in AWARE_POOLS:
            await kube.delete(INSTANCE_TYPES, pool)

        async def no_aware_pool_left() -> bool:
            names = (await by_name(kube, CLUSTER_QUEUES)).keys() | (
                await by_name(kube, INSTANCE_TYPES)
            ).keys()
            return not names & AWARE_POOLS.keys() and not await entrances(kube, AWARE_POOLS)

        await eventually(no_aware_pool_left, timeout=LONG, what="aware types, queues and entrances gone")
        say(f"scenario 5: aware leftovers deleted (types, queues, entrances) in {clock()}s")
    assert await eventually(lambda: inventory_chain(chain), timeout=LONG, what="the unaware chain as before")
    assert await inventory_flavor_versions(kube) == versions
    await chain.assert_no_reconcile_errors()


async def aware_pools(chain: Chain) -> bool:
    kube = chain.kube
    if not await pools_serving(kube, AWARE_POOLS):
        return False
    found = await entrances(kube, AWARE_POOLS)
    return {cq for ns, cq in found if ns == "default"} == set(AWARE_POOLS)


async def collapsed(chain: Chain, unaware: dict[str, tuple[dict[str, str], list[tuple[str, str]]]]) -> bool:
    queues = await by_name(chain.kube, CLUSTER_QUEUES)
    for name, pool in AWARE_POOLS.items():
        twin = f"gpustack--{pool.a_key or 'generic'}-linux-{pool.arch}"
        if (labels(queues.get(name)), quota(queues.get(name))) != unaware[twin]:
            return False
    return {n: (labels(q), quota(q)) for n, q in queues.items() if n in POOLS} == unaware


# ---- scenario 8: manual node management ------------------------------------------------------------------


async def worker_labels(chain: Chain, node: str) -> dict[str, str] | None:
    feature = await chain.kube.get_or_none(NODE_FEATURES, node + WORKER_NODE_FEATURE_SUFFIX, chain.namespace)
    return None if feature is None else dict(spec(feature).get("labels") or {})


async def test_with_manual_management_only_nodes_an_admin_labels_join_a_pool(chain: Chain) -> None:
    kube = chain.kube
    async with chain.switched(MANUAL, "true"), fresh_nodes(chain, "manual") as hw:
        flavor, key = hw.cpu_flavor(), G + hw.g_key

        async def marking(node: str) -> str | None:
            """Whether the worker marked the node managed (`marked`), or left it alone (`unmarked`: NFD
            folded the node's CPU key onto it and neither the worker nor the node carries the mark)."""
            reported = await worker_labels(chain, node)
            if reported is None:
                return None
            if MANAGED_LABEL in reported:
                return "marked"
            node_labels = labels(await kube.get_or_none(NODES, node))
            if node_labels.get(f"{key}.count") != "8":
                return None
            return "marked" if MANAGED_LABEL in node_labels else "unmarked"

        # The worker reads the setting from its cache: a node it reconciled before seeing it would be marked
        # (and the mark, once NFD put it on the node, wins for good), so make nodes until one is left alone.
        clock = timed()
        for attempt in range(3):
            first = await hw.add(f"a{attempt}")
            reported = await eventually(partial(marking, first), timeout=LONG, what=f"{first} reported")
            if reported == "unmarked":
                break
            say(f"scenario 8: {first} was marked before the worker saw manual mode; trying another node")
            await hw.remove(first)
            await hw.no_flavor_left()
        else:
            pytest.fail("the worker kept marking new nodes under manual management")
        second = await hw.add("b")
        assert (
            await eventually(lambda: marking(second), timeout=LONG, what=f"{second} reported") == "unmarked"
        )
        assert await gone(kube, RESOURCE_FLAVORS, flavor), "an unlabelled node joined a pool"
        say(f"scenario 8: two nodes joined the cluster unmanaged in {clock()}s")

        clock = timed()
        await kube.patch(NODES, first, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})
        await eventually(
            lambda: _equals(cpu_pool_quota(kube), flavor, "8"), timeout=LONG, what="the labelled node joined"
        )
        say(f"scenario 8: admin labelled one node managed -> in the pool in {clock()}s")
        assert await capacity(kube, flavor, key) == "8"  # only the labelled node
        assert (await worker_labels(chain, first) or {}).get(MANAGED_LABEL) == "true"  # the node's value wins
        assert MANAGED_LABEL not in (await worker_labels(chain, second) or {})

        clock = timed()
        await kube.patch(NODES, second, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})
        await eventually(
            lambda: _equals(cpu_pool_quota(kube), flavor, "16"), timeout=LONG, what="both joined"
        )
        say(f"scenario 8: admin labelled the second node -> capacity 16 in {clock()}s")
    assert await chain.setting(MANUAL) == "false"
    await chain.assert_no_reconcile_errors()


async def _equals(probe: Awaitable[dict[str, str]], key: str, want: str) -> bool:
    return (await probe).get(key) == want


async def _is(value: Any, want: Any) -> bool:
    assert value == want, value  # eventually() reports the last one seen
    return True
