"""The schema base class: Go ``encoding/json`` presence rules on top of marshmallow.

Why this module exists: the wire form of our objects must be the one the original Go types produce, so an
admin who compares a Python-written object with a Go-written one sees the same keys. Go writes a field
without ``omitempty`` even when it is zero and drops an ``omitempty`` field when it is zero; marshmallow
does neither. The hooks here apply each field's ``Omit`` policy on load (zero-fill) and on dump (fill, then
drop), so every schema built on ``GoSchema`` round-trips exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from marshmallow import RAISE, Schema, fields, post_dump, post_load, pre_dump, pre_load

from gpustack_operator.api.schema.fields import Omit


def omit_policy(field: fields.Field[Any]) -> Omit:
    """The presence policy a DSL field carries (``Omit.EMPTY`` for foreign fields)."""
    policy = field.metadata.get("omit", Omit.EMPTY)
    assert isinstance(policy, Omit)
    return policy


def zero_of(field: fields.Field[Any]) -> Any:
    """A fresh zero value of a field (Go's zero value of its type)."""
    zero: Callable[[], Any] = field.metadata["zero"]
    return zero()


def is_empty(value: Any) -> bool:
    """Whether Go's ``omitempty`` would drop this JSON value."""
    if value is None or value is False:
        return True
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, (str, list, dict)) and len(value) == 0


class GoSchema(Schema):
    """Base of every API schema; unknown keys are errors, like a strict decoder."""

    description: ClassVar[str] = ""

    class Meta:
        unknown = RAISE

    def _zero_filled(self, data: Any, *, include_required: bool) -> Any:
        if not isinstance(data, Mapping):
            return data  # marshmallow reports the type error with the right path
        filled = dict(data)
        for name, field in self.fields.items():
            if omit_policy(field) is not Omit.NEVER or (field.required and not include_required):
                continue
            if filled.get(name) is None:
                filled[name] = zero_of(field)
        return filled

    @pre_load
    def _fill_on_load(self, data: Any, **_: Any) -> Any:
        # Required fields stay missing so that the "required" error is reported.
        return self._zero_filled(data, include_required=False)

    @post_load
    def _drop_nulls(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        # kube-apiserver prunes a null in a non-nullable field, so null reads as absent (a nil pointer).
        return {k: v for k, v in data.items() if not (v is None and omit_policy(self.fields[k]) is Omit.NIL)}

    @pre_dump
    def _fill_on_dump(self, data: Any, **_: Any) -> Any:
        return self._zero_filled(data, include_required=True)

    @post_dump
    def _drop_omitted(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        for name, field in self.fields.items():
            if name not in data:
                continue
            policy = omit_policy(field)
            value = data[name]
            if (policy is Omit.EMPTY and is_empty(value)) or (policy is Omit.NIL and value is None):
                del data[name]
        return data
