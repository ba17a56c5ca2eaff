"""A sliced Pod sized in MiB on the pools the operator derives from the sandbox's nodes (issue 25).

Only the derived InstanceTypes are used (none is made by hand): a real `gpustack-operator worker` derives
one per pool from the inventory's kwok GPU nodes (contract §7.9) and its InstanceType defaulting webhook
fills the type's device details from the pool's ResourceFlavors (§4.1, rules.instancetype.descriptors).
For each sliceable card model of the inventory (a manufacturer with logical slices), a Pod in the pool's
LocalQueue asking `<base>.sliced: 1` with `<base>.sliced.memory-mib` is accepted and stored with
`<base>.sliced.units = floor(mib x 1_600_000 / card MiB)` (§4.4) in requests and limits; a MiB above the
card is refused, naming the field; and `kubectl get instancetype` shows each pool's product and memory.

The Pods are created with `--dry-run=server`: kube-apiserver runs the whole admission chain (our mutating
and validating webhooks and Kueue's, all `sideEffects: None`) and returns what it would store, without a
Pod that Kueue would then admit onto the nodes other modules count cards on.

A derived type made while no webhook was serving (an earlier module runs the controllers in-process) has
no memory and, its spec being frozen, never gets one; such a type is deleted once so the worker derives it
again, as an admin would.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial

import pytest
import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import DERIVED_FROM_NODE_LABEL, NOTE_PREFIX, NOTE_SLICEABLE
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES, LOCAL_QUEUES, NAMESPACES, PODS, RESOURCE_FLAVORS
from gpustack_operator.rules.capacity.credits import quantity_to_mib
from gpustack_operator.rules.naming.flavors import pool_name
from gpustack_operator.rules.naming.groups import accelerator_key, construct_group_id
from gpustack_operator.rules.naming.manufacturers import manufacturer
from gpustack_operator.rules.naming.names import sanitize_label_value
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.sandbox import inventory
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl, Served, serving_worker

CARD_UNITS = 1_600_000
LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded 2-core machine, not an expectation)."""
INVALID_POD = re.compile(r'The Pod "mib-\w*" is invalid: ')


@dataclass(frozen=True)
class Pool:
    """A sliceable card model of the inventory and the pool the worker derives for it."""

    name: str
    """The derived InstanceType (and ClusterQueue) name."""
    base: str
    """The card's exclusive resource, e.g. `nvidia.com/gpu`."""
    product: str
    """The product as the node label (and so the flavor's note) carries it."""
    card_mib: int


def sliceable_pools() -> list[Pool]:
    pools: dict[str, Pool] = {}
    for node in inventory.load():
        for gpu in node.gpus:
            maker = manufacturer(gpu.manufacturer)
            if maker is None or maker.max_logical_slices <= 0:
                continue
            key = accelerator_key(maker.name, construct_group_id(maker.name, gpu.product, gpu.memory_mib))
            name = f"{pool_name(False, '', key)}-{node.os}-{node.arch}"
            product = sanitize_label_value(gpu.product)
            pools[name] = Pool(name, maker.resource_name, product, gpu.memory_mib)
    return sorted(pools.values(), key=lambda pool: pool.name)


POOLS = sliceable_pools()


def test_the_inventory_has_sliceable_pools_of_two_manufacturers() -> None:
    assert len(POOLS) >= 3
    assert {pool.base for pool in POOLS} >= {"nvidia.com/gpu", "huawei.com/npu"}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(sandbox, kube, tmp_path_factory.mktemp("derived"), "derived-0") as served:
        yield served


async def _derived_with_memory(kube: Client, pool: Pool, deleted: set[str]) -> JSONObj | None:
    it = await kube.get_or_none(INSTANCE_TYPES, pool.name)
    if it is None:
        return None
    labels = (it.get("metadata") or {}).get("labels") or {}
    assert labels.get(DERIVED_FROM_NODE_LABEL) == "true", f"{pool.name} is not a derived type"
    if (it.get("spec") or {}).get("memory"):
        return it
    if pool.name not in deleted and not (it.get("metadata") or {}).get("deletionTimestamp"):
        deleted.add(pool.name)  # made without our webhook: derived again once gone
        await kube.delete(INSTANCE_TYPES, pool.name)
    return None


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def derived(kube: Client, served: Served) -> dict[str, JSONObj]:
    """Each sliceable pool's derived InstanceType, once it has its device details."""
    deleted: set[str] = set()
    found: dict[str, JSONObj] = {}
    for pool in POOLS:
        found[pool.name] = await eventually(
            partial(_derived_with_memory, kube, pool, deleted),
            timeout=LONG,
            what=f"the derived {pool.name} with spec.memory",
        )
    return found


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def queues(kube: Client, derived: dict[str, JSONObj]) -> AsyncIterator[str]:
    """A namespace where every sliceable pool's LocalQueue exists and Kueue's webhook knows it."""
    name = f"mib-{uuid.uuid4().hex[:8]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    try:

        async def entrances() -> bool:
            for pool in POOLS:
                if await kube.get_or_none(LOCAL_QUEUES, format_local_queue_name(pool.name), name) is None:
                    return False
            probe = pod(name, POOLS[0], {f"{POOLS[0].base}.sliced.memory-percentage": "10"})
            try:
                await kube.create(PODS, probe, dry_run=True)
            except errors.KubeError:
                return False
            return True

        await eventually(entrances, timeout=LONG, what="the pools' LocalQueues in a namespace Kueue knows")
        yield name
    finally:
        await kube.delete(NAMESPACES, name)


