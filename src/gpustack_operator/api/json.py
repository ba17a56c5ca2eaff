"""The one JSON object type of the tree, and the tolerant readers of its fields.

Why this module exists: every layer handles Kubernetes objects as parsed JSON (a dict of str to anything),
and one alias names that type everywhere. Objects are also written by others (admins, Kueue, half-written
updates), so a field may hold the wrong shape; the readers here take a field as an object, a list or a
string and read anything else as empty, for code that must carry on over a malformed field. Pure, and in
the lowest layer, so every package may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

__all__ = ["JSONObj", "as_list", "as_mapping", "as_mappings", "as_str", "controlled_by"]

JSONObj: TypeAlias = dict[str, Any]
"""A JSON object as json.loads gives it: a Kubernetes object, or any object inside one."""


def as_mapping(value: object) -> Mapping[str, Any]:
    """The value when it is an object, else an empty one (a half-written field reads as absent)."""
    return value if isinstance(value, Mapping) else {}


def as_mappings(value: object) -> list[Mapping[str, Any]]:
    """The objects of a list field, skipping anything else (a non-list reads as empty)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def as_list(value: object) -> list[Any]:
    """The value when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: object) -> str:
    """The value when it is a string, else "" (a non-string reads as unset)."""
    return value if isinstance(value, str) else ""


def controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """`obj`'s controlling ownerReference names this very `owner` (its UID), not an earlier namesake."""
    uid = as_str(as_mapping(owner.get("metadata")).get("uid"))
    refs = as_mappings(as_mapping(obj.get("metadata")).get("ownerReferences"))
    return bool(uid) and any(ref.get("controller") and ref.get("uid") == uid for ref in refs)
