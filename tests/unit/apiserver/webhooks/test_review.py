"""AdmissionReview v1 envelope: what we read from kube-apiserver and the answer (patch, Status) we send."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.apiserver.webhooks.review import ReviewError, Verdict, answer, json_patch, parse


def review_body(**request: Any) -> bytes:
    base = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {"metadata": {"name": "p"}},
        "userInfo": {"username": "alice"},
    }
    base.update(request)
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}
    ).encode()


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 as kube-apiserver applies it (add, remove, replace, move, copy, test; objects and arrays), to
    check our patches do what they say; a path that does not resolve raises."""

    def parts(pointer: str) -> list[str]:
        return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]

    def index(array: list[Any], part: str, *, end: bool = False) -> int:
        if end and part == "-":
            return len(array)
        if not (part.isascii() and part.isdigit()) or (part != "0" and part.startswith("0")):
            raise ValueError(f"{part!r} is not an array index")
        if int(part) > len(array) - (0 if end else 1):
            raise IndexError(part)
        return int(part)

    def walk(pointer: str) -> tuple[Any, str]:
        *inner, last = parts(pointer)
        parent = doc
        for part in inner:
            parent = parent[index(parent, part)] if isinstance(parent, list) else parent[part]
        return parent, last

    def get(pointer: str) -> Any:
        if not pointer:
            return doc
        parent, last = walk(pointer)
        return parent[index(parent, last)] if isinstance(parent, list) else parent[last]

    def remove(pointer: str) -> Any:
        parent, last = walk(pointer)
        return parent.pop(index(parent, last) if isinstance(parent, list) else last)

    def add(pointer: str, value: Any) -> None:
        nonlocal doc
        if not pointer:
            doc = value
            return
        parent, last = walk(pointer)
        if isinstance(parent, list):
            parent.insert(index(parent, last, end=True), value)
        else:
            parent[last] = value

    doc = copy.deepcopy(doc)
    for op in ops:
        path = op["path"]
        if op["op"] == "add":
            add(path, copy.deepcopy(op["value"]))
        elif op["op"] == "remove":
            remove(path)
        elif op["op"] == "replace":
            get(path)  # must exist
            if path:
                remove(path)
            add(path, copy.deepcopy(op["value"]))
        elif op["op"] == "move":
            assert not (path + "/").startswith(op["from"] + "/"), op  # never into itself
            add(path, remove(op["from"]))
        elif op["op"] == "copy":
            add(path, copy.deepcopy(get(op["from"])))
        else:
            assert op["op"] == "test", op
            assert json.dumps(get(path)) == json.dumps(op["value"]), op
    return doc


def test_a_review_is_read_with_its_user_and_dry_run() -> None:
    review = parse(review_body(dryRun=True, name="p"))
    assert (review.kind, review.operation, review.namespace, review.name) == ("Pod", "CREATE", "team-a", "p")
    assert review.dry_run is True
    assert review.username == "alice"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "JSON object"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}).encode(),
            "expected apiVersion",
        ),
        (review_body(operation="PATCH"), "request.operation"),
        (review_body(uid=""), "request.uid is required"),
        (review_body(kind="Pod"), "request.kind must be an object"),
        (review_body(object=[1]), "request.object must be an object"),
    ],
)
def test_a_malformed_review_names_what_is_wrong(body: bytes, says: str) -> None:
    with pytest.raises(ReviewError, match=says):
        parse(body)


def test_an_allowed_mutation_becomes_a_json_patch_kube_apiserver_can_apply() -> None:
    original = {"metadata": {"labels": {"a/b": "1", "gone": "x"}}, "spec": {"containers": [{"name": "c"}]}}
    mutated = {"metadata": {"labels": {"a/b": "2", "new~key": "y"}}, "spec": {"containers": [{"name": "d"}]}}
    review = parse(review_body(object=original))
    response = answer(review, Verdict.allow(mutated))["response"]
    assert (response["allowed"], response["patchType"]) == (True, "JSONPatch")
    ops = json.loads(base64.b64decode(response["patch"]))
    assert apply_patch(original, ops) == mutated
    assert {"op": "add", "path": "/metadata/labels/new~0key", "value": "y"} in ops


def test_an_unchanged_object_gets_no_patch() -> None:
    obj = {"spec": {"x": 1}}
    response = answer(parse(review_body(object=obj)), Verdict.allow(copy.deepcopy(obj)))["response"]
    assert response["allowed"] is True
    assert "patch" not in response


def test_a_denial_carries_the_status_and_warnings() -> None:
    status = StatusError(422, "Invalid", 'Pod "p" is invalid: spec: Forbidden: no')
    response = answer(parse(review_body()), Verdict.deny(status, warnings=["careful"]))["response"]
    assert response["allowed"] is False
    assert (response["status"]["code"], response["status"]["reason"]) == (422, "Invalid")
    assert response["warnings"] == ["careful"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@given(
    st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    st.dictionaries(st.text(max_size=4), json_values, max_size=4),
)
def test_any_patch_turns_the_old_object_into_the_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    patched = apply_patch(old, json_patch(old, new))
    assert patched == new
    assert json.dumps(patched, sort_keys=True) == json.dumps(new, sort_keys=True)  # 1 is not true in JSON
