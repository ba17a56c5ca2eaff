"""Typed shape of Setting (gpustack.ai/v1, served by the aggregated API from the gpustack-settings Secret).

Why this module exists: the aggregated API server builds Setting objects from the settings catalog and the
Secret, and accepts ``spec.value`` writes; this names those fields for mypy.
"""

from typing import NotRequired, TypedDict

from gpustack_operator.api.types.common import ObjectMeta


class SettingSpec(TypedDict, total=False):
    value: str
    """The value to write (write-only input); absent means "no change"."""


class SettingStatus(TypedDict):
    description: str
    editable: bool
    sensitive: bool
    value: str
    """The current value, or ``(sensitive)`` for a sensitive setting."""


class Setting(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: SettingSpec
    status: NotRequired[SettingStatus]
