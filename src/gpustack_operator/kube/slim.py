"""Make cached objects small: drop managedFields and share one copy of every key and short string.

An informer keeps every object of its kind for the life of the process, so a cluster with thousands of
Nodes costs what their dicts cost. Two things dominate. `metadata.managedFields` is often half of an
object and no reconciler reads it. And json.loads gives every parsed document its own copy of each key
and value string: the 2,000 Nodes of a cluster repeat the same label keys, label values, condition
types and quantities, yet an object that arrived in its own watch event shares none of them. Rebuilding
each object with keys and short values taken from a shared table roughly halves a cached Node
(tests/bench/bench_informer.py prints the numbers).

The table only grows while objects keep bringing new unique strings (names, uids, versions), so the
informer resets it once it outgrows its cache; objects already slimmed keep the strings they share.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Interner"]

SHORT = 64
"""Strings up to this long are shared (label values are at most 63); longer ones are rarely repeated."""


class Interner:
    """Rebuilds JSON objects so that equal keys and short strings are one object, not many."""

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def reset(self) -> None:
        """Forget the table (objects already slimmed keep sharing what they share)."""
        self._memo = {}

    def slim(self, obj: dict[str, Any], *, keep_managed_fields: bool = False) -> dict[str, Any]:
        """A copy of obj sharing keys and short strings, without metadata.managedFields unless kept."""
        meta = obj.get("metadata")
        if not keep_managed_fields and isinstance(meta, dict) and "managedFields" in meta:
            obj = dict(obj, metadata={k: v for k, v in meta.items() if k != "managedFields"})
        return self._dict(obj)

    def _dict(self, obj: dict[str, Any]) -> dict[str, Any]:
        memo = self._memo
        return {memo.setdefault(key, key): self._value(value) for key, value in obj.items()}

    def _value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._memo.setdefault(value, value) if len(value) <= SHORT else value
        if kind is dict:
            return self._dict(value)
        if kind is list:
            return [self._value(item) for item in value]
        return value
