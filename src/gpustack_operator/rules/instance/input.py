"""Typed reads of an Instance's / InstanceType's JSON fields, failing with the field's name.

Why this module exists: the Instance Pod is rendered from JSON the API server stored, which the schema
shapes but a client (or an older operator) may still have bent. Rendering must then say which field is
wrong instead of failing with a KeyError deep inside; these readers turn every wrong shape into a
RenderError naming the field, and nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_operator.api.quantity import Quantity, parse_quantity

_MAX_QUANTITY_TEXT: Final = 64
"""No real request is longer; bounding it keeps parsing and printing small whatever a client sends."""
_INT64_MAX: Final = 2**63 - 1


class RenderError(ValueError):
    """No valid Pod can be made of the Instance and its type; the message names the field."""


def mapping(value: object, field: str) -> Mapping[str, Any]:
    """An object field; absent (None) reads as empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RenderError(f"{field}: want an object, got {type(value).__name__}")
    return value


def sequence(value: object, field: str) -> Sequence[Any]:
    """A list field; absent (None) reads as empty."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise RenderError(f"{field}: want a list, got {type(value).__name__}")
    return value


def text(value: object, field: str) -> str:
    """A string field; absent (None) reads as ""."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RenderError(f"{field}: want a string, got {type(value).__name__}")
    return value


def integer(value: object, field: str) -> int:
    """An integer field; absent (None) reads as 0."""
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise RenderError(f"{field}: want an integer, got {value!r}")
    return value


def quantity(value: object, field: str) -> Quantity | None:
    """A non-negative quantity field (text or JSON integer); None when absent or empty."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _INT64_MAX:
        parsed = Quantity(value)
    elif isinstance(value, str) and len(value) <= _MAX_QUANTITY_TEXT:
        try:
            parsed = parse_quantity(value)
        except ValueError as err:
            raise RenderError(f"{field}: {value!r} is not a quantity") from err
    else:
        raise RenderError(f"{field}: want a quantity, got {value!r}"[:200])
    if parsed.sign() < 0:
        raise RenderError(f"{field}: want a non-negative quantity, got {value!r}")
    return parsed
