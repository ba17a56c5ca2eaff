"""WATCH of a proxied resource from the worker's informer: many client watches, one upstream watch.

Why this module exists: proxying a watch opens one upstream watch per client watcher and decodes and
re-renders every event once per watcher; 50 watchers of v1 InstanceTypes saw each change 3-6x later
than watchers of the CRD itself (tests/bench/bench_apiserver.py; issue 11 wants 1.3x). The worker's
shared informer already receives every change once. `WatchCache` hooks it (`add_handler`) and keeps the
last `capacity` changes in a ring ordered by resourceVersion, so every client watch is served from the
ring and the informer's one upstream watch, the way kube-apiserver's own watch cache serves clients from
its one etcd watch. `open` answers a watch request's forwarded query parameters with a `CachedWatch`,
an async iterator of stored-version events shaped like the lines of an upstream watch (`{"type",
"object"}`, rendered by the proxy exactly as upstream ones), or None: then the proxy opens the upstream
watch as before. Versions compare as integers, as cachedreads.py explains.

resourceVersion rules (guide §3.4):
- "" or "0": synthetic ADDED for every matching cached object (by name), then live changes. "" means
  "most recent" to kube: it is served only once the informer has seen the highest version a write
  through the proxy answered with (the caller's floor, as for cached lists); until then upstream.
- N the ring still covers (N at or after the version it starts from): the changes after N, then live.
- N older than the ring: one ERROR event carrying kube's 410 Expired Status ("too old resource version:
  N (oldest)") and the end; the client relists, as it does when kube's own cache has moved on.
- N newer than the informer has seen: upstream, at once. The informer's version moves only with
  InstanceType events and upstream bookmarks (about a minute apart), while N may be any etcd revision
  (a list answered by the API server carries the revision of the moment, whatever kind made it): waiting
  could take a minute, and the API server answers it exactly and now.
- `sendInitialEvents`, `resourceVersionMatch`, a selector selectors.py does not parse, a bad
  `timeoutSeconds` or `allowWatchBookmarks`, and any parameter not in `WATCH_PARAMS`: upstream.

Selectors are applied per change with transitions, as kube's watch cache does: an object that starts
matching is ADDED, one that stops matching is DELETED (its previous state with the change's version), a
delete of an object that did not match is not sent. `allowWatchBookmarks` gives a BOOKMARK carrying the
informer's latest version every `bookmark_every` seconds while the watcher is caught up (never ahead of
an event it has not been sent). The stream ends at `timeoutSeconds`, or kube's random 30-60 minutes.

Continuity: the ring is only valid while the informer's stream of events is unbroken. A relist (after a
410 upstream, or its first list) makes handler calls for differences, not watch events: when the
informer loses its version, and when it has listed again (it tells its break listeners, even of a
relist that changed nothing), every cached stream ends (clients re-watch from
their last version and get a 410, or a replay if it is still covered) and the ring restarts at the
informer's new version. A reconnect from the informer's last version keeps continuity.

Slow watchers: each stream reads the shared ring through its own cursor, so an event costs the informer
one append and one wake-up, whatever the number of watchers, and a watcher's queue is the part of the
ring it has not read yet: bounded by `capacity`. A watcher that falls further behind (its next change was
dropped from the ring) is ended, as kube ends a watcher whose buffer is full; it never stalls the
informer or other watchers.

Events carry what the informer caches: the worker's InstanceType informer keeps `metadata.managedFields`
(the aggregated API asks it to, for plain GETs), so a watch shows them as the API server's would; an
informer that drops them (kube/slim.py's default) gives events without them.

Events are shared between watchers and with the informer's store: consumers must not mutate them.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import random
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.registry.generic.cachedreads import Informed, decimal, object_version
from gpustack_operator.apiserver.registry.generic.selectors import Match, parse_selectors
from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.kube.informer import EventHandler
from gpustack_operator.kube.resources import Resource
from gpustack_operator.settings.admission import parse_bool

__all__ = ["WATCH_PARAMS", "CachedWatch", "Encode", "Events", "WatchCache", "Watchable", "watch_cache"]

log = logging.getLogger(__name__)

Events = AsyncIterator[JSONObj]
"""Stored-version watch events, `{"type": ..., "object": ...}`, as an upstream watch's lines decode."""
Encode = Callable[[JSONObj, bool], bytes]
"""An event as one line of the client's stream; the flag: it is the stream's first."""

