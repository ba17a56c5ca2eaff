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
    """A small RFC 6902 applier (add/remove/replace) to check our patches do what they say."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[part]
        if op["op"] == "remove":
            del parent[parts[-1]]
        else:
            parent[parts[-1]] = op["value"]
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
    assert apply_patch(old, json_patch(old, new)) == new
