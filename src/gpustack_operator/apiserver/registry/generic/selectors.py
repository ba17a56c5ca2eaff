"""Label and field selectors of a LIST, parsed only as far as a cached list can answer them exactly.

Why this module exists: the v1 InstanceType proxy serves lists from the worker's informer cache
(cachedreads.py), so it must filter the cache as kube-apiserver filters etcd. Rather than
reimplement every corner of kube's selector grammar, it parses the forms people and controllers write,
checked as strictly as kube checks them, and answers None for everything else; the caller then asks the
API server, which filters (or refuses with its own 400) exactly as before.

Parsed label forms: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas,
keys a qualified name with an optional DNS-subdomain prefix, values a label value (empty allowed after
`=`/`!=`). Not parsed: `k>n`/`k<n`, empty `in ()`, anything that does not validate. Parsed field forms:
`metadata.name=x`, `metadata.name==x`, `metadata.name!=x`, joined by commas; not parsed: any other field
(including `metadata.namespace`) and escaped values (a backslash).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj

__all__ = ["Match", "parse_field_selector", "parse_label_selector", "parse_selectors"]

Match = Callable[[JSONObj], bool]

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
_KEY = rf"(?:{_PREFIX}/)?{_NAME}"
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(rf"(?:{_NAME})?")
_EXISTS = re.compile(rf"\s*(!?)\s*({_KEY})\s*")
_EQUALS = re.compile(rf"\s*({_KEY})\s*(==|=|!=)\s*(\S*)\s*")
_SET = re.compile(rf"\s*({_KEY})\s+(in|notin)\s*\((.*)\)\s*")


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "exists", "!exists", "in", "notin" ("=" is "in" one value, "!=" is "notin")
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.op == "in" else not inside


def _valid_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return len(prefix) <= 253 and len(name) <= 63 and _KEY_RE.fullmatch(key) is not None


def _valid_value(value: str) -> bool:
    return len(value) <= 63 and _VALUE_RE.fullmatch(value) is not None


def _terms(selector: str) -> list[str] | None:
    """Top-level comma-separated terms (commas inside `(...)` belong to a set); None if unbalanced."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return None
        elif ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    if depth != 0:
        return None
    terms.append(selector[start:])
    return terms


def _requirement(term: str) -> _Requirement | None:
    if m := _SET.fullmatch(term):
        key, op, raw = m.groups()
        values = [v.strip() for v in raw.split(",")]
        if not _valid_key(key) or not all(v and _valid_value(v) for v in values):
            return None
        return _Requirement(key, op, frozenset(values))
    if m := _EQUALS.fullmatch(term):
        key, op, value = m.groups()
        if not _valid_key(key) or not _valid_value(value):
            return None
        return _Requirement(key, "notin" if op == "!=" else "in", frozenset((value,)))
    if m := _EXISTS.fullmatch(term):
        bang, key = m.groups()
        if not _valid_key(key):
            return None
        return _Requirement(key, "!exists" if bang else "exists")
    return None


def parse_label_selector(selector: str) -> Match | None:
    """A predicate on an object's labels, or None when this module does not parse the selector."""
    if not selector.strip():
        return lambda obj: True
    terms = _terms(selector)
    if terms is None:
        return None
    requirements = []
    for term in terms:
        req = _requirement(term)
        if req is None:
            return None
        requirements.append(req)

    def match(obj: JSONObj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return match


def parse_field_selector(selector: str) -> Match | None:
    """A predicate on `metadata.name`, or None for any other field or form (see the module doc)."""
    if not selector.strip():
        return lambda obj: True
    if "\\" in selector:
        return None
    wanted: list[tuple[bool, str]] = []
    for term in selector.split(","):
        field, op, value = _field_term(term)
        if field != "metadata.name" or not op or "=" in value or "!" in value:
            return None
        wanted.append((op != "!=", value.strip()))

    def match(obj: JSONObj) -> bool:
        name = (obj.get("metadata") or {}).get("name")
        return all((name == value) is equal for equal, value in wanted)

    return match


def _field_term(term: str) -> tuple[str, str, str]:
    for op in ("!=", "==", "="):
        field, found, value = term.partition(op)
        if found:
            return field.strip(), op, value
    return term.strip(), "", ""


def parse_selectors(labels: str, fields: str) -> Match | None:
    """Both selectors as one predicate, or None when either is not parsed."""
    by_label = parse_label_selector(labels)
    by_field = parse_field_selector(fields)
    if by_label is None or by_field is None:
        return None
    return lambda obj: by_label(obj) and by_field(obj)
