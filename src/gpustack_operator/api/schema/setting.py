"""Schema source of Setting (gpustack.ai/v1): one key of the gpustack-settings Secret, served by the
aggregated API server (no CRD).

Why this module exists: the aggregated API validates ``spec.value`` writes and publishes the OpenAPI of
Setting from the same declaration.
"""

from __future__ import annotations

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.apitype import ApiType, kind_schema
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.types.setting import Setting

_Spec = dsl.struct(
    "SettingSpec",
    "The write side of a setting.",
    {
        "value": dsl.string("The value to write (write-only); absent means no change.", omit=Omit.NIL),
    },
)

_Status = dsl.struct(
    "SettingStatus",
    "The current state of a setting.",
    {
        "description": dsl.string("What the setting does.", omit=Omit.NEVER),
        "editable": dsl.boolean("Whether the value can be written.", omit=Omit.NEVER),
        "sensitive": dsl.boolean("Whether the value is hidden.", omit=Omit.NEVER),
        "value": dsl.string("The current value, or (sensitive).", omit=Omit.NEVER),
    },
)

SETTING: ApiType[Setting] = ApiType(
    group="gpustack.ai",
    version="v1",
    kind="Setting",
    plural="settings",
    namespaced=True,
    schema=kind_schema(
        "Setting",
        "Setting is one operator setting (a key of the gpustack-settings Secret).",
        spec=_Spec,
        status=_Status,
    ),
)
