"""The nfd-worker stand-in writes what NFD's worker would report for each inventory node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpustack_operator.sandbox import inventory, nfdworker

NFD = "feature.node.kubernetes.io/"


def node(name: str) -> inventory.InventoryNode:
    return next(n for n in inventory.load() if n.name == name)


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        pytest.param(
            "h100-0",
            {
                f"{NFD}cpu-model.vendor_id": "AMD",
                f"{NFD}cpu-model.family": "25",
                f"{NFD}cpu-model.id": "17",
                f"{NFD}pci-10de.present": "true",
            },
            id="nvidia-3d-controller-on-amd",
        ),
        pytest.param(
            "ascend-0",
            {
                f"{NFD}cpu-model.vendor_id": "VendorUnknown",
                f"{NFD}cpu-model.family": "8",
                f"{NFD}cpu-model.id": "3393",
                f"{NFD}pci-19e5.present": "true",
            },
            id="ascend-processing-accelerator-on-arm",
        ),
        pytest.param(
            "cpu-0",
            {
                f"{NFD}cpu-model.vendor_id": "Intel",
                f"{NFD}cpu-model.family": "6",
                f"{NFD}cpu-model.id": "207",
            },
            id="cpu-only",
        ),
    ],
)
def test_labels_are_what_the_worker_sources_would_compute(name: str, labels: dict[str, str]) -> None:
    assert nfdworker.worker_labels(node(name)) == labels


def test_a_device_outside_the_accelerator_classes_is_a_feature_but_no_label(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "nodes:\n- {name: n, cpu: {vendor: AMD, family: 25, id: 1, cores: 4},\n"
        "   gpus: [{manufacturer: nvidia, product: x, count: 1, memoryMiB: 1, pciClass: '0c03'}]}"
    )
    (only,) = inventory.load(path)
    assert nfdworker.pci_devices(only) == [{"class": "0c03", "vendor": "10de"}]
    assert not any(key.endswith(".present") for key in nfdworker.worker_labels(only))


def test_node_feature_carries_raw_features_for_rules_and_is_owned_by_the_node() -> None:
    obj = nfdworker.node_feature(node("a10-0"), {"metadata": {"name": "a10-0", "uid": "uid-1"}})
    meta = obj["metadata"]
    assert (obj["apiVersion"], obj["kind"]) == ("nfd.k8s-sigs.io/v1alpha1", "NodeFeature")
    assert (meta["name"], meta["namespace"]) == ("a10-0", nfdworker.NAMESPACE)
    assert meta["labels"] == {"nfd.node.kubernetes.io/node-name": "a10-0"}
    assert [(o["kind"], o["name"], o["uid"]) for o in meta["ownerReferences"]] == [("Node", "a10-0", "uid-1")]
    features = obj["spec"]["features"]
    assert features["attributes"]["cpu.model"]["elements"] == {
        "vendor_id": "Intel",
        "family": "6",
        "id": "106",
        "name": "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz",
        "physical_cores": "32",
        "threads_per_core": "2",
        "logical_cores": "64",
    }
    assert features["instances"]["pci.device"]["elements"] == [
        {"attributes": {"class": "0302", "vendor": "10de"}}
    ]


def test_a_cpu_only_node_reports_no_pci_devices() -> None:
    obj = nfdworker.node_feature(node("cpu-1"), {"metadata": {"name": "cpu-1", "uid": "u"}})
    assert "instances" not in obj["spec"]["features"]


@pytest.mark.parametrize(
    ("annotations", "ready"),
    [
        pytest.param(
            [{"nfd.node.kubernetes.io/feature-labels": "cpu-model.id"}] * 2, True, id="all-published"
        ),
        pytest.param([{"nfd.node.kubernetes.io/feature-labels": "cpu-model.id"}, {}], False, id="one-left"),
        pytest.param([], False, id="no-nodes-yet"),
    ],
)
def test_nfd_master_is_ready_once_it_published_labels_on_every_node(
    annotations: list[dict[str, str]], ready: bool
) -> None:
    body = json.dumps({"items": [{"metadata": {"annotations": a}} for a in annotations]})
    assert nfdworker.every_node_published(body) is ready
