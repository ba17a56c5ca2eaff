"""Predicates decide which watch events are worth a reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.predicates import (
    Predicate,
    all_of,
    annotations_changed,
    any_of,
    generation_changed,
    labels_changed,
    negate,
    resource_version_changed,
)

from .fakes import obj

BASE = obj("a", generation=1, rv="1", metadata={"labels": {"pool": "h100"}, "annotations": {"note": "x"}})


def changed(**meta: Any) -> JSONObj:
    return {**BASE, "metadata": {**BASE["metadata"], **meta}}


@pytest.mark.parametrize(
    ("predicate", "new", "passes"),
    [
        pytest.param(
            generation_changed, changed(generation=2, resourceVersion="2"), True, id="spec edit passes"
        ),
        pytest.param(generation_changed, changed(resourceVersion="2"), False, id="status write is dropped"),
        pytest.param(labels_changed, changed(labels={"pool": "a100"}), True, id="label edit passes"),
        pytest.param(labels_changed, changed(resourceVersion="2"), False, id="same labels are dropped"),
        pytest.param(annotations_changed, changed(annotations={}), True, id="annotation removal passes"),
        pytest.param(resource_version_changed, changed(), False, id="a resync of one version is dropped"),
        pytest.param(
            resource_version_changed, changed(resourceVersion="2"), True, id="any new version passes"
        ),
    ],
)
def test_update_events(predicate: Predicate, new: JSONObj, passes: bool) -> None:
    assert predicate(BASE, new) is passes


@pytest.mark.parametrize(
    "predicate", [generation_changed, labels_changed, annotations_changed, resource_version_changed]
)
def test_adds_and_deletes_always_pass(predicate: Predicate) -> None:
    assert predicate(None, BASE)
    assert predicate(BASE, None)


def test_combinators() -> None:
    label_edit = changed(labels={"pool": "a100"})
    either = any_of(generation_changed, labels_changed)
    both = all_of(generation_changed, labels_changed)
    assert either(BASE, label_edit), "a label edit passes generation-or-labels"
    assert not both(BASE, label_edit), "but not generation-and-labels"
    assert negate(labels_changed)(BASE, changed(resourceVersion="2"))
