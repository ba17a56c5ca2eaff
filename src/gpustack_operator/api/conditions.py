"""Reading and setting ``status.conditions`` with metav1.Condition semantics (pure; no I/O).

Why this module exists: every controller that reports on an object (``Active`` on an AdmissionCheck, on the
queues' owners, on an InstanceType) must follow the same rules, or whoever waits on a condition misreads it:

- one entry per type: a new type is appended, an existing one is replaced where it stands;
- ``observedGeneration`` is the ``metadata.generation`` the controller acted on, so a reader can tell a
  verdict on the current spec from one on an older spec;
- ``lastTransitionTime`` moves only when ``status`` moves (a new reason, message or generation is not a
  transition), written as RFC 3339 seconds in UTC (``2025-01-02T03:04:05Z``), as metav1.Time serialises;
- nothing passed in is mutated (objects from the informer cache are shared and read-only): the setter
  returns a new list, and the caller writes status only when it differs from what it read.

A malformed type, status or reason is a bug in the caller, refused here with ValueError instead of as a 422
from kube-apiserver on every retry. Messages longer than the API allows are cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast, get_args

from gpustack_operator.api.types.common import Condition, ConditionStatus

__all__ = ["find_condition", "generation_of", "is_true", "rfc3339", "set_condition", "status_conditions"]

MAX_MESSAGE: Final = 32768
MAX_REASON: Final = 1024
MAX_TYPE: Final = 316
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_TYPE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_STATUSES: Final = frozenset(get_args(ConditionStatus))


def status_conditions(obj: Mapping[str, Any]) -> list[Condition]:
    """The object's conditions (entries without a type are skipped); empty when status has none yet."""
    status = obj.get("status") or {}
    entries = status.get("conditions") or ()
    return [cast(Condition, c) for c in entries if isinstance(c, dict) and "type" in c]


def generation_of(obj: Mapping[str, Any]) -> int | None:
    """``metadata.generation``, or None for an object that has none (not yet created)."""
    value = (obj.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else None


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The first condition of that type, or None."""
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(obj: Mapping[str, Any], type_: str) -> bool:
    """True when the object's condition of that type has status "True"."""
    found = find_condition(status_conditions(obj), type_)
    return found is not None and found.get("status") == "True"


def rfc3339(now: datetime) -> str:
    """``now`` in UTC at seconds precision (``2025-01-02T03:04:05Z``); a naive datetime is refused."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"condition times must be timezone-aware, got naive {now.isoformat()}")
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """``conditions`` with the one of ``type_`` set (a new list; see the module docstring for the rules).

    ``generation`` becomes observedGeneration (None leaves it out); ``now`` is the transition time used only
    when the status changes or the old entry has none. Compare the result with ``conditions`` to decide
    whether status needs writing.
    """
    _check(type_, status, reason)
    old = find_condition(conditions, type_)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    new: Condition = {
        "type": type_,
        "status": status,
        "lastTransitionTime": since or rfc3339(now),
        "reason": reason,
        "message": message[:MAX_MESSAGE],
    }
    if generation is not None:
        new["observedGeneration"] = generation
    if old is None:
        return [*conditions, new]
    # Replace the entry where it stands and drop any duplicates of its type (a list-map allows one).
    return [new if c is old else c for c in conditions if c is old or c.get("type") != type_]


def _check(type_: str, status: str, reason: str) -> None:
    if not (len(type_) <= MAX_TYPE and _TYPE.match(type_)):
        raise ValueError(f"condition type {type_!r} is not a qualified name of at most {MAX_TYPE} characters")
    if status not in _STATUSES:
        raise ValueError(f"condition {type_}: status {status!r} is not one of True, False, Unknown")
    if not (len(reason) <= MAX_REASON and _REASON.match(reason)):
        raise ValueError(
            f"condition {type_}: reason {reason!r} must be 1-{MAX_REASON} characters, start with a letter "
            "and hold only letters, digits, '_', ',' and ':' (CamelCase, e.g. 'Ready')"
        )
