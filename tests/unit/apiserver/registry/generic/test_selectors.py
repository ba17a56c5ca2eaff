"""Selectors the cached v1 list filters by: the forms it parses match as kube-apiserver matches them, and
every other form is left to the API server (None) rather than guessed at."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.apiserver.registry.generic.selectors import (
    parse_field_selector,
    parse_label_selector,
    parse_selectors,
)

OBJECTS = {
    "a": {"tier": "gold", "zone": "east"},
    "b": {"tier": "silver"},
    "c": {},
    "d": {"example.com/team": "ml", "tier": "gold"},
}


def obj(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": OBJECTS[name]}}


def names_by_labels(selector: str) -> list[str]:
    match = parse_label_selector(selector)
    assert match is not None, selector
    return [name for name in OBJECTS if match(obj(name))]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c", "d"]),
        ("tier=gold", ["a", "d"]),
        ("tier==gold", ["a", "d"]),
        ("tier = gold", ["a", "d"]),
        ("tier!=gold", ["b", "c"]),  # kube: a missing label is "not equal"
        ("zone", ["a"]),
        ("!zone", ["b", "c", "d"]),
        ("! zone", ["b", "c", "d"]),
        ("tier in (gold, silver)", ["a", "b", "d"]),
        ("tier notin (gold)", ["b", "c"]),
        ("tier=gold,zone", ["a"]),
        ("tier in (gold,silver),!zone", ["b", "d"]),
        ("example.com/team=ml", ["d"]),
        ("tier=", []),
        ("tier!=", ["a", "b", "c", "d"]),
    ],
)
def test_parsed_label_selectors_match_as_kube_does(selector: str, expected: list[str]) -> None:
    assert names_by_labels(selector) == expected


@pytest.mark.parametrize(
    "selector",
    [
        "replicas>1",  # numeric comparisons: left to kube
        "replicas<1",
        "tier in ()",  # kube refuses an empty set
        "tier in (gold",
        "tier in gold)",
        "tier=gold,",  # an empty term
        "-bad=x",  # not a label key
        "tier=-bad",  # not a label value
        "tier=a b",
        "Bad_Prefix/x=y",
        "x" * 64 + "=y",
        "tier=" + "v" * 64,
        "tier=gold=silver",
    ],
)
def test_label_selectors_not_parsed_go_to_the_api_server(selector: str) -> None:
    assert parse_label_selector(selector) is None


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c", "d"]),
        ("metadata.name=b", ["b"]),
        ("metadata.name==b", ["b"]),
        ("metadata.name!=b", ["a", "c", "d"]),
        ("metadata.name!=a,metadata.name!=b", ["c", "d"]),
        ("metadata.name=a,metadata.name=b", []),
        ("metadata.name=nothing", []),
    ],
)
def test_name_field_selectors_match(selector: str, expected: list[str]) -> None:
    match = parse_field_selector(selector)
    assert match is not None
    assert [name for name in OBJECTS if match(obj(name))] == expected


@pytest.mark.parametrize(
    "selector",
    ["metadata.namespace=x", "spec.os=linux", "metadata.name", "metadata.name=a\\,b", "metadata.name=a=b"],
)
def test_other_field_selectors_go_to_the_api_server(selector: str) -> None:
    assert parse_field_selector(selector) is None


def test_both_selectors_must_hold_and_either_unparsed_means_none() -> None:
    both = parse_selectors("tier=gold", "metadata.name!=a")
    assert both is not None
    assert [name for name in OBJECTS if both(obj(name))] == ["d"]
    assert parse_selectors("tier>1", "") is None
    assert parse_selectors("", "spec.os=linux") is None
