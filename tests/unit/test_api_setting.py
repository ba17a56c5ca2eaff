"""Setting (gpustack.ai/v1): a write-only pointer value and an always-complete status."""

from __future__ import annotations

import json
from pathlib import Path

from gpustack_operator.api.schema import SETTING

GOLDEN = json.loads((Path(__file__).parent / "golden" / "setting.json").read_text())


def test_golden_object_round_trips_exactly() -> None:
    assert SETTING.dump(SETTING.load(GOLDEN)) == GOLDEN


def test_an_empty_value_is_a_write_but_an_absent_one_is_not() -> None:
    assert SETTING.dump({"spec": {"value": ""}})["spec"] == {"value": ""}
    assert SETTING.dump({"spec": {}})["spec"] == {}
    assert (
        SETTING.load({"spec": {"value": None}})["spec"] == {}
    )  # null reads as absent, as the API server prunes it


def test_status_always_shows_all_four_fields() -> None:
    assert SETTING.dump({"spec": {}, "status": {"value": "(sensitive)", "sensitive": True}})["status"] == {
        "description": "",
        "editable": False,
        "sensitive": True,
        "value": "(sensitive)",
    }


def test_a_numeric_value_is_refused_with_its_path() -> None:
    assert [str(e) for e in SETTING.validate({"spec": {"value": 1}})] == ["spec.value: Not a valid string."]


def test_the_served_group_version() -> None:
    assert (SETTING.api_version, SETTING.kind, SETTING.plural, SETTING.namespaced) == (
        "gpustack.ai/v1",
        "Setting",
        "settings",
        True,
    )
