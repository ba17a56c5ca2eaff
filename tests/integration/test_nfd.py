"""The real nfd-master turns NodeFeatures and the gpustack-cpu-info rule into Node labels and annotations.

Three writers feed it on the sandbox: the nfd-worker stand-in (CPU and PCI features of every inventory
node), each GPU node's device manager (`<node>-gpustack-device-manager`), and the worker's NodeFeatureRule,
applied here through the same builder the worker's Prepare uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from gpustack_operator.api.keys import (
    ACCELERATABLE_LABEL,
    DEFAULT_SYSTEM_NAMESPACE,
    DEVICE_MANAGER_NODE_FEATURE_SUFFIX,
)
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming.cpuinforule import CPU_ANNOTATIONS, RULE_NAME, cpu_info_rule
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.nodekeys import extract_general_node_key
from gpustack_operator.sandbox import inventory
from tests.helpers import eventually

NFD = "feature.node.kubernetes.io/"
PUBLISHED = "nfd.node.kubernetes.io/feature-labels"
NODES = {n.name: n for n in inventory.load()}


async def labels_of(kube: Client, name: str) -> dict[str, str]:
    labels: dict[str, str] = (await kube.get(resources.NODES, name))["metadata"].get("labels") or {}
    return labels


async def test_device_manager_node_features_become_node_labels(kube: Client) -> None:
    for name in ("h100-0", "h100-1"):

        async def folded(name: str = name) -> dict[str, str] | None:
            try:
                feature = await kube.get(
                    resources.NODE_FEATURES,
                    name + DEVICE_MANAGER_NODE_FEATURE_SUFFIX,
                    DEFAULT_SYSTEM_NAMESPACE,
                )
            except errors.NotFound:
                return None
            reported: dict[str, str] = feature["spec"]["labels"]
            labels = await labels_of(kube, name)
            return reported if reported and reported.items() <= labels.items() else None

        reported = await eventually(folded, timeout=90, what=f"device-manager labels on {name}")
        key = "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3"
        assert reported[key] == "true"
        assert reported["acceleratable.feature.gpustack.ai/nvidia"] == "true"
        assert reported[ACCELERATABLE_LABEL] == "true"


async def test_worker_stand_in_gives_pci_and_cpu_model_labels_published_by_nfd(kube: Client) -> None:
    for name, node in NODES.items():
        node_obj = await kube.get(resources.NODES, name)
        labels = node_obj["metadata"]["labels"]
        assert labels[f"{NFD}cpu-model.vendor_id"] == node.cpu.vendor
        assert labels[f"{NFD}cpu-model.family"] == node.cpu.family
        assert labels[f"{NFD}cpu-model.id"] == node.cpu.id
        vendors = {manufacturers()[g.manufacturer].pci_vendor_id for g in node.gpus}
        assert {k for k in labels if k.endswith(".present")} == {f"{NFD}pci-{v}.present" for v in vendors}
        # nfd-master, not the sandbox, put them there: it records what it published on the Node.
        published = node_obj["metadata"]["annotations"][PUBLISHED].split(",")
        assert "cpu-model.vendor_id" in published
        assert all(f"pci-{v}.present" in published for v in vendors)
    assert (await labels_of(kube, "a10-0"))[f"{NFD}pci-10de.present"] == "true"


@pytest_asyncio.fixture(loop_scope="session")
async def cpu_info_rule_applied(kube: Client) -> AsyncIterator[dict[str, Any]]:
    """The worker's rule, removed afterwards so that later tests see nodes as the sandbox left them."""
    rule = cpu_info_rule(m.pci_vendor_id for m in manufacturers().values())
    await kube.apply(resources.NODE_FEATURE_RULES, rule)
    try:
        yield rule
    finally:
        await kube.delete(resources.NODE_FEATURE_RULES, RULE_NAME)

        async def cleared() -> bool:
            for name in NODES:
                annotations = (await kube.get(resources.NODES, name))["metadata"].get("annotations") or {}
                if any(key in annotations for key in CPU_ANNOTATIONS):
                    return False
            return True

        await eventually(cleared, timeout=60, what="NFD removed the rule's annotations")


async def test_cpu_info_rule_labels_nodes_without_accelerator_and_annotates_cpu_details(
    kube: Client, cpu_info_rule_applied: dict[str, Any]
) -> None:
    for name in ("cpu-0", "cpu-1"):

        async def not_acceleratable(name: str = name) -> bool:
            return (await labels_of(kube, name)).get(ACCELERATABLE_LABEL) == "false"

        await eventually(not_acceleratable, timeout=60, what=f"{ACCELERATABLE_LABEL}=false on {name}")
    for name, node in NODES.items():

        async def annotated(name: str = name) -> dict[str, Any] | None:
            node_obj = await kube.get(resources.NODES, name)
            annotations = node_obj["metadata"].get("annotations") or {}
            return node_obj if all(key in annotations for key in CPU_ANNOTATIONS) else None

        node_obj = await eventually(annotated, timeout=60, what=f"CPU annotations on {name}")
        annotations = node_obj["metadata"]["annotations"]
        if node.gpus:
            assert node_obj["metadata"]["labels"].get(ACCELERATABLE_LABEL) != "false"
        # nfd-master v0.19.0 resolves `@feature.attribute` references in label values only: annotations
        # keep the reference verbatim, which the contract says readers treat as unreported. So the
        # general node key falls back to the cpu-model family and id.
        assert annotations["feature.gpustack.ai/cpu-name"] == "@cpu.model.name"
        assert extract_general_node_key(node_obj) == (
            f"{node.cpu.vendor.lower()}-{node.cpu.family}-{node.cpu.id}"
            if node.cpu.vendor != "VendorUnknown"
            else f"generic-{node.cpu.family}-{node.cpu.id}"
        )
