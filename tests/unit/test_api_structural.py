"""The structural-schema checker refuses what kube-apiserver refuses, and accepts our schemas."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.schema import DEVICES, INSTANCE, INSTANCE_TYPE, SETTING, ApiType
from gpustack_operator.api.schema.structural import structural_errors

STRING = {"type": "string"}
INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def root(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def map_list(item: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": keys,
    }


@pytest.mark.parametrize(
    ("schema", "complaint"),
    [
        pytest.param({"properties": {}}, "(root): type must be object", id="root-without-type"),
        pytest.param(root(spec={"properties": {"a": STRING}}), "spec: must have a type", id="untyped-node"),
        pytest.param(root(a={"type": "list"}), "a: type 'list' is not one of", id="unknown-type"),
        pytest.param(root(a={"$ref": "#/x", "type": "object"}), "a: $ref is forbidden", id="ref"),
        pytest.param(
            root(a={"type": "object", "properties": {}, "additionalProperties": STRING}),
            "a: properties and additionalProperties are mutually exclusive",
            id="properties-and-additional",
        ),
        pytest.param(
            root(a={"type": "object", "additionalProperties": False}),
            "a: additionalProperties must not be false",
            id="additional-false",
        ),
        pytest.param(
            root(a={"type": "array"}), "a: an array needs a single items schema", id="array-without-items"
        ),
        pytest.param(
            root(a={"type": "array", "items": STRING, "uniqueItems": True}),
            "a: uniqueItems must not be true",
            id="unique-items",
        ),
        pytest.param(
            root(a={"type": "integer", "maxLength": 3}), "a: maxLength does not apply", id="misplaced"
        ),
        pytest.param(
            root(metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
            "metadata: must not specify anything other than name and generateName",
            id="metadata-labels",
        ),
        pytest.param(
            root(metadata={"type": "object", "description": "meta"}),
            "metadata: must not specify anything other than name and generateName",
            id="metadata-description",
        ),
        pytest.param(root(kind={"type": "integer"}), "kind: must be of type string", id="kind-not-string"),
        pytest.param(
            root(a={"type": "string", "anyOf": [{"type": "string"}]}),
            "a.anyOf[0]: type is not allowed inside a logical junctor",
            id="type-in-junctor",
        ),
        pytest.param(
            root(a={"type": "object", "properties": {}, "oneOf": [{"properties": {"b": {}}}]}),
            "a.oneOf[0].b: must also be specified outside the logical junctor",
            id="field-only-in-junctor",
        ),
        pytest.param(
            root(a={"anyOf": [{"type": "string"}], "x-kubernetes-int-or-string": True}),
            "a.anyOf[0]: type is not allowed inside a logical junctor",
            id="int-or-string-wrong-any-of",
        ),
        pytest.param(
            root(a={"type": "string", "x-kubernetes-int-or-string": True}),
            "a: x-kubernetes-int-or-string must not set a type",
            id="int-or-string-with-type",
        ),
        pytest.param(
            root(a={"type": "array", "items": STRING, "x-kubernetes-list-type": "map"}),
            "a: a map list needs x-kubernetes-list-map-keys",
            id="map-list-without-keys",
        ),
        pytest.param(
            root(a=map_list({"type": "object", "properties": {"id": STRING}}, ["id"])),
            "a: map key 'id' must be required or defaulted",
            id="optional-map-key",
        ),
        pytest.param(
            root(
                a=map_list(
                    {"type": "object", "properties": {"id": {"type": "object"}}, "required": ["id"]}, ["id"]
                )
            ),
            "a: map key 'id' must be a scalar",
            id="object-map-key",
        ),
        pytest.param(
            root(a=map_list({"type": "object", "properties": {}}, ["id"])),
            "a: map key 'id' is not an item property",
            id="missing-map-key",
        ),
        pytest.param(
            root(a={"type": "array", "items": STRING, "x-kubernetes-list-map-keys": ["id"]}),
            "a: x-kubernetes-list-map-keys needs x-kubernetes-list-type map",
            id="keys-without-map",
        ),
        pytest.param(
            root(a={"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"}),
            "a: a set list needs scalar items",
            id="set-of-objects",
        ),
        pytest.param(
            root(a={"type": "string", "enum": ["x"], "default": "y"}),
            "a: default 'y' is not in enum",
            id="default-enum",
        ),
        pytest.param(
            root(a={"type": "object", "properties": {}, "default": {"b": 1}}),
            "a.b: default would be pruned",
            id="default-pruned",
        ),
        pytest.param(
            root(a={"type": "integer", "default": "1"}),
            "a: default '1' is not of type integer",
            id="default-type",
        ),
        pytest.param(
            root(a={"type": "object", "properties": {}, "required": ["b"]}),
            "a: required 'b' is not a property",
            id="required-unknown",
        ),
    ],
)
def test_non_structural_schemas_are_refused(schema: dict[str, Any], complaint: str) -> None:
    errors = structural_errors(schema)
    assert any(e.startswith(complaint) for e in errors), errors


def test_allowed_escapes_pass() -> None:
    schema = root(
        apiVersion=STRING,
        metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
        size=INT_OR_STRING | {"pattern": "^[0-9]+$"},
        free={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        ports=map_list(
            {
                "type": "object",
                "properties": {"port": {"type": "integer"}, "protocol": STRING | {"default": "TCP"}},
                "required": ["port"],
            },
            ["port", "protocol"],
        ),
    )
    assert structural_errors(schema) == []


@pytest.mark.parametrize("api", [INSTANCE_TYPE, DEVICES, INSTANCE, SETTING], ids=lambda a: a.kind)
def test_every_api_schema_is_structural(api: ApiType[Any]) -> None:
    assert structural_errors(api.openapi_schema()) == []
