"""Record events.k8s.io/v1 Events about objects, folding repeats into one Event's series.

Events are how an admin learns from `kubectl describe` why the operator refuses an object. A reconcile
that keeps failing would write one Event per attempt and flood etcd, so an event with the same subject,
type, reason, action and note as one written less than `window` seconds ago only bumps that Event's
`series.count` (and `lastObservedTime`), and those bumps are written at most every `flush_interval`.

Recording never blocks and never raises: `event()` queues the event and the `run()` task (supervised by
the caller) writes it. Events are best effort; a failed write is logged and dropped, and a full queue
drops new events rather than slowing reconciles down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal, Protocol

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.lease import micro_time
from gpustack_operator.kube.resources import EVENTS, Resource
from gpustack_operator.kube.verbs import ObjectVerbs
from gpustack_operator.runtime import Clock, MonotonicClock

__all__ = ["EventClient", "EventRecorder", "EventSink", "EventType", "object_reference"]

log = logging.getLogger(__name__)
EventType = Literal["Normal", "Warning"]
NOTE_LIMIT = 1024  # bytes the API accepts in `note`


EventClient = ObjectVerbs
"""The verbs this module needs; kube.client.Client has them."""


class EventSink(Protocol):
    """Where a controller reports an event (an EventRecorder; a test's fake)."""

    def event(
        self, regarding: JSONObj, type_: EventType, reason: str, note: str, *, action: str = "Reconcile"
    ) -> None: ...


def object_reference(resource: Resource, obj: JSONObj) -> JSONObj:
    """The `regarding` reference of an object (list items may lack apiVersion/kind, the Resource has them)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": resource.api_version, "kind": resource.kind, "name": meta.get("name", "")}
    for field in ("namespace", "uid", "resourceVersion"):
        if meta.get(field):
            ref[field] = meta[field]
    return ref


_IDENTITY = ("apiVersion", "kind", "namespace", "name", "uid")


@dataclass(frozen=True)
class _Occurrence:
    """What makes two events the same; the subject's resourceVersion does not."""

    subject: tuple[str, ...]
    type: EventType
    reason: str
    action: str
    note: str


@dataclass
class _Series:
    regarding: JSONObj
    name: str
    namespace: str
    count: int  # occurrences seen
    written: int  # count the server has
    last_seen: float
    last_write: float


class EventRecorder:
    """Writes Events for one reporting controller instance (see the module docstring)."""

    def __init__(
        self,
        client: EventClient,
        *,
        instance: str,
        controller: str = "gpustack.ai/worker",
        clock: Clock | None = None,
        window: float = 600.0,
        flush_interval: float = 10.0,
        max_queued: int = 1000,
        max_series: int = 4096,
    ) -> None:
        self._client = client
        self._instance = instance[:128]
        self._controller = controller
        self._clock: Clock = clock or MonotonicClock()
        self._window = window
        self._flush_interval = flush_interval
        self._queue: asyncio.Queue[tuple[_Occurrence, JSONObj]] = asyncio.Queue(max_queued)
        self._series: OrderedDict[_Occurrence, _Series] = OrderedDict()
        self._max_series = max_series

    def event(
        self, regarding: JSONObj, type_: EventType, reason: str, note: str, *, action: str = "Reconcile"
    ) -> None:
        """Queue an event about `regarding` (an `object_reference()`); never blocks."""
        subject = tuple(str(regarding.get(field, "")) for field in _IDENTITY)
        occurrence = _Occurrence(subject, type_, reason, action, _clip(note))
        try:
            self._queue.put_nowait((occurrence, regarding))
        except asyncio.QueueFull:
            log.warning("Event queue full; dropped %s %s for %s", type_, reason, regarding.get("name"))

    async def run(self) -> None:
        """Write queued events until cancelled; pending series counts are flushed on the way."""
        while True:
            try:
                async with asyncio.timeout(self._flush_interval):
                    item = await self._queue.get()
            except TimeoutError:
                pass
            else:
                await self._emit(*item)
            await self.drain()

    async def drain(self) -> None:
        """Write what is queued now, then the series counts that are due."""
        while not self._queue.empty():
            await self._emit(*self._queue.get_nowait())
        await self.flush()

    async def _emit(self, occurrence: _Occurrence, regarding: JSONObj) -> None:
        now = self._clock.now()
        series = self._series.get(occurrence)
        if series is None or now - series.last_seen > self._window:
            await self._create(occurrence, regarding, now)
            return
        self._series.move_to_end(occurrence)
        series.count += 1
        series.last_seen = now
        if now - series.last_write >= self._flush_interval:
            await self._write_series(occurrence, series)

    async def flush(self, *, force: bool = False) -> None:
        """Write series counts that changed and are due (all of them with `force`)."""
        now = self._clock.now()
        for occurrence, series in list(self._series.items()):
            if series.count != series.written and (force or now - series.last_write >= self._flush_interval):
                await self._write_series(occurrence, series)

    async def _create(self, occurrence: _Occurrence, regarding: JSONObj, now: float) -> None:
        namespace = regarding.get("namespace") or "default"
        name = f"{regarding.get('name', 'object')[:200]}.{time.time_ns():x}"
        body = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(),
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "action": occurrence.action,
            "reason": occurrence.reason,
            "note": occurrence.note,
            "type": occurrence.type,
            "regarding": regarding,
        }
        try:
            await self._client.create(EVENTS, body, namespace)
        except errors.KubeError as e:
            log.warning("Event %s for %s/%s not recorded: %s", occurrence.reason, namespace, name, e)
            return
        self._series[occurrence] = _Series(regarding, name, namespace, 1, 1, now, now)
        while len(self._series) > self._max_series:
            self._series.popitem(last=False)

    async def _write_series(self, occurrence: _Occurrence, series: _Series) -> None:
        series.last_write = self._clock.now()
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time()}}
        try:
            await self._client.patch(EVENTS, series.name, patch, namespace=series.namespace)
        except errors.NotFound:  # expired by the apiserver's event TTL: start a new one
            del self._series[occurrence]
            await self._create(occurrence, series.regarding, series.last_seen)
            return
        except errors.KubeError as e:
            log.warning("Event %s/%s series not updated: %s", series.namespace, series.name, e)
            return
        series.written = series.count


def _clip(note: str) -> str:
    data = note.encode()
    return note if len(data) <= NOTE_LIMIT else data[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."
