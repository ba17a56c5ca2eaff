"""InstanceType v1 <-> v1alpha1: what clients see rewritten, and what must stay as the CRD wrote it."""

from __future__ import annotations

import copy

from gpustack_operator.conversion.apiversion import WORKER

STORED = "worker.gpustack.ai/v1alpha1"
SERVED = "worker.gpustack.ai/v1"


def stored_object(name: str = "a100") -> dict[str, object]:
    return {
        "apiVersion": STORED,
        "kind": "InstanceType",
        "metadata": {
            "name": name,
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubectl", "apiVersion": STORED}],
        },
        "spec": {"os": "linux"},
    }


def test_list_and_each_item_are_served_as_v1_with_versions_and_managed_fields_untouched() -> None:
    doc = {
        "apiVersion": STORED,
        "kind": "InstanceTypeList",
        "metadata": {"resourceVersion": "43"},
        "items": [stored_object("a"), stored_object("b")],
    }
    before = copy.deepcopy(doc)
    out = WORKER.to_served(doc)
    assert out["apiVersion"] == SERVED
    assert [i["apiVersion"] for i in out["items"]] == [SERVED, SERVED]
    assert out["metadata"] == {"resourceVersion": "43"}
    assert out["items"][0]["metadata"]["managedFields"][0]["apiVersion"] == STORED
    assert doc == before  # the input is not mutated


def test_watch_events_bookmarks_included_are_rewritten_and_errors_pass() -> None:
    bookmark = {
        "type": "BOOKMARK",
        "object": {"apiVersion": STORED, "kind": "InstanceType", "metadata": {"resourceVersion": "50"}},
    }
    assert WORKER.event_to_served(bookmark)["object"]["apiVersion"] == SERVED
    error = {"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "code": 410}}
    assert WORKER.event_to_served(error) == error


def test_request_bodies_go_back_to_the_stored_version_and_others_are_left_alone() -> None:
    body = {"apiVersion": SERVED, "kind": "InstanceType", "metadata": {"name": "a"}}
    assert WORKER.to_stored(body)["apiVersion"] == STORED
    table = {"apiVersion": "meta.k8s.io/v1", "kind": "Table", "rows": [{"object": stored_object()}]}
    out = WORKER.to_served(table)
    assert out["apiVersion"] == "meta.k8s.io/v1"
    assert out["rows"][0]["object"]["apiVersion"] == SERVED
