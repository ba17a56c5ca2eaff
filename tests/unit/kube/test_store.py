"""Store: keys, named indexes that follow every change, and no copies of the cached objects."""

from __future__ import annotations

import logging

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import patches
from gpustack_operator.kube.store import Store, object_key


def pod(name: str, node: str | None, namespace: str = "ns") -> JSONObj:
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def by_node(obj: JSONObj) -> list[str]:
    node = obj["spec"].get("nodeName")
    return [node] if node else []


def names(objs: list[JSONObj]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def filled(*pods: JSONObj) -> Store:
    store = Store()
    store.add_index("node", by_node)
    for p in pods:
        store.put(object_key(p), p)
    return store


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param({"metadata": {"name": "p", "namespace": "ns"}}, "ns/p", id="namespaced"),
        pytest.param({"metadata": {"name": "node-1"}}, "node-1", id="cluster-scoped"),
    ],
)
def test_object_key(obj: JSONObj, want: str) -> None:
    assert object_key(obj) == want


def test_index_answers_which_pods_run_on_a_node() -> None:
    store = filled(pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("pending", None))
    assert names(store.by_index("node", "n1")) == ["a", "b"]
    assert names(store.by_index("node", "n2")) == ["c"]
    assert store.by_index("node", "n3") == []
    assert sorted(store.index_values("node")) == ["n1", "n2"]
    assert len(store) == 4


def test_index_follows_an_object_that_moves_and_forgets_one_that_is_gone() -> None:
    store = filled(pod("a", "n1"), pod("b", "n1"))
    store.put("ns/a", pod("a", "n2"))
    store.pop("ns/b")
    assert store.by_index("node", "n1") == []
    assert names(store.by_index("node", "n2")) == ["a"]
    assert store.index_values("node") == ["n2"]
    assert store.keys() == ["ns/a"]


def test_index_added_late_files_objects_already_cached() -> None:
    store = Store()
    store.put("ns/a", pod("a", "n1"))
    store.add_index("node", by_node)
    assert names(store.by_index("node", "n1")) == ["a"]


def test_index_hands_out_the_cached_objects_themselves_not_copies() -> None:
    store = filled(pod("a", "n1"))
    assert store.by_index("node", "n1")[0] is store.get("ns/a")


def test_unknown_index_and_duplicate_index_are_errors() -> None:
    store = filled()
    with pytest.raises(KeyError, match="no index named 'zone'"):
        store.by_index("zone", "x")
    with pytest.raises(ValueError, match="already exists"):
        store.add_index("node", by_node)


def test_index_function_that_chokes_on_a_malformed_object_leaves_it_cached_but_unindexed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    store = filled(pod("good", "n1"))
    store.put("ns/bad", {"metadata": {"name": "bad", "namespace": "ns"}, "spec": "not-a-dict"})
    assert store.get("ns/bad") is not None
    assert names(store.by_index("node", "n1")) == ["good"]
    assert "ns/bad" in caplog.text


@pytest.mark.parametrize(
    ("segments", "want"),
    [
        pytest.param(
            ["metadata", "labels", "gpustack.ai/pool"], "/metadata/labels/gpustack.ai~1pool", id="slash"
        ),
        pytest.param(["metadata", "annotations", "a~b"], "/metadata/annotations/a~0b", id="tilde"),
        pytest.param(["spec", "taints", 0], "/spec/taints/0", id="list-index"),
        pytest.param("/already/built", "/already/built", id="prebuilt-pointer"),
    ],
)
def test_json_pointer_escapes_label_keys(segments: list[str | int] | str, want: str) -> None:
    assert patches.pointer(segments) == want
