"""The schema DSL's strict JSON fields and its guards against declarations kube-apiserver would misread."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.openapi import field_schema

Probe = dsl.struct(
    "Probe",
    "Fields under test.",
    {
        "flag": dsl.boolean(),
        "count": dsl.integer(go_type="int32"),
        "size": dsl.quantity(),
        "text": dsl.string(),
    },
)


def load(**values: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = Probe().load(values)
    return loaded


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("flag", "true", id="bool-from-text"),
        pytest.param("flag", 1, id="bool-from-number"),
        pytest.param("count", 1.0, id="int-from-float"),
        pytest.param("count", True, id="int-from-bool"),
        pytest.param("count", "1", id="int-from-text"),
        pytest.param("count", 2**31, id="int32-overflow"),
        pytest.param("size", 1.5, id="quantity-from-float"),
        pytest.param("size", True, id="quantity-from-bool"),
        pytest.param("size", "1 Gi", id="quantity-with-space"),
        pytest.param("size", "1GB", id="quantity-unknown-suffix"),
        pytest.param("text", 5, id="string-from-number"),
    ],
)
def test_values_the_api_server_refuses_are_refused(key: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        load(**{key: value})
    assert list(caught.value.messages) == [key]


@pytest.mark.parametrize(
    ("value", "loaded"),
    [("500m", "500m"), ("16Gi", "16Gi"), ("+1.5", "+1.5"), ("1e3", "1e3"), (4, "4"), (-2, "-2"), ("0", "0")],
)
def test_quantities_in_canonical_forms_and_integers_are_accepted(value: Any, loaded: str) -> None:
    assert load(size=value) == {"size": loaded}


def test_a_quantity_is_int_or_string_in_openapi() -> None:
    node = field_schema(dsl.quantity("Size."))
    assert node["description"] == "Size."
    assert node["x-kubernetes-int-or-string"] is True
    assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_unsigned_integers_get_minimum_zero() -> None:
    assert field_schema(dsl.integer(go_type="uint32")) == {"type": "integer", "format": "int64", "minimum": 0}


def test_patterns_must_be_anchored_because_json_schema_searches() -> None:
    with pytest.raises(ValueError, match="anchored"):
        dsl.string(pattern="[a-z]+")


def test_map_keys_and_map_list_type_come_together() -> None:
    with pytest.raises(ValueError, match="map_keys"):
        dsl.array(dsl.string(), list_type="map")
    with pytest.raises(ValueError, match="map_keys"):
        dsl.array(dsl.string(), map_keys=("name",))
