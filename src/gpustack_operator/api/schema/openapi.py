"""OpenAPI v3 (Kubernetes structural schema) from the DSL's marshmallow fields.

Why this module exists: the CRD's openAPIV3Schema must say exactly what the Python validation accepts. We
convert the same field objects instead of keeping a second hand-written schema. apispec's marshmallow plugin
is not used for CRDs because it emits ``$ref``s, ``readOnly`` and ``nullable`` shapes that kube-apiserver
refuses in a structural schema; this converter emits only what ``structural.py`` allows, inline.
"""

from __future__ import annotations

from typing import Any

from marshmallow import fields, validate

from gpustack_operator.api.schema.base import GoSchema
from gpustack_operator.api.schema.fields import (
    QUANTITY_PATTERN,
    ObjectMeta,
    Quantity,
    StrictBoolean,
    StrictInteger,
    StrictString,
)

Node = dict[str, Any]


def _validations(field: fields.Field[Any], node: Node) -> None:
    for check in field.validators:
        if isinstance(check, validate.Length):
            if check.min is not None:
                node["minLength"] = check.min
            if check.max is not None:
                node["maxLength"] = check.max
        elif isinstance(check, validate.Range):
            if check.min is not None:
                node["minimum"] = check.min
            if check.max is not None:
                node["maximum"] = check.max
        elif isinstance(check, validate.OneOf):
            node["enum"] = list(check.choices)
        elif isinstance(check, validate.Regexp):
            node["pattern"] = check.regex.pattern
        else:
            raise TypeError(f"validator {check!r} has no OpenAPI form")


def _typed(field: fields.Field[Any]) -> Node:
    if isinstance(field, fields.Nested):
        nested = field.nested
        if not (isinstance(nested, type) and issubclass(nested, GoSchema)):
            raise TypeError(f"nested {nested!r} is not a GoSchema class")
        return object_schema(nested)
    if isinstance(field, fields.List):
        return {"type": "array", "items": field_schema(field.inner)}
    if isinstance(field, StrictString):
        return {"type": "string"}
    if isinstance(field, StrictBoolean):
        return {"type": "boolean"}
    if isinstance(field, StrictInteger):
        return {"type": "integer", "format": field.fmt}
    if isinstance(field, Quantity):
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    if isinstance(field, ObjectMeta):
        return {"type": "object"}
    raise TypeError(f"field {field!r} has no OpenAPI form")


def field_schema(field: fields.Field[Any]) -> Node:
    """The schema node of one field: description, type, validations, default, x-kubernetes-*."""
    meta = field.metadata
    node = _typed(field)
    if meta.get("description"):  # the field's own words win over its struct's, and come first
        node = {"description": meta["description"], **{k: v for k, v in node.items() if k != "description"}}
    _validations(field, node)
    if "default" in meta:
        node["default"] = meta["default"]
    node.update(meta.get("openapi", {}))
    return node


def object_schema(schema: type[GoSchema]) -> Node:
    """The schema node of a ``struct``: properties in wire order, ``required`` where the field is."""
    instance = schema()
    node: Node = {}
    if schema.description:
        node["description"] = schema.description
    node["type"] = "object"
    node["properties"] = {name: field_schema(field) for name, field in instance.fields.items()}
    required = [name for name, field in instance.fields.items() if field.required]
    if required:
        node["required"] = required
    return node
