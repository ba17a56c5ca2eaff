"""What the device manager writes for a node, and when it decides there is nothing to write."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.reporting import (
    desired_devices,
    desired_node_feature,
    devices_current,
    node_feature_current,
)
from gpustack_operator.device_manager.simulated import SimulatedBackend

INVENTORY = Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventory.yaml"
NODE: dict[str, Any] = {
    "metadata": {
        "name": "a10-0",
        "uid": "4f0c1a2b-0000-4000-8000-00000000a100",
        "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
    }
}
GROUPS = group_cards(SimulatedBackend(INVENTORY, "a10-0").detect())
A10_KEY = "acceleratable.feature.gpustack.ai/nvidia-a10"


def test_node_feature_is_named_labelled_and_owned_as_the_contract_says() -> None:
    feature = desired_node_feature(NODE, "gpustack-system", GROUPS)
    meta = feature["metadata"]
    assert (meta["name"], meta["namespace"]) == ("a10-0-gpustack-device-manager", "gpustack-system")
    assert meta["labels"] == {"nfd.node.kubernetes.io/node-name": "a10-0"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "a10-0",
            "uid": NODE["metadata"]["uid"],
            "controller": True,
        }
    ]
    labels = feature["spec"]["labels"]
    assert labels["feature.gpustack.ai/acceleratable"] == "true"
    assert labels[A10_KEY] == "true"
    assert labels[A10_KEY + ".count"] == "4"
    assert labels[A10_KEY + ".memory"] == "22Gi"


def test_devices_carry_the_groups_and_the_pool_selector_labels() -> None:
    devices = desired_devices(NODE, GROUPS)
    assert devices["metadata"]["name"] == "a10-0"
    assert devices["metadata"]["labels"] == {
        A10_KEY: "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    assert devices["spec"]["groups"] == GROUPS


def test_observed_objects_equal_to_desired_need_no_write_even_with_others_labels_and_order() -> None:
    feature = desired_node_feature(NODE, "gpustack-system", GROUPS)
    devices = desired_devices(NODE, GROUPS)
    observed = copy.deepcopy(devices)
    observed["metadata"]["labels"]["gpustack.ai/managed"] = "true"
    observed["metadata"]["resourceVersion"] = "42"
    observed["spec"]["groups"][0]["accelerators"].reverse()
    assert node_feature_current(copy.deepcopy(feature), feature)
    assert devices_current(observed, devices)


def test_changes_that_need_a_write() -> None:
    feature = desired_node_feature(NODE, "gpustack-system", GROUPS)
    devices = desired_devices(NODE, GROUPS)
    stale_label = copy.deepcopy(feature)
    stale_label["spec"]["labels"]["acceleratable.feature.gpustack.ai/nvidia-h100.count"] = "8"
    unowned = copy.deepcopy(devices)
    unowned["metadata"]["ownerReferences"] = []
    stale_key = copy.deepcopy(devices)
    stale_key["metadata"]["labels"]["acceleratable.feature.gpustack.ai/nvidia-t4"] = "true"
    unhealthy = copy.deepcopy(devices)
    unhealthy["spec"]["groups"][0]["accelerators"][1]["status"]["unhealthy"] = True
    assert not node_feature_current(None, feature)
    assert not node_feature_current(stale_label, feature)
    assert not devices_current(unowned, devices)
    assert not devices_current(stale_key, devices)
    assert not devices_current(unhealthy, devices)


def test_a_node_without_cards_reports_no_device_labels() -> None:
    feature = desired_node_feature(NODE, "gpustack-system", [])
    assert feature["spec"]["labels"] == {}
    assert desired_devices(NODE, [])["metadata"]["labels"] == {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
