"""InstanceType (worker.gpustack.ai/v1alpha1): Go-exact wire form and path-named validation errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api.schema import INSTANCE_TYPE, FieldError, InvalidObjectError

GOLDEN = json.loads((Path(__file__).parent / "golden" / "instancetype.json").read_text())


def with_spec(**spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(GOLDEN)
    obj["spec"].update(spec)
    return obj


def test_golden_object_round_trips_exactly() -> None:
    loaded = INSTANCE_TYPE.load(GOLDEN)
    assert loaded == GOLDEN
    assert INSTANCE_TYPE.dump(loaded) == GOLDEN


def test_always_serialised_fields_are_written_even_when_zero() -> None:
    dumped = INSTANCE_TYPE.dump({"spec": {}, "status": {}})
    assert dumped == {
        "spec": {"acceleratable": False, "os": "", "arch": "", "unitResources": {}, "localStorage": ""},
        "status": {"phase": ""},
    }


def test_load_fills_go_zero_values_for_always_serialised_fields() -> None:
    loaded = INSTANCE_TYPE.load({"spec": {"os": "linux"}})
    assert loaded["spec"]["acceleratable"] is False
    assert loaded["spec"]["unitResources"] == {}
    assert "status" not in loaded


def test_omitempty_fields_are_dropped_when_empty() -> None:
    obj = with_spec(displayName="", inactive=False, description="", cache={})
    dumped = INSTANCE_TYPE.dump(INSTANCE_TYPE.load(obj))
    assert not {"displayName", "inactive", "description", "cache"} & set(dumped["spec"])


def test_integer_quantities_load_as_their_text() -> None:
    obj = copy.deepcopy(GOLDEN)
    obj["status"]["accelerator"] = {"onceMaxRequest": 4, "remaining": 0}
    assert INSTANCE_TYPE.load(obj)["status"]["accelerator"] == {"onceMaxRequest": "4", "remaining": "0"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            {"unitResources": {"cpu": 4}},
            FieldError("spec.unitResources.cpu", "Not a valid string."),
            id="unit-cpu-must-be-a-string",
        ),
        pytest.param(
            {"displayName": "x" * 65},
            FieldError("spec.displayName", "Longer than maximum length 64."),
            id="display-name-over-64",
        ),
        pytest.param(
            {"description": "x" * 1025},
            FieldError("spec.description", "Longer than maximum length 1024."),
            id="description-over-1024",
        ),
        pytest.param(
            {"acceleratable": "true"},
            FieldError("spec.acceleratable", "Not a valid boolean."),
            id="boolean-text-is-not-a-boolean",
        ),
        pytest.param(
            {"feature": {"logicalSliced": {"coresPercentageOvercommit": True}}},
            FieldError("spec.feature.logicalSliced.maxSize", "Missing data for required field."),
            id="slicing-needs-max-size",
        ),
        pytest.param({"gpus": 1}, FieldError("spec.gpus", "Unknown field."), id="unknown-field"),
    ],
)
def test_spec_errors_name_the_field(change: dict[str, Any], expected: FieldError) -> None:
    assert INSTANCE_TYPE.validate(with_spec(**change)) == [expected]


@pytest.mark.parametrize(
    ("status", "path"),
    [
        pytest.param({"phase": "Running"}, "status.phase", id="phase-outside-enum"),
        pytest.param(
            {"phase": "Active", "cpu": {"remaining": "lots"}}, "status.cpu.remaining", id="bad-quantity"
        ),
        pytest.param(
            {"phase": "Active", "cpu": {"remaining": 1.5}}, "status.cpu.remaining", id="float-quantity"
        ),
    ],
)
def test_status_errors_name_the_field(status: dict[str, Any], path: str) -> None:
    obj = {**GOLDEN, "status": status}
    assert [e.path for e in INSTANCE_TYPE.validate(obj)] == [path]


def test_every_phase_and_the_unset_phase_are_accepted() -> None:
    for phase in ("", "Active", "Activating", "Inactive", "Draining"):
        assert INSTANCE_TYPE.validate({**GOLDEN, "status": {"phase": phase}}) == []


def test_load_reports_all_errors_at_once_and_wrong_kind() -> None:
    obj = {**with_spec(displayName="x" * 65, os=7), "kind": "ClusterQueue"}
    with pytest.raises(InvalidObjectError) as caught:
        INSTANCE_TYPE.load(obj)
    assert [e.path for e in caught.value.errors] == ["kind", "spec.displayName", "spec.os"]
    assert "spec.os: Not a valid string." in str(caught.value)
