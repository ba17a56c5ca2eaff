"""The inventory's fake GPU nodes look like real ones to everything that reads Nodes."""

from __future__ import annotations

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import is_true
from gpustack_operator.sandbox import inventory


async def test_gpu_node_from_inventory_is_ready_with_gpu_capacity_and_nfd_labels(kube: Client) -> None:
    node = await kube.get(resources.NODES, "h100-0")
    assert is_true(node, "Ready")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    labels = node["metadata"]["labels"]
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert labels["feature.node.kubernetes.io/cpu-model.vendor_id"] == "AMD"
    assert labels["kubernetes.io/arch"] == "amd64"
    assert "node.kubernetes.io/not-ready" not in [t["key"] for t in node["spec"].get("taints", [])]


async def test_every_inventory_node_exists_and_ascend_node_is_arm64(kube: Client) -> None:
    expected = {n.name for n in inventory.load()}
    names = {n["metadata"]["name"] for n in await kube.list(resources.NODES, label_selector="type=kwok")}
    assert names == expected
    ascend = await kube.get(resources.NODES, "ascend-0")
    assert ascend["metadata"]["labels"]["kubernetes.io/arch"] == "arm64"
    assert ascend["status"]["capacity"]["huawei.com/npu"] == "8"
    assert ascend["metadata"]["labels"]["feature.node.kubernetes.io/pci-19e5.present"] == "true"
    cpu_only = await kube.get(resources.NODES, "cpu-0")
    assert not any(k.endswith(".present") for k in cpu_only["metadata"]["labels"])
