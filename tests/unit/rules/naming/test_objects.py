"""The NodeFeature builder shared by the device manager and the worker."""

from __future__ import annotations

from gpustack_operator.kube import resources
from gpustack_operator.rules.naming.objects import NODE_FEATURE_API_VERSION, node_feature


def test_a_node_feature_is_named_by_node_and_suffix_tied_and_owned_by_the_node() -> None:
    node = {"metadata": {"name": "h100-0", "uid": "u-1"}}
    obj = node_feature(node, "-gpustack-worker", "gpustack-system", {"gpustack.ai/managed": "true"})
    assert obj["apiVersion"] == NODE_FEATURE_API_VERSION == resources.NODE_FEATURES.api_version
    assert obj["metadata"]["name"] == "h100-0-gpustack-worker"
    assert obj["metadata"]["namespace"] == "gpustack-system"
    assert obj["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": "h100-0"}
    assert obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "h100-0", "uid": "u-1", "controller": True}
    ]
    assert obj["spec"] == {"labels": {"gpustack.ai/managed": "true"}}
