"""Setting a condition: one entry per type, observedGeneration current, a new time only on a status change."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from gpustack_operator.api.conditions import (
    find_condition,
    generation_of,
    is_true,
    rfc3339,
    set_condition,
    status_conditions,
)
from gpustack_operator.api.types.common import Condition

EARLIER = "2025-01-01T00:00:00Z"
NOW = datetime(2025, 6, 1, 12, 30, 45, 999_999, tzinfo=UTC)
NOW_TEXT = "2025-06-01T12:30:45Z"


def cond(
    type_: str = "Active",
    status: str = "True",
    reason: str = "Ready",
    message: str = "Can admit new workloads",
    *,
    since: str = EARLIER,
    generation: int | None = 1,
) -> Condition:
    c: dict[str, Any] = {"type": type_, "status": status, "lastTransitionTime": since}
    c.update(reason=reason, message=message)
    if generation is not None:
        c["observedGeneration"] = generation
    return c  # type: ignore[return-value]


# Each case: the conditions before, what is set (status, reason, message, generation), the conditions after.
CASES = [
    pytest.param(
        [],
        ("True", "Ready", "Can admit new workloads", 1),
        [cond(since=NOW_TEXT)],
        id="a new type is added, stamped now",
    ),
    pytest.param(
        [cond()],
        ("True", "Ready", "Can admit new workloads", 1),
        [cond()],
        id="setting what is already there changes nothing (no status write needed)",
    ),
    pytest.param(
        [cond()],
        ("False", "FlavorNotFound", "flavor a100 is missing", 1),
        [cond(status="False", reason="FlavorNotFound", message="flavor a100 is missing", since=NOW_TEXT)],
        id="a status change is a transition: the time moves",
    ),
    pytest.param(
        [cond()],
        ("True", "Reconfigured", "now with 64 cards", 1),
        [cond(reason="Reconfigured", message="now with 64 cards")],
        id="a new reason or message with the same status keeps the transition time",
    ),
    pytest.param(
        [cond(generation=1)],
        ("True", "Ready", "Can admit new workloads", 2),
        [cond(generation=2)],
        id="a newer generation updates observedGeneration but is no transition",
    ),
    pytest.param(
        [cond(generation=3)],
        ("True", "Ready", "Can admit new workloads", None),
        [cond(generation=None)],
        id="no generation (object not created yet) leaves observedGeneration out",
    ),
    pytest.param(
        [cond(since="")],
        ("True", "Ready", "Can admit new workloads", 1),
        [cond(since=NOW_TEXT)],
        id="a half-written entry without a transition time gets one",
    ),
    pytest.param(
        [cond("Reconciled"), cond(), cond("Degraded", "False", "AsExpected")],
        ("False", "Stopped", "stopPolicy is Hold", 1),
        [
            cond("Reconciled"),
            cond(status="False", reason="Stopped", message="stopPolicy is Hold", since=NOW_TEXT),
            cond("Degraded", "False", "AsExpected"),
        ],
        id="other types are untouched and the order is kept",
    ),
    pytest.param(
        [cond(), cond(reason="Stale")],
        ("True", "Ready", "Can admit new workloads", 1),
        [cond()],
        id="duplicates of the type are folded into one entry",
    ),
]


@pytest.mark.parametrize(("before", "change", "after"), CASES)
def test_set_condition(
    before: list[Condition], change: tuple[str, str, str, int | None], after: list[Condition]
) -> None:
    status, reason, message, generation = change
    kept = copy.deepcopy(before)
    got = set_condition(before, "Active", status, reason, message, generation=generation, now=NOW)  # type: ignore[arg-type]
    assert got == after
    assert before == kept, "the input (a cached object's list) must not be mutated"


def test_times_are_rfc3339_seconds_in_utc_whatever_zone_now_is_in() -> None:
    berlin = NOW.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(berlin) == NOW_TEXT
    [c] = set_condition([], "Active", "True", "Ready", generation=1, now=berlin)
    assert c["lastTransitionTime"] == NOW_TEXT


def test_long_messages_are_cut_to_what_the_api_accepts() -> None:
    [c] = set_condition([], "Active", "False", "Broken", "x" * 40_000, generation=1, now=NOW)
    assert len(c["message"]) == 32768


@pytest.mark.parametrize(
    ("type_", "status", "reason", "now", "match"),
    [
        pytest.param("Active", "Yes", "Ready", NOW, "status 'Yes'", id="status must be True/False/Unknown"),
        pytest.param("Active", "True", "", NOW, "reason ''", id="empty reason"),
        pytest.param("Active", "True", "not ready", NOW, "reason 'not ready'", id="reason with a space"),
        pytest.param("Active", "True", "1Ready", NOW, "start with a letter", id="reason starts with a digit"),
        pytest.param("is active", "True", "Ready", NOW, "qualified name", id="type with a space"),
        pytest.param("Active", "True", "Ready", datetime(2025, 1, 1), "timezone-aware", id="naive time"),
    ],
)
def test_bad_input_is_refused_before_the_api_server_would(
    type_: str, status: str, reason: str, now: datetime, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        set_condition([], type_, status, reason, generation=1, now=now)  # type: ignore[arg-type]


def test_a_domain_prefixed_type_is_accepted() -> None:
    [c] = set_condition([], "gpustack.ai/Capacity", "Unknown", "Probing", generation=None, now=NOW)
    assert c["type"] == "gpustack.ai/Capacity"


@pytest.mark.parametrize(
    ("obj", "conditions", "generation"),
    [
        pytest.param({}, [], None, id="a fresh object"),
        pytest.param({"status": None, "metadata": {"generation": 4}}, [], 4, id="status null"),
        pytest.param(
            {"status": {"conditions": [cond(), "junk", {"status": "True"}]}},
            [cond()],
            None,
            id="entries without a type are skipped",
        ),
    ],
)
def test_reading_conditions_and_generation(
    obj: dict[str, Any], conditions: list[Condition], generation: int | None
) -> None:
    assert status_conditions(obj) == conditions
    assert generation_of(obj) == generation


def test_is_true_and_find() -> None:
    obj = {"status": {"conditions": [cond(), cond("Degraded", "False", "AsExpected")]}}
    assert is_true(obj, "Active")
    assert not is_true(obj, "Degraded")
    assert not is_true(obj, "Missing")
    assert find_condition(status_conditions(obj), "Degraded") == cond("Degraded", "False", "AsExpected")
