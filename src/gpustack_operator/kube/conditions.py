"""Reading `status.conditions` of any object, which may be absent, null or half-written by its controller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The object's conditions by type; empty when it has none yet."""
    status = obj.get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or [] if isinstance(c, dict) and "type" in c}


def is_true(obj: Mapping[str, Any], condition: str) -> bool:
    """True when the object's condition of that type has status "True"."""
    return conditions(obj).get(condition, {}).get("status") == "True"
