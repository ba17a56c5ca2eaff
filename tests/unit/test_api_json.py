"""The tolerant readers: a field of the wrong shape reads as empty, a field of the right shape as itself."""

from __future__ import annotations

import pytest

from gpustack_operator.api.json import as_list, as_mapping, as_mappings, as_str


@pytest.mark.parametrize("wrong", [None, 3, "text", ["a"], True])
def test_a_field_that_is_not_an_object_reads_as_empty(wrong: object) -> None:
    assert as_mapping(wrong) == {}


def test_an_object_reads_as_itself() -> None:
    value = {"a": 1}
    assert as_mapping(value) is value


def test_a_list_keeps_only_its_objects() -> None:
    assert as_mappings([{"a": 1}, "x", None, {"b": 2}]) == [{"a": 1}, {"b": 2}]
    assert as_mappings({"a": 1}) == []


@pytest.mark.parametrize(("value", "expected"), [([1, 2], [1, 2]), ((1, 2), []), (None, []), ("ab", [])])
def test_as_list(value: object, expected: list[object]) -> None:
    assert as_list(value) == expected


@pytest.mark.parametrize(("value", "expected"), [("x", "x"), (None, ""), (3, ""), (b"x", "")])
def test_as_str(value: object, expected: str) -> None:
    assert as_str(value) == expected
