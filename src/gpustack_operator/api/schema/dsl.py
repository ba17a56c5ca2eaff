"""Constructors that declare one API field once: its JSON type, Go presence rule, validation and docs.

Why this module exists: every fact about a field (type, width, enum, pattern, default, description,
``omitempty``, list semantics) is written in exactly one call here, and both the Python validation
(marshmallow) and the CRD's openAPIV3Schema (``openapi.py``) are read from the resulting field. Field names
are the JSON names, so ``struct`` builds schemas with ``from_dict`` and no per-field renaming exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from marshmallow import fields, validate

from gpustack_operator.api.schema.base import GoSchema
from gpustack_operator.api.schema.fields import (
    ObjectMeta,
    Omit,
    Quantity,
    StrictBoolean,
    StrictInteger,
    StrictString,
)

GoInt = Literal["int32", "int64", "uint32", "uint64"]
ListType = Literal["atomic", "set", "map"]

#: Go integer kind -> (OpenAPI format, lowest, highest). Unsigned kinds also get ``minimum: 0``.
_WIDTHS: dict[str, tuple[str, int, int]] = {
    "int32": ("int32", -(2**31), 2**31 - 1),
    "int64": ("int64", -(2**63), 2**63 - 1),
    "uint32": ("int64", 0, 2**32 - 1),
    "uint64": ("int64", 0, 2**63 - 1),  # JSON numbers past int64 do not survive the API server
}


def _make(
    cls: Callable[..., fields.Field[Any]],
    *,
    zero: Callable[[], Any],
    description: str,
    required: bool,
    omit: Omit,
    default: Any = None,
    validators: Sequence[validate.Validator] = (),
    openapi: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> fields.Field[Any]:
    policy = Omit.NEVER if required else omit
    metadata: dict[str, Any] = {
        "description": description,
        "omit": policy,
        "zero": zero,
        "openapi": dict(openapi or {}),
    }
    if default is not None:
        metadata["default"] = default
        kwargs["load_default"] = default
    return cls(
        required=required,
        allow_none=policy is Omit.NIL,
        validate=list(validators),
        metadata=metadata,
        **kwargs,
    )


def string(
    description: str = "",
    *,
    required: bool = False,
    omit: Omit = Omit.EMPTY,
    max_length: int | None = None,
    pattern: str | None = None,
    enum: Sequence[str] = (),
    default: str | None = None,
) -> fields.Field[Any]:
    """A string; ``pattern`` must be anchored (JSON Schema searches, marshmallow matches)."""
    checks: list[validate.Validator] = []
    if max_length is not None:
        checks.append(validate.Length(max=max_length))
    if pattern is not None:
        if not (pattern.startswith("^") and pattern.endswith("$")):
            raise ValueError(f"pattern {pattern!r} must be anchored with ^ and $")
        checks.append(validate.Regexp(pattern))
    if enum:
        checks.append(validate.OneOf(list(enum)))
    return _make(
        StrictString,
        zero=str,
        description=description,
        required=required,
        omit=omit,
        default=default,
        validators=checks,
    )


def boolean(
    description: str = "", *, required: bool = False, omit: Omit = Omit.EMPTY, default: bool | None = None
) -> fields.Field[Any]:
    """A boolean."""
    return _make(
        StrictBoolean, zero=bool, description=description, required=required, omit=omit, default=default
    )


def integer(
    description: str = "",
    *,
    go_type: GoInt,
    required: bool = False,
    omit: Omit = Omit.EMPTY,
    minimum: int | None = None,
    maximum: int | None = None,
    enum: Sequence[int] = (),
    default: int | None = None,
) -> fields.Field[Any]:
    """An integer of a Go width; unsigned widths reject negatives (``minimum: 0``)."""
    fmt, low, high = _WIDTHS[go_type]
    if minimum is None and low == 0:
        minimum = 0
    checks: list[validate.Validator] = []
    if minimum is not None or maximum is not None:
        checks.append(validate.Range(min=minimum, max=maximum))
    if enum:
        checks.append(validate.OneOf(list(enum)))
    return _make(
        StrictInteger,
        zero=int,
        description=description,
        required=required,
        omit=omit,
        default=default,
        validators=checks,
        fmt=fmt,
        low=low,
        high=high,
    )


def quantity(description: str = "", *, required: bool = False, omit: Omit = Omit.EMPTY) -> fields.Field[Any]:
    """A resource.Quantity (string or integer on the wire; a string once loaded)."""
    return _make(Quantity, zero=lambda: "0", description=description, required=required, omit=omit)


def obj(
    schema: type[GoSchema], description: str = "", *, required: bool = False, omit: Omit = Omit.EMPTY
) -> fields.Field[Any]:
    """A nested object described by another ``struct``."""
    return _make(
        lambda **kw: fields.Nested(schema, **kw),
        zero=dict,
        description=description or schema.description,
        required=required,
        omit=omit,
    )


def array(
    item: fields.Field[Any],
    description: str = "",
    *,
    required: bool = False,
    omit: Omit = Omit.EMPTY,
    list_type: ListType | None = None,
    map_keys: Sequence[str] = (),
) -> fields.Field[Any]:
    """A list; ``list_type``/``map_keys`` become ``x-kubernetes-list-type``/``-list-map-keys``."""
    if bool(map_keys) != (list_type == "map"):
        raise ValueError("map_keys are given exactly when list_type is 'map'")
    extra: dict[str, Any] = {}
    if list_type is not None:
        extra["x-kubernetes-list-type"] = list_type
    if map_keys:
        extra["x-kubernetes-list-map-keys"] = list(map_keys)
    return _make(
        lambda **kw: fields.List(item, **kw),
        zero=list,
        description=description,
        required=required,
        omit=omit,
        openapi=extra,
    )


def metadata() -> fields.Field[Any]:
    """The ``metadata`` of a top-level object (Go: ``metadata,omitempty``)."""
    return _make(ObjectMeta, zero=dict, description="", required=False, omit=Omit.EMPTY)


def struct(name: str, description: str, body: Mapping[str, fields.Field[Any]]) -> type[GoSchema]:
    """A schema class whose field names are the JSON names, in wire order."""
    schema = GoSchema.from_dict(dict(body), name=name)
    assert issubclass(schema, GoSchema)
    schema.description = description
    return schema
