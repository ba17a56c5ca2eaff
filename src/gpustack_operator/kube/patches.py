"""Builders for RFC 6902 JSON patches: list edits and preconditions that a merge patch cannot express.
And `merge_patch`, RFC 7386 applied, for what must apply a merge patch itself (a Secret-backed API; the
unit tests' recording clients).

A merge patch replaces lists whole and cannot say "only if this still holds". A JSON patch can remove one
element, insert at an index, or `test` a value first, but its paths are JSON pointers in which `/` and `~`
in a key (every label key such as `gpustack.ai/pool`) must be escaped; these helpers do that once, so
callers write `patches.replace(["metadata", "labels", key], value)` and never format a pointer by hand.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

__all__ = ["add", "expect", "expect_resource_version", "merge_patch", "pointer", "remove", "replace"]

Path = str | Iterable[str | int]


def pointer(path: Path) -> str:
    """A JSON pointer from path segments (escaped); a string is taken as an already-built pointer."""
    if isinstance(path, str):
        return path
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def add(path: Path, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": pointer(path), "value": value}


def replace(path: Path, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": pointer(path), "value": value}


def remove(path: Path) -> dict[str, Any]:
    return {"op": "remove", "path": pointer(path)}


def expect(path: Path, value: Any) -> dict[str, Any]:
    """A `test` op (named so pytest never collects it): the whole patch fails unless path holds value."""
    return {"op": "test", "path": pointer(path), "value": value}


def expect_resource_version(resource_version: str) -> dict[str, Any]:
    """Optimistic concurrency: the patch applies only to the object version the caller read.

    Written as a `replace` of metadata.resourceVersion, which the server checks like an update's: a
    stale version answers 409 Conflict (retryable by re-reading), where a failed `test` op answers a
    422 that cannot be told apart from invalid input.
    """
    return replace(["metadata", "resourceVersion"], resource_version)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` removes, anything else replaces (a copy: neither
    argument is modified, and the result shares nothing with `patch`)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