def pod(namespace: str, pool: Pool, memory: dict[str, str]) -> JSONObj:
    limits = {f"{pool.base}.sliced": "1", **memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "mib-",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": format_local_queue_name(pool.name)},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]},
    }


async def dry_run(kubectl: Kubectl, manifest: JSONObj) -> tuple[JSONObj | None, str]:
    """`kubectl create --dry-run=server -o json`: (what would be stored, "") or (None, kubectl's error)."""
    rc, out, err = await kubectl.run(
        "create", "--dry-run=server", "-f", "-", "-o", "json", stdin=json.dumps(manifest)
    )
    return (json.loads(out), "") if rc == 0 else (None, err.strip())


def ids(pool: Pool) -> str:
    return pool.name.removeprefix("gpustack--")


@pytest.mark.parametrize("pool", POOLS, ids=ids)
async def test_a_mib_slice_is_folded_by_the_card_of_its_derived_pool(
    kubectl: Kubectl, kube: Client, derived: dict[str, JSONObj], queues: str, pool: Pool
) -> None:
    spec = derived[pool.name]["spec"]
    assert quantity_to_mib(Quantity.parse(spec["memory"])) == pool.card_mib
    selector = f"acceleratable.feature.gpustack.ai/{spec['acceleratorGroup']}=true"
    flavors = await kube.list(RESOURCE_FLAVORS, label_selector=selector)
    assert flavors
    sliceable = {f["metadata"]["annotations"].get(NOTE_PREFIX + NOTE_SLICEABLE) for f in flavors}
    assert sliceable == {"true"}, f"{pool.name}'s flavors say its cards are not sliceable"
    units, cores = f"{pool.base}.sliced.units", f"{pool.base}.sliced.cores-percentage"
    for mib in (4096, 10_000, pool.card_mib):
        stored, err = await dry_run(kubectl, pod(queues, pool, {f"{pool.base}.sliced.memory-mib": str(mib)}))
        assert stored is not None, err
        resources = stored["spec"]["containers"][0]["resources"]
        want = math.floor(mib * CARD_UNITS / pool.card_mib)
        for section in ("requests", "limits"):
            assert Quantity.parse(resources[section][units]) == Quantity(want), (mib, section, resources)
            assert resources[section][cores] == "100"


@pytest.mark.parametrize("pool", POOLS, ids=ids)
async def test_a_mib_above_the_card_is_refused_naming_the_field(
    kubectl: Kubectl, derived: dict[str, JSONObj], queues: str, pool: Pool
) -> None:
    mib = pool.card_mib + 1
    stored, err = await dry_run(kubectl, pod(queues, pool, {f"{pool.base}.sliced.memory-mib": str(mib)}))
    assert stored is None
    assert INVALID_POD.match(err), err
    where = f'spec.containers[0].resources.limits[{pool.base}.sliced.memory-mib]: Invalid value: "{mib}"'
    assert f"{where}: memory-mib {mib} exceeds the card's {pool.card_mib}Mi" in err, err


async def test_kubectl_get_instancetype_shows_each_pools_product_and_memory(
    kubectl: Kubectl, derived: dict[str, JSONObj]
) -> None:
    out = await kubectl.ok("get", "instancetype", *(pool.name for pool in POOLS))
    header, *lines = out.splitlines()
    columns = header.split()
    product, memory = columns.index("PRODUCT"), columns.index("MEMORY")
    rows = {line.split()[0]: line.split() for line in lines}
    for pool in POOLS:
        cells = rows[pool.name]
        assert cells[product] == pool.product, (pool.name, header, cells)
        assert quantity_to_mib(Quantity.parse(cells[memory])) == pool.card_mib, (pool.name, cells)
