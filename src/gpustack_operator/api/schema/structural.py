"""A checker for kube-apiserver's structural-schema rules (apiextensions.k8s.io/v1).

Why this module exists: a CRD whose openAPIV3Schema is not structural is refused by kube-apiserver at install
time, which we would otherwise learn only in a cluster. This re-states the rules of
k8s.io/apiextensions-apiserver (pkg/apiserver/schema: structural, validation, listtype; and the v1 API
validation) so unit tests and ``scripts/gen_crds.py`` refuse such a schema before it is ever written:

1. every node has a ``type``, unless it is ``x-kubernetes-int-or-string`` or
   ``x-kubernetes-preserve-unknown-fields``; the root is an object; ``items`` is set for arrays;
2. inside ``allOf``/``anyOf``/``oneOf``/``not`` no ``type``, ``description``, ``default``, ``nullable`` or
   ``additionalProperties`` (except the int-or-string ``anyOf``), and every field there is also specified
   outside;
3. ``metadata`` restricts nothing but ``name`` and ``generateName``;
4. no ``$ref`` and the other forbidden keywords; ``properties`` excludes ``additionalProperties``;
   ``additionalProperties: false`` and ``uniqueItems: true`` are refused;
5. list/map extensions are well-formed: a ``map`` list has object items whose keys are scalar properties that
   are required or defaulted, ``set`` items are scalar;
6. defaults conform to their node and would survive pruning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TYPES = {"array", "boolean", "integer", "number", "object", "string"}
_SCALARS = {"boolean", "integer", "number", "string"}
_FORBIDDEN = {
    "$ref",
    "$schema",
    "definitions",
    "dependencies",
    "deprecated",
    "discriminator",
    "id",
    "patternProperties",
    "readOnly",
    "writeOnly",
    "xml",
    "additionalItems",
}
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_NOT_IN_JUNCTORS = ("type", "description", "default", "nullable", "additionalProperties")
_INT_OR_STRING_FORM = [{"type": "integer"}, {"type": "string"}]
_FOR_TYPE = {
    "string": {"pattern", "maxLength", "minLength"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "array": {
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    },
    "object": {
        "properties",
        "additionalProperties",
        "required",
        "minProperties",
        "maxProperties",
        "x-kubernetes-map-type",
    },
}
_GENERAL = {
    "description",
    "type",
    "format",
    "title",
    "default",
    "enum",
    "nullable",
    "example",
    "externalDocs",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
    *_JUNCTORS,
}
_KNOWN = _GENERAL | set().union(*_FOR_TYPE.values())


def _allowed_for(node: Mapping[str, Any]) -> set[str]:
    """Keywords that make sense on this node's type (int-or-string takes string and number ones)."""
    if node.get("x-kubernetes-int-or-string") is True:
        return _FOR_TYPE["string"] | _FOR_TYPE["number"]
    kind = node.get("type")
    if kind == "integer":
        kind = "number"
    allowed = set(_FOR_TYPE.get(str(kind), set()))
    if node.get("x-kubernetes-preserve-unknown-fields") is True:
        allowed |= _FOR_TYPE["object"]
    return allowed


def _conforms(node: Mapping[str, Any], value: Any, path: str) -> list[str]:
    """Why ``value`` (a default) would be refused or pruned under ``node``; empty when it conforms."""
    kind = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    ok_type = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, Mapping),
    }
    if int_or_string:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return [f"{path}: default {value!r} is neither integer nor string"]
    elif kind in ok_type and not ok_type[str(kind)]:
        return [f"{path}: default {value!r} is not of type {kind}"]
    errors: list[str] = []
    if "enum" in node and value not in node["enum"]:
        errors.append(f"{path}: default {value!r} is not in enum")
    if isinstance(value, str) and "pattern" in node and not re.search(node["pattern"], value):
        errors.append(f"{path}: default {value!r} does not match pattern")
    if isinstance(value, str) and len(value) > node.get("maxLength", len(value)):
        errors.append(f"{path}: default {value!r} is longer than maxLength")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and not node.get("minimum", value) <= value <= node.get("maximum", value):
        errors.append(f"{path}: default {value!r} is out of range")
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for i, item in enumerate(value):
            errors += _conforms(node["items"], item, f"{path}[{i}]")
    if isinstance(value, Mapping) and "properties" in node:
        props = node["properties"]
        errors += [f"{path}.{k}: default would be pruned (unknown field)" for k in value if k not in props]
        errors += [
            f"{path}.{k}: default misses a required field" for k in node.get("required", []) if k not in value
        ]
        for key, item in value.items():
            if key in props:
                errors += _conforms(props[key], item, f"{path}.{key}")
    return errors


def _list_type(node: Mapping[str, Any], path: str) -> list[str]:
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys")
    if list_type is None:
        return [f"{path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type map"] if keys else []
    if list_type not in ("atomic", "set", "map"):
        return [f"{path}: x-kubernetes-list-type {list_type!r} is not atomic, set or map"]
    items = node.get("items") if isinstance(node.get("items"), Mapping) else {}
    assert isinstance(items, Mapping)
    if list_type == "set":
        return [] if items.get("type") in _SCALARS else [f"{path}: a set list needs scalar items"]
    if list_type == "atomic":
        return [f"{path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type map"] if keys else []
    if not keys:
        return [f"{path}: a map list needs x-kubernetes-list-map-keys"]
    if items.get("type") != "object":
        return [f"{path}: a map list needs object items"]
    errors = []
    props, required = items.get("properties", {}), set(items.get("required", []))
    for key in keys:
        prop = props.get(key)
        if prop is None:
            errors.append(f"{path}: map key {key!r} is not an item property")
        elif prop.get("type") not in _SCALARS:
            errors.append(f"{path}: map key {key!r} must be a scalar")
        elif key not in required and "default" not in prop:
            errors.append(f"{path}: map key {key!r} must be required or defaulted")
    return errors


