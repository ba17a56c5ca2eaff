"""Bad input an admin must hear about once: a log line naming the object, and a Warning Event on it.

A controller that meets an object it cannot use (a setting that does not parse, a node whose labels yield
an invalid label key, a Devices ledger of an unknown manufacturer) carries on without it, so every other
node and pool keeps converging; the admin learns why from `kubectl describe` and from the worker's log.
Reconciles run again and again over the same object, so a problem is reported only when it is new for
that object and topic (its text changed, or it had been fixed and came back); the recorder folds Events
further (kube.events).
"""

from __future__ import annotations

import logging

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.events import EventSink, object_reference
from gpustack_operator.kube.resources import Resource

__all__ = ["ProblemReporter"]

log = logging.getLogger(__name__)


class ProblemReporter:
    """Reports each (object, topic) problem once, until it is fixed (`report(..., None)`) or changes."""

    def __init__(self, recorder: EventSink | None) -> None:
        self._recorder = recorder
        self._last: dict[tuple[str, str, str], str] = {}

    def report(
        self, resource: Resource, obj: JSONObj, reason: str, problem: str | None, *, topic: str = ""
    ) -> None:
        """Warn about `problem` on `obj` if it is new; None means the object is fine (again)."""
        meta = obj.get("metadata") or {}
        name = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        key = (resource.kind, name, topic)
        if problem is None:
            self._last.pop(key, None)
            return
        if self._last.get(key) == problem:
            return
        self._last[key] = problem
        log.warning("%s %s: %s: %s", resource.kind, name, reason, problem)
        if self._recorder is not None:
            self._recorder.event(object_reference(resource, obj), "Warning", reason, problem)
