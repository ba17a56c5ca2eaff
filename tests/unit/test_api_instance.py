"""Instance (worker.gpustack.ai/v1alpha1): defaults, enums, bounds and patterns from the schema source."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api.schema import INSTANCE

GOLDEN = json.loads((Path(__file__).parent / "golden" / "instance.json").read_text())


def test_golden_object_round_trips_exactly() -> None:
    loaded = INSTANCE.load(GOLDEN)
    assert loaded == {**GOLDEN, "spec": {**GOLDEN["spec"], "privileged": False}}
    assert INSTANCE.dump(loaded) == GOLDEN


def test_load_applies_the_crd_defaults() -> None:
    loaded = INSTANCE.load({"spec": {"type": "t", "image": "busybox", "ports": [{"port": 22}]}})
    assert loaded["spec"] == {
        "type": "t",
        "image": "busybox",
        "imagePullPolicy": "IfNotPresent",
        "privileged": False,
        "ports": [{"port": 22, "protocol": "TCP"}],
        "volumeMount": "/workspace",
    }


def test_a_pointer_quantity_keeps_an_explicit_zero() -> None:
    obj = copy.deepcopy(GOLDEN)
    obj["spec"]["resources"]["accelerator"] = 0
    assert INSTANCE.dump(INSTANCE.load(obj))["spec"]["resources"]["accelerator"] == "0"


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        pytest.param({"type": None}, "spec.type", id="type-null"),
        pytest.param({"imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy", id="pull-policy-enum"),
        pytest.param({"ports": [{"port": 0}]}, "spec.ports[0].port", id="port-zero"),
        pytest.param(
            {"ports": [{"port": 22, "protocol": "HTTP"}]}, "spec.ports[0].protocol", id="protocol-enum"
        ),
        pytest.param(
            {"ports": [{"port": 22, "name": "x" * 17}]}, "spec.ports[0].name", id="port-name-over-16"
        ),
        pytest.param({"env": [{"value": "v"}]}, "spec.env[0].name", id="env-without-name"),
        pytest.param({"volumeMount": "workspace"}, "spec.volumeMount", id="relative-mount"),
        pytest.param({"volumeMount": "/" + "x" * 1024}, "spec.volumeMount", id="mount-over-1024"),
        pytest.param({"command": ["sh", 1]}, "spec.command[1]", id="non-string-argument"),
        pytest.param(
            {"volume": {"ephemeral": {}}}, "spec.volume.ephemeral.capacity", id="ephemeral-without-size"
        ),
        pytest.param(
            {
                "resources": {
                    "cpu": "1",
                    "ram": "1Gi",
                    "localStorage": "1Gi",
                    "acceleratorSlicedMemoryPercentage": 101,
                }
            },
            "spec.resources.acceleratorSlicedMemoryPercentage",
            id="memory-percentage-over-100",
        ),
        pytest.param(
            {
                "resources": {
                    "cpu": "1",
                    "ram": "1Gi",
                    "localStorage": "1Gi",
                    "acceleratorSlicedCoresPercentage": -1,
                }
            },
            "spec.resources.acceleratorSlicedCoresPercentage",
            id="cores-percentage-below-0",
        ),
        pytest.param(
            {"resources": {"cpu": "1", "ram": "1Gi"}}, "spec.resources.localStorage", id="no-storage"
        ),
    ],
)
def test_errors_name_the_field(spec: dict[str, Any], path: str) -> None:
    obj = {**GOLDEN, "spec": {**GOLDEN["spec"], **spec}}
    assert [e.path for e in INSTANCE.validate(obj)] == [path]


def test_missing_type_and_image_are_both_reported() -> None:
    assert [str(e) for e in INSTANCE.validate({"spec": {}})] == [
        "spec.image: Missing data for required field.",
        "spec.type: Missing data for required field.",
    ]