def _junctor(sub: Any, outer: Mapping[str, Any], path: str) -> list[str]:
    if not isinstance(sub, Mapping):
        return [f"{path}: not a schema"]
    errors = [
        f"{path}: {key} is not allowed inside a logical junctor" for key in _NOT_IN_JUNCTORS if key in sub
    ]
    outer_props = outer.get("properties", {})
    for name, child in sub.get("properties", {}).items():
        if name not in outer_props:
            errors.append(f"{path}.{name}: must also be specified outside the logical junctor")
        else:
            errors += _junctor(child, outer_props[name], f"{path}.{name}")
    if "items" in sub:
        if not isinstance(outer.get("items"), Mapping):
            errors.append(f"{path}[*]: must also be specified outside the logical junctor")
        else:
            errors += _junctor(sub["items"], outer["items"], f"{path}[*]")
    for junctor in _JUNCTORS:
        for i, nested in enumerate(_junctor_members(sub, junctor)):
            errors += _junctor(nested, outer, f"{path}.{junctor}[{i}]")
    return errors


def _junctor_members(node: Mapping[str, Any], junctor: str) -> list[Any]:
    members = node.get(junctor)
    if members is None:
        return []
    return [members] if junctor == "not" else list(members)


def _node(node: Any, path: str) -> list[str]:
    if not isinstance(node, Mapping):
        return [f"{path}: not a schema"]
    errors = [f"{path}: {key} is forbidden" for key in node if key in _FORBIDDEN]
    errors += [f"{path}: unknown keyword {key}" for key in node if key not in _KNOWN | _FORBIDDEN]
    kind = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    escape = int_or_string or node.get("x-kubernetes-preserve-unknown-fields") is True
    if kind is None and not escape:
        errors.append(f"{path}: must have a type")
    elif kind is not None and kind not in _TYPES:
        errors.append(f"{path}: type {kind!r} is not one of {sorted(_TYPES)}")
    if int_or_string and kind is not None:
        errors.append(f"{path}: x-kubernetes-int-or-string must not set a type")
    misplaced = (set(node) & set().union(*_FOR_TYPE.values())) - _allowed_for(node)
    errors += [f"{path}: {key} does not apply to type {kind}" for key in sorted(misplaced)]
    if "properties" in node and "additionalProperties" in node:
        errors.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if node.get("additionalProperties") is False:
        errors.append(f"{path}: additionalProperties must not be false")
    if node.get("uniqueItems") is True:
        errors.append(f"{path}: uniqueItems must not be true")
    if node.get("x-kubernetes-map-type") not in (None, "granular", "atomic"):
        errors.append(f"{path}: x-kubernetes-map-type must be granular or atomic")
    if node.get("x-kubernetes-embedded-resource") is True and kind != "object":
        errors.append(f"{path}: x-kubernetes-embedded-resource needs type object")
    if kind == "array" and not isinstance(node.get("items"), Mapping):
        errors.append(f"{path}: an array needs a single items schema")
    errors += _list_type(node, path)
    props = node.get("properties", {})
    errors += [
        f"{path}: required {name!r} is not a property"
        for name in node.get("required", [])
        if name not in props
    ]
    if "default" in node:
        errors += _conforms(node, node["default"], path)
    for junctor in _JUNCTORS:
        members = _junctor_members(node, junctor)
        if int_or_string and junctor in ("anyOf", "allOf") and members == _INT_OR_STRING_FORM:
            continue
        for i, member in enumerate(members):
            errors += _junctor(member, node, f"{path}.{junctor}[{i}]")
    for name, child in props.items():
        errors += _node(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("additionalProperties"), Mapping):
        errors += _node(node["additionalProperties"], f"{path}[*]")
    if isinstance(node.get("items"), Mapping):
        errors += _node(node["items"], f"{path}[*]")
    return errors


def _root(schema: Mapping[str, Any]) -> list[str]:
    errors = [] if schema.get("type") == "object" else ["(root): type must be object"]
    props = schema.get("properties", {})
    errors += [
        f"{key}: must be of type string"
        for key in ("apiVersion", "kind")
        if key in props and props[key].get("type") != "string"
    ]
    meta = props.get("metadata")
    if meta is not None:
        if meta.get("type") != "object":
            errors.append("metadata: must be of type object")
        if set(meta) - {"type", "properties"} or set(meta.get("properties", {})) - {"name", "generateName"}:
            errors.append("metadata: must not specify anything other than name and generateName")
    return errors


def structural_errors(schema: Mapping[str, Any]) -> list[str]:
    """Every way ``schema`` (a CRD version's openAPIV3Schema) breaks the structural rules; empty if none."""
    return _root(schema) + _node(schema, "")
