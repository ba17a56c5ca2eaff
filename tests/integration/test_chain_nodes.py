"""Stage 3 on the sandbox: the worker's node controllers against real nodes, Devices and NodeFeatures.

The sandbox's GPU nodes advertise `<base>.sliced` through the kubelet stand-in and have Devices objects
from their device managers; the worker must add the four `.sliced.*` capacities (contract §5.2), copy the
node-management mark onto Devices, and publish its `<node>-gpustack-worker` NodeFeature.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gpustack_operator.api.keys import MANAGED_LABEL, SETTINGS_SECRET
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers import devices_labels, node_capacity, node_feature
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from tests.helpers import eventually
from tests.integration.chain_support import SYSTEM_NAMESPACE, running_controllers

UNITS, CORES = ".sliced.units", ".sliced.cores-percentage"
MEM_PCT, MIB = ".sliced.memory-percentage", ".sliced.memory-mib"
GENERAL = "general.feature.gpustack.ai/"


@pytest_asyncio.fixture(loop_scope="session")
async def controllers(kube: Client) -> AsyncIterator[Manager]:
    factories = (node_capacity.controller, devices_labels.controller, node_feature.controller)
    async with running_controllers(kube, factories) as manager:
        yield manager


def sliced(base: str, cards: int, slices_per_card: int, card_mib: int) -> dict[str, str]:
    return {
        base + UNITS: str(cards * 1_600_000),
        base + CORES: str(cards * slices_per_card * 100),
        base + MEM_PCT: str(cards * 100),
        base + MIB: str(cards * card_mib),
    }


async def test_gpu_nodes_get_the_four_sliced_capacities_and_stale_ones_go(
    kube: Client, controllers: Manager
) -> None:
    expected = {
        "h100-0": sliced("nvidia.com/gpu", 8, 128, 81559),
        "a10-0": sliced("nvidia.com/gpu", 4, 128, 23028),
        "ascend-0": sliced("huawei.com/npu", 8, 63, 65536),
    }

    async def published() -> bool:
        for node, want in expected.items():
            status = (await kube.get(resources.NODES, node))["status"]
            for name, value in want.items():
                for field in ("capacity", "allocatable"):
                    got = status[field].get(name, "0")
                    assert Quantity.parse(got).value() == int(value), (node, field, name, got)
        cpu_only = (await kube.get(resources.NODES, "cpu-0"))["status"]["capacity"]
        assert not [name for name in cpu_only if ".sliced." in name]
        return True

    await eventually(published, timeout=60, what="sliced capacities on the GPU nodes")

    stale = {"amd.com/gpu.sliced.units": "1600000"}
    await kube.patch_status(resources.NODES, "cpu-0", {"status": {"capacity": stale, "allocatable": stale}})

    async def removed() -> bool:
        status = (await kube.get(resources.NODES, "cpu-0"))["status"]
        return "amd.com/gpu.sliced.units" not in status["capacity"]

    await eventually(removed, timeout=30, what="a sliced capacity no card backs removed from cpu-0")


async def test_the_management_mark_follows_the_node_onto_its_devices(
    kube: Client, controllers: Manager
) -> None:
    node = "a10-0"

    async def devices_mark(value: str | None) -> bool:
        labels = (await kube.get(resources.DEVICES, node))["metadata"].get("labels") or {}
        return labels.get(MANAGED_LABEL) == value

    await kube.patch(resources.NODES, node, {"metadata": {"labels": {MANAGED_LABEL: "false"}}})
    try:
        await eventually(lambda: devices_mark("false"), timeout=30, what="Devices marked unmanaged")
        await kube.patch(resources.NODES, node, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})
        await eventually(lambda: devices_mark("true"), timeout=30, what="Devices marked managed")
    finally:
        await kube.patch(resources.NODES, node, {"metadata": {"labels": {MANAGED_LABEL: None}}})

    async def cpu_keys_copied() -> dict[str, str] | None:
        """NFD puts the worker's CPU key on the Node; CPU-aware pools find the Devices by it."""
        node_labels = (await kube.get(resources.NODES, node))["metadata"]["labels"]
        general = {k: v for k, v in node_labels.items() if k.startswith(GENERAL) and v == "true"}
        labels = (await kube.get(resources.DEVICES, node))["metadata"].get("labels") or {}
        return general if general and all(labels.get(k) == "true" for k in general) else None

    copied = await eventually(cpu_keys_copied, timeout=60, what="the node's CPU keys on its Devices")
    assert "general.feature.gpustack.ai/intel-6-106" in copied, copied


async def worker_labels(kube: Client, node: str) -> dict[str, str]:
    feature = await kube.get(resources.NODE_FEATURES, f"{node}-gpustack-worker", SYSTEM_NAMESPACE)
    return dict(feature["spec"]["labels"])


async def set_setting(kube: Client, name: str, value: str) -> None:
    data = {name: base64.b64encode(value.encode()).decode()}
    try:
        await kube.patch(resources.SECRETS, SETTINGS_SECRET, {"data": data}, namespace=SYSTEM_NAMESPACE)
    except errors.NotFound:
        secret: dict[str, Any] = {"metadata": {"name": SETTINGS_SECRET}, "data": data}
        await kube.create(resources.SECRETS, secret, SYSTEM_NAMESPACE)


async def test_the_worker_node_feature_carries_the_management_mark_and_cpu_key(
    kube: Client, controllers: Manager
) -> None:
    node = "cpu-1"
    cpus = (await kube.get(resources.NODES, node))["status"]["capacity"]["cpu"]

    async def reported() -> dict[str, str] | None:
        try:
            return await worker_labels(kube, node)
        except errors.NotFound:
            return None

    labels = await eventually(reported, timeout=30, what="worker NodeFeature of cpu-1")
    assert labels[MANAGED_LABEL] == "true"
    counts = {k: v for k, v in labels.items() if k.startswith(GENERAL) and k.endswith(".count")}
    assert list(counts.values()) == [cpus], counts

    # Manual management: a node that joins gets no automatic mark (one already marked keeps its label,
    # which NFD put on the Node: the contract's "an existing node value always wins").
    await set_setting(kube, "node-management-manual", "true")
    joining = {
        "metadata": {"name": "joins-manually", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"capacity": {"cpu": "8", "pods": "110"}},
    }
    try:
        await kube.create(resources.NODES, joining)

        async def unmarked() -> dict[str, str] | None:
            try:
                labels = await worker_labels(kube, "joins-manually")
            except errors.NotFound:
                return None
            assert MANAGED_LABEL not in labels, labels
            return labels

        await eventually(unmarked, timeout=30, what="a node joining under manual management left unmarked")
    finally:
        await set_setting(kube, "node-management-manual", "false")

    async def managed_again() -> bool:
        return (await worker_labels(kube, "joins-manually")).get(MANAGED_LABEL) == "true"

    try:
        await eventually(managed_again, timeout=30, what="automatic mark once manual management is off")
    finally:
        await kube.delete(resources.NODES, "joins-manually")
