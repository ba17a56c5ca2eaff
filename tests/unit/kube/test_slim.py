"""Interner: cached objects lose managedFields and share their repeated strings, nothing else changes."""

from __future__ import annotations

import json
from typing import Any

from gpustack_operator.kube.slim import SHORT, Interner


def node_from_wire(name: str) -> dict[str, Any]:
    """A Node decoded from its own JSON document, as a watch event delivers it."""
    doc = {
        "metadata": {
            "name": name,
            "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
            "annotations": {"long": "x" * (SHORT + 1)},
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
        "spec": {"unschedulable": False, "podCIDRs": None, "port": 10250},
    }
    return json.loads(json.dumps(doc))


def test_slim_object_equals_the_original_minus_managed_fields() -> None:
    raw = node_from_wire("n1")
    slim = Interner().slim(raw)
    expected = node_from_wire("n1")
    del expected["metadata"]["managedFields"]
    assert slim == expected
    assert "managedFields" in raw["metadata"]  # the input is left alone


def test_managed_fields_are_kept_when_asked() -> None:
    """The aggregated API's InstanceType informer keeps them: a plain GET and a watch serve them on."""
    assert Interner().slim(node_from_wire("n1"), keep_managed_fields=True) == node_from_wire("n1")


def test_objects_from_separate_documents_share_keys_and_short_values_but_not_long_ones() -> None:
    interner = Interner()
    a, b = interner.slim(node_from_wire("n1")), interner.slim(node_from_wire("n2"))
    key_a = next(iter(a["metadata"]["labels"]))
    key_b = next(iter(b["metadata"]["labels"]))
    assert key_a is key_b
    assert a["status"]["conditions"][0]["status"] is b["status"]["conditions"][0]["status"]
    assert a["status"]["capacity"]["nvidia.com/gpu"] is b["status"]["capacity"]["nvidia.com/gpu"]
    assert a["metadata"]["annotations"]["long"] is not b["metadata"]["annotations"]["long"]


def test_reset_empties_the_table_but_keeps_objects_intact() -> None:
    interner = Interner()
    a = interner.slim(node_from_wire("n1"))
    assert len(interner) > 0
    interner.reset()
    assert len(interner) == 0
    assert a["metadata"]["name"] == "n1"