WATCH_PARAMS = frozenset(
    {
        "watch",
        "resourceVersion",
        "labelSelector",
        "fieldSelector",
        "timeoutSeconds",
        "allowWatchBookmarks",
        "pretty",
    }
)
"""Query parameters a cached watch honours (or ignores, as kube does); any other: upstream."""
ENCODED = 64
"""Encoded events remembered for the next watchers that send the same event the same way."""
SELECTORS = 256
"""Distinct selector texts whose parse is shared (beyond that, each watch parses its own)."""
SEEN = 16
"""Selectors whose view of one change is kept with it (the ring holds CAPACITY changes)."""
CAPACITY = 1000
"""Changes kept: the oldest version a watch may resume from, and the most a watcher may lag."""
BOOKMARK_EVERY = 60.0
"""Seconds between bookmarks, kube's own frequency."""
MIN_REQUEST_TIMEOUT = 1800.0
"""A watch without `timeoutSeconds` lasts this times (1 + random), as kube-apiserver's."""


@runtime_checkable
class Watchable(Informed, Protocol):
    """The part of kube.informer.Informer a watch cache reads and hooks."""

    lists: int

    def add_handler(self, handler: EventHandler) -> None: ...

    def add_break_listener(self, listener: Callable[[], None]) -> None: ...


@dataclass(frozen=True, slots=True)
class _Change:
    """One change the informer saw: the upstream event, and the object before it for a MODIFIED."""

    version: int
    event: JSONObj
    before: JSONObj | None
    seen: dict[Match, JSONObj | None] = field(default_factory=dict)
    """`seen_through` per selector, worked out once for all the watchers that share it."""

    def seen_through(self, match: Match | None) -> JSONObj | None:
        """The event a watcher with this selector gets, or None (`match` None: no selector)."""
        if match is None:
            return self.event
        try:
            return self.seen[match]
        except KeyError:
            event = self._through(match)
            if len(self.seen) < SEEN:
                self.seen[match] = event
            return event

    def _through(self, match: Match) -> JSONObj | None:
        kind, obj = self.event["type"], self.event["object"]
        now = kind != "DELETED" and match(obj)
        if kind == "MODIFIED":
            was = self.before is not None and match(self.before)
        else:
            was = kind == "DELETED" and match(obj)
        if now:
            return self.event if was or kind == "ADDED" else {"type": "ADDED", "object": obj}
        if not was:
            return None
        if kind == "DELETED" or self.before is None:
            return self.event
        meta = dict(self.before.get("metadata") or {}, resourceVersion=str(self.version))
        return {"type": "DELETED", "object": {**self.before, "metadata": meta}}


