"""Inventory files become kwok Nodes with what a kubelet would publish (NFD publishes the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.rules.naming import manufacturers
from gpustack_operator.sandbox import inventory, nodeagents


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


def test_default_inventory_has_the_promised_fleet() -> None:
    nodes = {n.name: n for n in inventory.load()}
    gpus = {name: [(g.manufacturer, g.product, g.count) for g in n.gpus] for name, n in nodes.items()}
    assert gpus["h100-0"] == gpus["h100-1"] == [("nvidia", "NVIDIA H100 80GB HBM3", 8)]
    assert gpus["a10-0"] == [("nvidia", "NVIDIA A10", 4)]
    assert gpus["ascend-0"] == [("ascend", "Ascend910B2", 8)]
    assert nodes["ascend-0"].arch == "arm64"
    assert [n for n, g in gpus.items() if not g] == ["cpu-0", "cpu-1"]


def test_node_manifest_sets_capacity_and_kwok_annotation_but_leaves_nfd_labels_to_nfd() -> None:
    node = next(n for n in inventory.load() if n.name == "a10-0")
    manifest = inventory.node_manifest(node)
    meta = manifest["metadata"]
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert meta["labels"]["kubernetes.io/arch"] == "amd64"
    assert not [k for k in meta["labels"] if k.startswith("feature.node.kubernetes.io/")]
    assert not [k for k in meta["annotations"] if k.startswith("feature.gpustack.ai/")]
    assert manifest["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert manifest["status"]["capacity"]["cpu"] == "64"  # 32 cores x 2 threads
    assert manifest["status"]["allocatable"] == manifest["status"]["capacity"]


def test_gpu_pci_class_defaults_to_3d_controller_and_ascend_is_a_processing_accelerator() -> None:
    classes = {n.name: [g.pci_class for g in n.gpus] for n in inventory.load()}
    assert classes["h100-0"] == ["0302"]
    assert classes["ascend-0"] == ["1200"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("nodes: {}", "expected a mapping with a 'nodes' list", id="nodes-not-a-list"),
        pytest.param("nodes:\n- cpu: {cores: 1}", "nodes[0].name: required", id="missing-name"),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 0}}", "cpu.cores: must be a positive integer", id="zero-cores"
        ),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1},\n"
            "   gpus: [{manufacturer: acme, product: x, count: 1, memoryMiB: 1}]}",
            "unknown manufacturer 'acme'",
            id="unknown-manufacturer",
        ),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1}}\n- {name: a, cpu: {cores: 1}}",
            "duplicate node names ['a']",
            id="duplicate-names",
        ),
        pytest.param("nodes: [", "cannot read inventory", id="not-yaml"),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1},\n"
            "   gpus: [{manufacturer: nvidia, product: x, count: 2, memoryMiB: 1, unhealthy: [2]}]}",
            "gpus[0].unhealthy: want a list of card positions 0..1",
            id="unhealthy-past-the-group",
        ),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1},\n"
            "   gpus: [{manufacturer: nvidia, product: x, count: 1, memoryMiB: 1, cores: -4}]}",
            "gpus[0].cores: must be a positive integer",
            id="negative-cores",
        ),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1},\n"
            "   gpus: [{manufacturer: nvidia, product: x, count: 1, memoryMiB: 1, runtimeVersion: [12]}]}",
            "gpus[0].runtimeVersion: want a string",
            id="list-for-a-version",
        ),
        pytest.param(
            "nodes:\n- {name: a, cpu: {cores: 1},\n"
            "   gpus: [{manufacturer: nvidia, product: x, count: 1, memoryMiB: 1, pciClass: 3d}]}",
            "pciClass: want 4 hex digits",
            id="bad-pci-class",
        ),
    ],
)
def test_malformed_inventory_is_refused_with_the_place_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(inventory.InventoryError, match=None) as err:
        inventory.load(write(tmp_path, text))
    assert message in str(err.value)


def test_a_run_dir_too_deep_for_plugin_sockets_is_refused_before_anything_starts(tmp_path: Path) -> None:
    nodes = inventory.load()
    assert nodeagents.socket_path_problem(Path("/tmp/sandbox"), nodes) is None
    problem = nodeagents.socket_path_problem(tmp_path / ("x" * 80), nodes)
    assert problem is not None
    assert "choose a shorter --run-dir" in problem


def test_the_all_vendors_inventory_is_bundled_and_has_one_gpu_node_per_manufacturer(tmp_path: Path) -> None:
    assert inventory.resolve("all-vendors") == inventory.ALL_VENDORS_INVENTORY
    nodes = inventory.load(inventory.resolve("all-vendors"))
    makers = [gpu.manufacturer for node in nodes for gpu in node.gpus]
    assert sorted(makers) == sorted(manufacturers.manufacturers())
    ascend = next(gpu for node in nodes for gpu in node.gpus if gpu.manufacturer == "ascend")
    assert (ascend.product, ascend.memory_mib, ascend.family, ascend.runtime_version) == (
        "Ascend910B2",
        65536,
        "910B",
        "8.0.RC3",
    )
    own = write(tmp_path, "nodes: []")
    assert inventory.resolve(str(own)) == own
    with pytest.raises(inventory.InventoryError, match="bundled inventories: all-vendors"):
        inventory.resolve("no-such-inventory")
