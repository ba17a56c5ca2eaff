"""The TypedDicts in api.types name exactly their schema's fields; keys Go always writes are required.

No ``from __future__ import annotations`` here: on Python 3.11 it hides NotRequired from a TypedDict.
"""

import typing
from typing import Any, NotRequired, Required

import pytest
from marshmallow import fields

from gpustack_operator.api.schema import DEVICES, INSTANCE, INSTANCE_TYPE, SETTING, ApiType
from gpustack_operator.api.schema.base import GoSchema, omit_policy
from gpustack_operator.api.schema.fields import ObjectMeta as MetadataField
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.types.common import ObjectMeta
from gpustack_operator.api.types.devices import Devices
from gpustack_operator.api.types.instance import Instance
from gpustack_operator.api.types.instancetype import InstanceType
from gpustack_operator.api.types.setting import Setting


def _strip(hint: Any) -> Any:
    """The TypedDict behind ``NotRequired[list[X]]`` and the like, or None for scalars."""
    while typing.get_origin(hint) in (NotRequired, Required, list):
        hint = typing.get_args(hint)[0]
    return hint if typing.is_typeddict(hint) else None


def _nested_schema(field: fields.Field[Any]) -> type[GoSchema] | None:
    if isinstance(field, fields.List):
        field = field.inner
    if isinstance(field, fields.Nested) and isinstance(field.nested, type):
        return field.nested
    return None


def mismatches(shape: Any, schema: type[GoSchema], path: str = "") -> list[str]:
    """Where ``shape`` (a TypedDict) and ``schema`` disagree on keys, requiredness or nesting."""
    declared = schema().fields
    hints = typing.get_type_hints(shape, include_extras=True)
    problems = [f"{path}{k}: only in the TypedDict" for k in hints if k not in declared]
    problems += [f"{path}{k}: only in the schema" for k in declared if k not in hints]
    for name, field in declared.items():
        if name not in hints:
            continue
        always = omit_policy(field) is Omit.NEVER
        if always != (name in shape.__required_keys__):
            problems.append(f"{path}{name}: required in the TypedDict must equal always-written")
        nested, inner = _nested_schema(field), _strip(hints[name])
        if isinstance(field, MetadataField):
            problems += [] if inner is ObjectMeta else [f"{path}{name}: metadata must be typed ObjectMeta"]
        elif (nested is None) != (inner is None):
            problems.append(f"{path}{name}: nested in only one of them")
        elif nested is not None:
            problems += mismatches(inner, nested, f"{path}{name}.")
    return problems


@pytest.mark.parametrize(
    ("shape", "api"),
    [
        pytest.param(InstanceType, INSTANCE_TYPE, id="instancetype"),
        pytest.param(Devices, DEVICES, id="devices"),
        pytest.param(Instance, INSTANCE, id="instance"),
        pytest.param(Setting, SETTING, id="setting"),
    ],
)
def test_typed_shape_matches_schema(shape: Any, api: ApiType[Any]) -> None:
    assert mismatches(shape, api.schema) == []


class _DriftedAllocation(typing.TypedDict):
    id: str
    index: NotRequired[int]
    mode: int
    spare: int


def test_the_check_catches_a_drifted_shape() -> None:
    from gpustack_operator.api.schema.devices import AcceleratorAllocation

    assert sorted(mismatches(_DriftedAllocation, AcceleratorAllocation)) == [
        "allocated: only in the schema",
        "index: required in the TypedDict must equal always-written",
        "oversold: only in the schema",
        "remaining: only in the schema",
        "spare: only in the TypedDict",
    ]
