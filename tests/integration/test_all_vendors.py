"""The all-vendors sandbox (issue 28): one node of each manufacturer, each pool's InstanceType with its card.

A sandbox of its own is started from the bundled inventory `all-vendors` (`sandbox up --inventory
all-vendors`): one kwok node per manufacturer the operator supports (NVIDIA, AMD, Ascend, Cambricon, Hygon,
Iluvatar, MetaX, Moore Threads, T-Head), each with its device manager on the simulated backend and a
kubelet stand-in. A real `gpustack-operator worker` (webhooks and aggregated API serving) derives one
InstanceType per pool. What a user would see:

- every vendor's pool has its InstanceType, showing the card's product and memory (`kubectl get
  instancetypes`: the PRODUCT and MEMORY columns, `spec.product`/`spec.memory` filled by the defaulting
  webhook from the pool's flavors) and whole cards in its exclusive view;
- the Ascend pool's sliced view is non-zero (its NPUs are logically sliceable: 100 units a card);
- a Pod asking a slice of an Ascend NPU (`huawei.com/npu.sliced: 1`, 16 GiB and 30 % of its AI cores)
  through the pool's LocalQueue is admitted by Kueue past the per-card check, bound by the scheduler,
  allocated by the node's device manager over the kubelet stand-in's device-plugin gRPC, and the
  vcann-rt `npu_info.config` its Allocate mounts into the container holds the quota it asked for.

One sandbox start for the whole module; every wait is a convergence with a generous limit, never a sleep.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.rules.capacity.credits import quantity_to_mib
from gpustack_operator.rules.naming.flavors import pool_name
from gpustack_operator.rules.naming.groups import accelerator_key, construct_group_id
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.names import sanitize_label_value
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.sandbox import inventory
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.nodeagents import kubelet_name
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl, Served, serving_worker

LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded 2-core machine, not an expectation)."""
SLICE_MIB, SLICE_CORES = 16384, 30
NPU_SLICED = "huawei.com/npu.sliced"
CONFIG_IN_CONTAINER = "/etc/enpu/vcann-rt/npu_info.config"


@dataclass(frozen=True)
class Pool:
    """One vendor's card model in the inventory and the InstanceType the worker derives for it."""

    manufacturer: str
    name: str
    node: str
    product: str
    card_mib: int
    cards: int


def pools() -> dict[str, Pool]:
    found: dict[str, Pool] = {}
    for node in inventory.load(inventory.ALL_VENDORS_INVENTORY):
        for gpu in node.gpus:
            key = accelerator_key(
                gpu.manufacturer, construct_group_id(gpu.manufacturer, gpu.product, gpu.memory_mib)
            )
            name = f"{pool_name(False, '', key)}-{node.os}-{node.arch}"
            product = sanitize_label_value(gpu.product)
            found[gpu.manufacturer] = Pool(
                gpu.manufacturer, name, node.name, product, gpu.memory_mib, gpu.count
            )
    return found


POOLS = pools()


def test_the_inventory_has_one_pool_of_every_manufacturer() -> None:
    assert sorted(POOLS) == sorted(manufacturers())


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def box(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sandbox]:
    run_dir = tmp_path_factory.mktemp("vendors")
    async with Sandbox(run_dir, inventory_file=inventory.ALL_VENDORS_INVENTORY, progress=print) as sandbox:
        yield sandbox


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def client(box: Sandbox) -> AsyncIterator[Client]:
    kube = await connect(box.kubeconfig)
    try:
        yield kube
    finally:
        await kube.close()


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    box: Sandbox, client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_worker(box, client, tmp_path_factory.mktemp("vendors-worker"), "vendors-0") as served:
        yield served


async def _ready_type(kube: Client, pool: Pool) -> JSONObj | None:
    """The pool's InstanceType once it shows its card and counts its cards (None until then)."""
    it = await kube.get_or_none(resources.INSTANCE_TYPES, pool.name)
    if it is None or not (it.get("spec") or {}).get("memory"):
        return None
    exclusive = (it.get("status") or {}).get("accelerator") or {}
    if Quantity.parse(str(exclusive.get("remaining", "0"))) != Quantity(pool.cards):
        return None
    return it


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def types(client: Client, served: Served) -> dict[str, JSONObj]:
    """Every vendor's derived InstanceType, once it has its memory and its free cards."""
    found: dict[str, JSONObj] = {}
    for mfr, pool in POOLS.items():
        found[mfr] = await eventually(
            partial(_ready_type, client, pool),
            timeout=LONG,
            what=f"{pool.name} with memory and cards",
        )
    return found


