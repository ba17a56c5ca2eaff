"""Devices (worker.gpustack.ai/v1alpha1): inventory and per-card ledger, modes serialised as numbers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api.schema import DEVICES
from gpustack_operator.api.types.devices import DeviceAllocationMode

GOLDEN = json.loads((Path(__file__).parent / "golden" / "devices.json").read_text())


def first_card(obj: dict[str, Any]) -> dict[str, Any]:
    card: dict[str, Any] = obj["spec"]["groups"][0]["accelerators"][0]
    return card


def first_ledger_entry(obj: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = obj["status"]["groups"][0]["accelerators"][0]
    return entry


def test_golden_object_round_trips_exactly() -> None:
    loaded = DEVICES.load(GOLDEN)
    assert loaded == GOLDEN
    assert DEVICES.dump(loaded) == GOLDEN


def test_a_free_card_keeps_mode_zero_on_the_wire() -> None:
    ledger = {
        "spec": {"groups": []},
        "status": {
            "groups": [
                {"id": "a10g", "manufacturer": "nvidia", "accelerators": [{"id": "GPU-1", "index": 0}]}
            ]
        },
    }
    assert first_ledger_entry(DEVICES.dump(ledger)) == {"id": "GPU-1", "index": 0, "mode": 0}


def test_mode_is_a_number_with_the_original_names() -> None:
    assert [(m.value, m.label) for m in DeviceAllocationMode] == [
        (0, "None"),
        (1, "Exclusive"),
        (2, "Shared"),
        (3, "Sliced"),
        (4, "Visibility"),
    ]
    obj = copy.deepcopy(GOLDEN)
    first_ledger_entry(obj)["mode"] = DeviceAllocationMode.SHARED
    assert json.dumps(first_ledger_entry(DEVICES.dump(obj))["mode"]) == "2"


@pytest.mark.parametrize(
    ("mutate", "path", "message"),
    [
        pytest.param(
            lambda o: first_ledger_entry(o).update(mode=5),
            "status.groups[0].accelerators[0].mode",
            "Must be one of: 0, 1, 2, 3, 4.",
            id="mode-outside-enum",
        ),
        pytest.param(
            lambda o: first_ledger_entry(o).update(mode="Shared"),
            "status.groups[0].accelerators[0].mode",
            "Not a valid integer.",
            id="mode-by-name",
        ),
        pytest.param(
            lambda o: first_card(o).pop("topology"),
            "spec.groups[0].accelerators[0].topology",
            "Missing data for required field.",
            id="card-without-topology",
        ),
        pytest.param(
            lambda o: first_card(o)["status"].update(unhealthy="false"),
            "spec.groups[0].accelerators[0].status.unhealthy",
            "Not a valid boolean.",
            id="health-as-text",
        ),
        pytest.param(
            lambda o: o["spec"]["groups"][0].update(memory=-1),
            "spec.groups[0].memory",
            "Must be an integer between 0 and 9223372036854775807.",
            id="negative-vram",
        ),
        pytest.param(
            lambda o: first_card(o).update(index=1.0),
            "spec.groups[0].accelerators[0].index",
            "Not a valid integer.",
            id="float-index",
        ),
        pytest.param(
            lambda o: first_ledger_entry(o).update(remaining=2**31),
            "status.groups[0].accelerators[0].remaining",
            "Must be an integer between -2147483648 and 2147483647.",
            id="remaining-past-int32",
        ),
        pytest.param(lambda o: o.pop("spec"), "spec", "Missing data for required field.", id="no-spec"),
    ],
)
def test_errors_name_the_field(mutate: Any, path: str, message: str) -> None:
    obj = copy.deepcopy(GOLDEN)
    mutate(obj)
    assert [(e.path, e.message) for e in DEVICES.validate(obj)] == [(path, message)]
