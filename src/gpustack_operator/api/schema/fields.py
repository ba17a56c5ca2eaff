"""Strict JSON field kinds for the API schemas.

Why this module exists: marshmallow's stock fields are forgiving in ways the Kubernetes API server is not
(``Boolean`` takes ``"yes"`` and ``1``, ``Integer`` takes ``1.0``). These subclasses accept exactly the JSON
the API server accepts, so a Python validation and the CRD's openAPIV3Schema agree on every value. The
``Omit`` policy mirrors Go's ``encoding/json`` tags, which decide which fields a Go client always writes.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

from marshmallow import fields

#: resource.Quantity's canonical pattern, as controller-gen emits it into CRDs.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY = re.compile(QUANTITY_PATTERN)


class Omit(enum.Enum):
    """When ``dump`` leaves a field out, after Go's ``json`` tag of the original field."""

    EMPTY = "empty"
    """``omitempty`` on a value: dropped when absent or zero (``""``, ``0``, ``false``, ``[]``, ``{}``)."""
    NIL = "nil"
    """``omitempty`` on a pointer: dropped only when absent or ``null``; a zero value is kept."""
    NEVER = "never"
    """No ``omitempty``: always written, as the zero value when absent."""


class StrictString(fields.String):
    """A JSON string; nothing else converts to one."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        if not isinstance(value, str):
            raise self.make_error("invalid")
        return value


class StrictBoolean(fields.Boolean):
    """A JSON ``true``/``false``; strings and numbers are errors, not truthy."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> bool:
        if value is True or value is False:
            return value
        raise self.make_error("invalid", input=value)


class StrictInteger(fields.Integer):
    """A JSON integer (never a float, string or boolean), range-checked by its Go width."""

    default_error_messages = {"range": "Must be an integer between {low} and {high}."}  # noqa: RUF012

    def __init__(self, *, fmt: str, low: int, high: int, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)
        self.fmt = fmt
        self.low = low
        self.high = high

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> int:
        number = self._validated(value)
        if not self.low <= number <= self.high:
            raise self.make_error("range", low=self.low, high=self.high)
        return number


class Quantity(fields.Field[str]):
    """A resource.Quantity: a string in canonical form or a JSON integer (``x-kubernetes-int-or-string``).

    Integers load as their decimal string, which is what a Go client writes back.
    """

    default_error_messages = {  # noqa: RUF012
        "invalid": "Not a valid quantity.",
        "pattern": "Not a valid quantity: {input!r} (e.g. 500m, 2, 16Gi).",
    }

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else str(value)

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.make_error("invalid")
        text = str(value)
        if not _QUANTITY.match(text):
            raise self.make_error("pattern", input=text)
        return text


class ObjectMeta(fields.Field[dict[str, Any]]):
    """``metadata``: any JSON object, left for the API server (and kube/) to interpret."""

    default_error_messages = {"invalid": "Not a valid object."}  # noqa: RUF012

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> dict[str, Any] | None:
        return None if value is None else dict(value)

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise self.make_error("invalid")
        return dict(value)