async def test_every_vendors_pool_shows_its_card_and_memory_and_ascend_can_be_sliced(
    box: Sandbox, types: dict[str, JSONObj]
) -> None:
    for mfr, pool in POOLS.items():
        spec = types[mfr]["spec"]
        assert (spec["manufacturer"], spec["product"]) == (mfr, pool.product), mfr
        assert quantity_to_mib(Quantity.parse(spec["memory"])) == pool.card_mib, (mfr, spec["memory"])
    sliced = types["ascend"]["status"]["acceleratorSliced"]
    assert Quantity.parse(sliced["capacity"]) == Quantity(100 * POOLS["ascend"].cards), sliced
    assert Quantity.parse(sliced["remaining"]) == Quantity(100 * POOLS["ascend"].cards), sliced

    out = await Kubectl(box).ok(
        "get", "instancetypes", "--no-headers", "-o", "custom-columns=N:.metadata.name,M:.spec.memory"
    )
    shown = dict(line.split() for line in out.splitlines())
    for mfr, pool in POOLS.items():
        assert quantity_to_mib(Quantity.parse(shown[pool.name])) == pool.card_mib, (mfr, shown)


@pytest_asyncio.fixture(loop_scope="session")
async def queued_namespace(client: Client, types: dict[str, JSONObj]) -> AsyncIterator[str]:
    """A namespace with the Ascend pool's LocalQueue, known to Kueue's webhook."""
    name = f"npu-{uuid.uuid4().hex[:8]}"
    await client.create(resources.NAMESPACES, {"metadata": {"name": name}})
    try:

        async def entrance() -> bool:
            queue = format_local_queue_name(POOLS["ascend"].name)
            if await client.get_or_none(resources.LOCAL_QUEUES, queue, name) is None:
                return False
            try:
                await client.create(resources.PODS, npu_slice(name), dry_run=True)
            except errors.KubeError:
                return False
            return True

        await eventually(
            entrance, timeout=LONG, what="the Ascend pool's LocalQueue in a namespace Kueue knows"
        )
        yield name
    finally:
        await client.delete(resources.NAMESPACES, name)


def npu_slice(namespace: str) -> JSONObj:
    limits = {
        NPU_SLICED: "1",
        f"{NPU_SLICED}.memory-mib": str(SLICE_MIB),
        f"{NPU_SLICED}.cores-percentage": str(SLICE_CORES),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "npu-slice",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": format_local_queue_name(POOLS["ascend"].name)},
        },
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


async def allocated_pod(kube: Client, namespace: str) -> JSONObj | None:
    pod = await kube.get(resources.PODS, "npu-slice", namespace)
    annotations = pod["metadata"].get("annotations") or {}
    if pod["status"].get("phase") != "Running" or ACCELERATOR_ALLOCATED_ANNOTATION not in annotations:
        return None
    return pod


async def admitted(kube: Client, namespace: str) -> JSONObj | None:
    for workload in await kube.list(resources.WORKLOADS, namespace):
        status = workload.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        checks = [check.get("state") for check in status.get("admissionChecks") or []]
        if conditions.get("Admitted") == "True" and checks == ["Ready"]:
            return workload
    return None


async def stand_in_record(box: Sandbox, node: str, namespace: str, pod: str) -> dict[str, Any]:
    """What the kubelet stand-in was given by Allocate for the pod (envs, mounts, devices per resource)."""
    assert box.state is not None
    base = urlsplit(box.state.agent_probes[kubelet_name(node)])
    url = f"{base.scheme}://{base.netloc}/pods/{namespace}/{pod}"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        return dict(await resp.json())


async def test_an_ascend_slice_is_admitted_allocated_and_given_the_quota_it_asked_for(
    box: Sandbox, client: Client, queued_namespace: str
) -> None:
    namespace, pool = queued_namespace, POOLS["ascend"]
    stored = await client.create(resources.PODS, npu_slice(namespace))
    limits = stored["spec"]["containers"][0]["resources"]["limits"]
    assert Quantity.parse(limits[f"{NPU_SLICED}.units"]) == Quantity(SLICE_MIB * 1_600_000 // pool.card_mib)

    pod = await eventually(
        lambda: allocated_pod(client, namespace), timeout=LONG, what="the slice Running, allocated"
    )
    workload = await eventually(
        lambda: admitted(client, namespace), timeout=LONG, what="its Workload admitted"
    )
    assert workload["spec"]["queueName"] == format_local_queue_name(pool.name)
    assert pod["spec"]["nodeName"] == pool.node

    given = (await stand_in_record(box, pool.node, namespace, "npu-slice"))["containers"]["main"][NPU_SLICED]
    mounts = {mount["containerPath"]: mount["hostPath"] for mount in given["mounts"]}
    config = await asyncio.to_thread(Path(mounts[CONFIG_IN_CONTAINER]).read_text)
    quota = dict(line.split("=", 1) for line in config.splitlines())
    assert (quota["aicore-quota"], quota["memory-quota"]) == (str(SLICE_CORES), str(SLICE_MIB)), config
    devices = await client.get(resources.DEVICES, pool.node)
    (card,) = [
        acc
        for group in devices["spec"]["groups"]
        for acc in group["accelerators"]
        if acc["id"] in pod["metadata"]["annotations"][ACCELERATOR_ALLOCATED_ANNOTATION]
    ]
    physical = str(card["physicalIndexes"][0])
    assert quota["physical-npu-id"] == given["envs"]["ASCEND_VISIBLE_DEVICES"] == physical, (config, given)
    assert mounts["/opt/enpu/vcann-rt/lib/libvruntime.so"].endswith(
        "/lib/ascend/cann-8-910b/lib/libvruntime.so"
    )
