"""The NodeFeature object a component publishes its node labels in, built one way for all of them.

The device manager (`<node>-gpustack-device-manager`) and the worker (`<node>-gpustack-worker`) both hand
labels to NFD the same way: a NodeFeature in the system namespace, tied to its node by NFD's node-name
label and owned by the Node so it goes when the node goes. Only the name suffix and the labels differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpustack_operator.api.keys import NFD_NODE_NAME_LABEL

NODE_FEATURE_API_VERSION: Final = "nfd.k8s-sigs.io/v1alpha1"


def node_owner_reference(node: Mapping[str, Any]) -> dict[str, Any]:
    """A controller owner reference to the Node (no blockOwnerDeletion: nodes are cluster-scoped owners)."""
    meta = node["metadata"]
    return {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"], "controller": True}


def node_feature(
    node: Mapping[str, Any], suffix: str, namespace: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """NodeFeature `<node><suffix>` in `namespace` carrying `labels` for NFD to put on the node."""
    name = node["metadata"]["name"]
    return {
        "apiVersion": NODE_FEATURE_API_VERSION,
        "kind": "NodeFeature",
        "metadata": {
            "name": name + suffix,
            "namespace": namespace,
            "labels": {NFD_NODE_NAME_LABEL: name},
            "ownerReferences": [node_owner_reference(node)],
        },
        "spec": {"labels": dict(labels)},
    }