class WatchCache:
    """The recent changes of one informer, and the client watches served from them; see the module doc."""

    def __init__(
        self,
        stored: Resource,
        informer: Watchable,
        *,
        capacity: int = CAPACITY,
        bookmark_every: float = BOOKMARK_EVERY,
    ) -> None:
        self.stored = stored
        self.informer = informer
        self.capacity = capacity
        self.bookmark_every = bookmark_every
        self.served = self.passed = self.expired = self.overflowed = 0
        """Watches answered here, left to the API server, ended with a 410, and ended for lagging."""
        self._changes: list[_Change] = []
        self._first = 0
        """The sequence number of `_changes[0]`; numbers keep growing across restarts."""
        self._since: int | None = None
        """Every change after this version is in the ring; None: no continuity now."""
        self._lists = -1
        """The informer's list count the ring belongs to."""
        self._epoch = 0
        """Bumped when continuity breaks: streams opened in an older epoch end."""
        self._waiters: set[asyncio.Future[None]] = set()
        """The caught-up streams' wake-ups: resolved all at once by the next change or break."""
        self._selectors: dict[tuple[str, str], Match | None] = {}
        """Parsed selectors by their text, so watchers with the same selector share one Match (and each
        change's `seen` entry for it); at most SELECTORS kept."""
        self._encoded: dict[tuple[int, bool, Hashable], tuple[JSONObj, bytes]] = {}
        self._attaching = True
        informer.add_handler(self)  # replays the cached objects as adds: not changes, ignored
        self._attaching = False
        informer.add_break_listener(self._follow)  # a 410 or a relist ends the streams at once

    # ---- the informer's handler -------------------------------------------------------------------------
    def on_add(self, obj: JSONObj) -> None:
        self._record("ADDED", obj, None)

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        self._record("MODIFIED", new, old)

    def on_delete(self, obj: JSONObj) -> None:
        self._record("DELETED", obj, None)

    def _record(self, kind: str, obj: JSONObj, before: JSONObj | None) -> None:
        if self._attaching or not self._continuous():
            return
        version = object_version(obj)
        last = self._changes[-1].version if self._changes else self._since
        if version is None or last is None or version <= last:
            log.warning("watch cache of %s: change %s after %s", self.stored.plural, version, last)
            self._break()  # restarts at the informer's version, once it has taken this change
            return
        self._changes.append(_Change(version, {"type": kind, "object": obj}, before))
        extra = len(self._changes) - self.capacity
        if extra > 0:
            self._since = self._changes[extra - 1].version
            del self._changes[:extra]
            self._first += extra
        self._wake()

    # ---- continuity -------------------------------------------------------------------------------------
    def _follow(self) -> None:
        self._continuous()

    def _continuous(self) -> bool:
        """Whether the ring continues the informer's events now; restarts it after a relist."""
        informer = self.informer
        version = decimal(informer.resource_version)
        if version is None or not informer.has_synced():
            self._break()  # a 410 upstream, or a (re)list under way: its differences are not events
            return False
        if informer.lists != self._lists or self._since is None:
            self._break()
            self._lists, self._since = informer.lists, version
        return True

    def _break(self) -> None:
        """End every stream and empty the ring."""
        if self._since is None and not self._changes:
            return
        self._first += len(self._changes)
        self._changes.clear()
        self._since = None
        self._epoch += 1
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- client watches ---------------------------------------------------------------------------------
    def open(self, params: Mapping[str, str], *, floor: int = 0) -> CachedWatch | None:
        """The events for a watch with these query parameters, or None: watch upstream instead.

        `floor`: the highest version a write through the proxy answered with (a watch from "" waits for
        the informer to reach it by going upstream, as a cached list does).
        """
        stream = self._open(params, floor)
        if stream is None:
            self.passed += 1
        else:
            self.served += 1
        return stream

    def _open(self, params: Mapping[str, str], floor: int) -> CachedWatch | None:
        if not params.keys() <= WATCH_PARAMS:
            return None
        try:
            bookmarks = parse_bool(params.get("allowWatchBookmarks") or "false")  # kube reads it as Go does
        except ValueError:
            return None
        seconds = decimal(params.get("timeoutSeconds", "0") or "0")
        labels, fields = params.get("labelSelector", ""), params.get("fieldSelector", "")
        match = self._selector(labels, fields)
        if seconds is None or match is None:
            return None
        if not self._continuous():
            return None
        latest = decimal(self.informer.resource_version) or 0
        wanted = params.get("resourceVersion", "")
        stream = CachedWatch(
            self,
            match=match if labels.strip() or fields.strip() else None,
            bookmarks=bookmarks,
            seconds=float(seconds) or MIN_REQUEST_TIMEOUT * (1 + random.random()),
        )
        if wanted in ("", "0"):
            if not wanted and latest < floor:
                return None
            current = sorted(self.informer.store.list(), key=lambda obj: str(obj["metadata"].get("name", "")))
            stream.start(self._next, [{"type": "ADDED", "object": obj} for obj in current if match(obj)])
            return stream
        version = int(wanted)  # the proxy refuses a resourceVersion that is not a number
        if version > latest:
            return None
        if self._since is None or version < self._since:
            self.expired += 1
            message = f"too old resource version: {version} ({self._since})"
            stream.start(None, [{"type": "ERROR", "object": StatusError(410, "Expired", message).body()}])
            return stream
        after = bisect.bisect_right(self._changes, version, key=lambda change: change.version)
        stream.start(self._first + after, [])
        return stream

    def _selector(self, labels: str, fields: str) -> Match | None:
        key = (labels, fields)
        try:
            return self._selectors[key]
        except KeyError:
            match = parse_selectors(labels, fields)
            if len(self._selectors) < SELECTORS:
                self._selectors[key] = match
            return match

    def encoded(self, event: JSONObj, first: bool, how: Hashable, encode: Encode) -> bytes:
        """`encode(event, first)`, done once for all the watchers sent this event the same way (`how`).

        Watchers without a selector, or whose selector lets a change through unchanged, are sent the
        ring's own event object: 50 watchers of one change cost one rendering, not 50.
        """
        key = (id(event), first, how)
        known = self._encoded.get(key)
        if known is not None and known[0] is event:  # the event is held here: its id is not reused
            return known[1]
        line = encode(event, first)
        self._encoded[key] = (event, line)
        if len(self._encoded) > ENCODED:
            del self._encoded[next(iter(self._encoded))]
        return line

    @property
    def _next(self) -> int:
        """The sequence number the next change will have."""
        return self._first + len(self._changes)

    def _bookmark(self) -> JSONObj:
        return {
            "type": "BOOKMARK",
            "object": {
                "apiVersion": self.stored.api_version,
                "kind": self.stored.kind,
                "metadata": {"resourceVersion": self.informer.resource_version},
            },
        }


