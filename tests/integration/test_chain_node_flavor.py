"""Stage 4 on the sandbox: NodeFlavorReconciler turns managed kwok nodes into Kueue ResourceFlavors.

Each test creates its own kwok nodes with a CPU identity (and card model) no other test uses, labelled as
the worker and the device manager would label them through NFD, runs the real controller over real
informers, and reads back what `kubectl get resourceflavors` / `kubectl get instancetypes` show.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import node_flavor
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from tests.helpers import eventually
from tests.integration.chain_support import running_controllers

G, A = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/"


class Hardware:
    """A CPU identity (AMD family 25, a fresh model id) and a fresh NVIDIA card model, unique per test."""

    def __init__(self) -> None:
        self.model = str(uuid.uuid4().int % 10**9)
        self.g_key = f"amd-25-{self.model}"
        self.a_key = f"nvidia-t{self.model}"
        self.cpu_flavor = f"gpustack--{self.g_key}-linux-amd64-8c"
        self.gpu_flavor = f"gpustack--{self.g_key}--{self.a_key}-linux-amd64-2d"
        self.nodes: list[str] = []

    def node(self, suffix: str, *, cards: int = 0, cpus: int = 8, os: str = "linux") -> JSONObj:
        name = f"flavor-{self.model}-{suffix}"
        self.nodes.append(name)
        labels = {
            "type": "kwok",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": os,
            "kubernetes.io/arch": "amd64",
            "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
            "feature.node.kubernetes.io/cpu-model.family": "25",
            "feature.node.kubernetes.io/cpu-model.id": self.model,
            "gpustack.ai/managed": "true",
            f"{G}amd": "true",
            f"{G}{self.g_key}": "true",
            f"{G}{self.g_key}.count": str(cpus),
        }
        if cards:
            model = A + self.a_key
            labels |= {
                "feature.gpustack.ai/acceleratable": "true",
                f"{A}nvidia": "true",
                model: "true",
                f"{model}.count": str(cards),
                f"{model}.product": f"T{self.model}",
                f"{model}.memory": "15Gi",
                f"{model}.cores": "2560",
            }
        annotations = {"kwok.x-k8s.io/node": "fake"}
        return {"metadata": {"name": name, "labels": labels, "annotations": annotations}}


GENERIC_TYPE = "gpustack--generic-linux-amd64"


@pytest_asyncio.fixture(loop_scope="session")
async def hardware(kube: Client) -> AsyncIterator[Hardware]:
    """Fresh hardware; afterwards its nodes, flavors and InstanceTypes are gone (the generic type only
    when this test made it)."""
    hw = Hardware()
    had_generic = await kube.get_or_none(resources.INSTANCE_TYPES, GENERIC_TYPE) is not None
    try:
        yield hw
    finally:
        for name in hw.nodes:
            await kube.delete(resources.NODES, name)
        for rf in await kube.list(
            resources.RESOURCE_FLAVORS, label_selector="resource.gpustack.ai/type=nodes"
        ):
            if hw.g_key in rf["metadata"]["name"]:
                await kube.delete(resources.RESOURCE_FLAVORS, rf["metadata"]["name"])
        types = [f"gpustack--{hw.a_key}-linux-amd64"] + ([] if had_generic else [GENERIC_TYPE])
        for it in types:
            await kube.delete(resources.INSTANCE_TYPES, it)


async def flavor(kube: Client, name: str) -> JSONObj | None:
    try:
        return await kube.get(resources.RESOURCE_FLAVORS, name)
    except errors.NotFound:
        return None


async def capacity(kube: Client, name: str, key: str) -> str | None:
    """The `.capacity` label `kubectl get resourceflavor <name> --show-labels` shows (None: no flavor)."""
    rf = await flavor(kube, name)
    return None if rf is None else rf["metadata"]["labels"].get(f"{key}.capacity")


async def test_flavors_follow_the_managed_nodes_that_contribute_to_them(
    kube: Client, hardware: Hardware
) -> None:
    hw = hardware
    cpu_a, cpu_b, gpu = hw.node("a"), hw.node("b"), hw.node("gpu", cards=2)
    for node in (cpu_a, cpu_b, gpu):
        await kube.create(resources.NODES, node)
    async with running_controllers(kube, (node_flavor.controller,)):
        await eventually(lambda: capacity(kube, hw.cpu_flavor, G + hw.g_key), what="CPU flavor")
        assert await capacity(kube, hw.cpu_flavor, G + hw.g_key) == "24"
        rf = await flavor(kube, hw.cpu_flavor)
        assert rf is not None
        assert rf["metadata"]["labels"] == {
            f"{G}{hw.g_key}": "true",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "feature.gpustack.ai/acceleratable": "false",
            f"{G}{hw.g_key}.count": "8",
            f"{G}{hw.g_key}.capacity": "24",
            "resource.gpustack.ai/type": "nodes",
        }
        assert rf["spec"]["nodeLabels"] == {
            "gpustack.ai/managed": "true",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            f"{G}{hw.g_key}": "true",
            f"{G}{hw.g_key}.count": "8",
        }
        assert rf["spec"]["tolerations"] == [{"operator": "Exists"}]
        assert {m["manager"] for m in rf["metadata"]["managedFields"]} >= {"gpustack-node-flavor"}

        device = await eventually(lambda: flavor(kube, hw.gpu_flavor), what="device flavor")
        assert device["metadata"]["labels"][f"{A}{hw.a_key}.capacity"] == "2"
        assert device["metadata"]["labels"][f"{G}{hw.g_key}"] == "true"
        assert device["spec"]["nodeLabels"][f"{A}{hw.a_key}.count"] == "2"
        assert device["metadata"]["annotations"]["note.gpustack.ai/product"] == f"T{hw.model}"

        await kube.patch(
            resources.NODES,
            gpu["metadata"]["name"],
            {"metadata": {"labels": {"gpustack.ai/managed": "false"}}},
        )
        await eventually(
            lambda: _is(flavor(kube, hw.gpu_flavor), None), what="unmanaged node's device flavor deleted"
        )
        await eventually(lambda: _is(capacity(kube, hw.cpu_flavor, G + hw.g_key), "16"), what="capacity 16")

        await kube.delete(resources.NODES, cpu_b["metadata"]["name"])
        await eventually(lambda: _is(capacity(kube, hw.cpu_flavor, G + hw.g_key), "8"), what="capacity 8")
        await kube.delete(resources.NODES, cpu_a["metadata"]["name"])
        await eventually(lambda: _is(flavor(kube, hw.cpu_flavor), None), what="last node gone, flavor gone")


async def _is(probe: Any, want: Any) -> bool:
    return bool(await probe == want)


async def test_derived_instance_types_a_skipped_node_and_a_restart_that_writes_nothing(
    kube: Client, hardware: Hardware
) -> None:
    hw = hardware
    await kube.create(resources.NODES, hw.node("odd", cards=2, os="Linux_OS"))  # no flavor name can hold it
    await kube.create(resources.NODES, hw.node("gpu", cards=2))
    async with running_controllers(kube, (node_flavor.controller,)):
        derived = f"gpustack--{hw.a_key}-linux-amd64"
        it = await eventually(lambda: kube.get_or_none(resources.INSTANCE_TYPES, derived), what=derived)
        assert it["metadata"]["labels"]["schedule.gpustack.ai/derived-from-node"] == "true"
        assert {k: v for k, v in it["spec"].items() if k != "inactive"} == {
            "acceleratable": True,
            "acceleratorGroup": hw.a_key,
            "generalGroup": "generic",
            "os": "linux",
            "arch": "amd64",
            "displayName": f"T{hw.model}",
            "unitResources": {"cpu": "4", "ram": "16Gi"},
            "localStorage": "100Gi",
        }
        assert await kube.get_or_none(resources.INSTANCE_TYPES, GENERIC_TYPE) is not None

        async def finalized() -> dict[str, str] | None:
            """name -> resourceVersion once Kueue has put its finalizer on both flavors."""
            rfs = [await flavor(kube, name) for name in (hw.cpu_flavor, hw.gpu_flavor)]
            if not all(rf and rf["metadata"].get("finalizers") for rf in rfs):
                return None
            return {rf["metadata"]["name"]: rf["metadata"]["resourceVersion"] for rf in rfs if rf}

        at_rest = await eventually(finalized, what="both flavors created and seen by Kueue")

    sentinel = f"gpustack--{hw.g_key}-linux-amd64-16c"
    async with running_controllers(kube, (node_flavor.controller,)):
        await kube.create(resources.NODES, hw.node("sentinel", cpus=16))
        await eventually(lambda: flavor(kube, sentinel), what="a flavor made after the restart's replay")
        for name, version in at_rest.items():
            assert (await flavor(kube, name) or {})["metadata"]["resourceVersion"] == version, name
    ours = await kube.list(resources.RESOURCE_FLAVORS, label_selector="resource.gpustack.ai/type=nodes")
    assert sorted(rf["metadata"]["name"] for rf in ours if hw.model in rf["metadata"]["name"]) == sorted(
        [hw.cpu_flavor, hw.gpu_flavor, sentinel]
    )
