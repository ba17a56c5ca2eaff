"""Reading `status.conditions` of any object, which may be absent, null or half-written by its controller.

The rules live in api.conditions (pure, shared with the controllers that set conditions); this module keeps
the by-type view its callers here and in the sandbox use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_operator.api.conditions import is_true, status_conditions

__all__ = ["conditions", "is_true"]


def conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The object's conditions by type; empty when it has none yet."""
    return {c["type"]: dict(c) for c in status_conditions(obj)}