def watch_cache(stored: Resource, informer: Informed | None) -> WatchCache | None:
    """A WatchCache over `informer`, or None when there is none or it cannot be hooked (watch upstream).

    Make one per informer, when the proxy over it is built (the worker builds one proxy per informer):
    each adds a handler to the informer.
    """
    return WatchCache(stored, informer) if isinstance(informer, Watchable) else None


class CachedWatch:
    """One client's watch served from a WatchCache: first `pending`, then the ring from its cursor."""

    def __init__(self, cache: WatchCache, *, match: Match | None, bookmarks: bool, seconds: float) -> None:
        self._cache = cache
        self._match = match
        self._bookmarks = bookmarks
        self._epoch = cache._epoch
        self._pending: deque[JSONObj] = deque()
        self._cursor: int | None = None
        now = asyncio.get_running_loop().time()
        self._deadline = now + seconds
        self._next_bookmark = now + cache.bookmark_every
        self._timer: asyncio.TimerHandle | None = None
        self._waiter: asyncio.Future[None] | None = None

    def start(self, cursor: int | None, pending: list[JSONObj]) -> None:
        """Send `pending` first, then the changes from sequence number `cursor` (None: none, end)."""
        self._cursor = cursor
        self._pending.extend(pending)

    def __aiter__(self) -> CachedWatch:
        return self

    async def __anext__(self) -> JSONObj:
        if self._pending:
            return self._pending.popleft()
        cache = self._cache
        loop = asyncio.get_running_loop()
        while self._cursor is not None:
            if cache._epoch != self._epoch:  # the informer's break listener bumps it at once
                self._end("the informer relisted")
                break
            if self._cursor < cache._first:
                cache.overflowed += 1
                self._end("the watcher fell behind")
                break
            if self._cursor < cache._next:
                change = cache._changes[self._cursor - cache._first]
                self._cursor += 1
                event = change.seen_through(self._match)
                if event is not None:
                    return event
                continue
            now = loop.time()
            if now >= self._deadline:
                self._end("timeout")
                break
            if self._bookmarks and now >= self._next_bookmark:
                self._next_bookmark = now + cache.bookmark_every
                return cache._bookmark()
            await self._sleep(min(self._deadline, self._next_bookmark) if self._bookmarks else self._deadline)
        raise StopAsyncIteration

    async def _sleep(self, until: float) -> None:
        """Until the cache's next change or break, or `until` (loop time), whichever comes first.

        The timer outlives one sleep: it is set again only when `until` moves (a bookmark was sent), so
        a change costs each caught-up stream one future, not a timer scheduled and cancelled.
        """
        loop = asyncio.get_running_loop()
        if self._timer is None or self._timer.when() != until:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(until, self._ring)
        waiter = self._waiter = loop.create_future()
        self._cache._waiters.add(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            self._end("cancelled")
            raise
        finally:
            self._cache._waiters.discard(waiter)
            self._waiter = None

    def _ring(self) -> None:
        self._timer = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def aclose(self) -> None:
        self._end("closed")

    def _end(self, why: str) -> None:
        if self._cursor is not None:
            log.debug("cached watch of %s ended: %s", self._cache.stored.plural, why)
        self._cursor = None
        self._pending.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
