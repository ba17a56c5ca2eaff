"""Informers: a local, always-current copy of one kind, and callbacks for every change to it.

Reconcilers are level-based: they read what the cluster looks like now and act on the difference. An
informer gives them "now" without a round trip: it lists once (paginated), then watches from the list's
resourceVersion with bookmarks. When that version has been compacted away (410 Gone) it lists again and
emits adds, updates and deletes for the difference, so a handler never misses a delete; when the
connection drops or the server restarts it reconnects with backoff from the last version it saw. With a
`relist_period` it also lists again that often (ending its watch when the period is up), so a watch that
stalls without an error hides a change for one period at most; the relist tells only the differences, so at
rest it tells nothing. Handlers
run synchronously in the informer's task (they should only enqueue keys); one that raises is logged with
the object key and the informer carries on. Cached objects lose managedFields and share their strings
(kube.slim). Plain int counters (`lists`, `relists`, `events`, `bookmarks`, `reconnects`,
`handler_errors`) are there for metrics. `InformerFactory` shares one informer per (kind, namespace,
selectors) in a process and starts them under a Supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Callable
from typing import Any, Protocol, Unpack

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client, Selectors
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.slim import Interner
from gpustack_operator.kube.store import IndexFunc, Store, object_key
from gpustack_operator.kube.watch import WatchEvent, watch
from gpustack_operator.runtime import Attempts, Backoff, Clock, MonotonicClock, Supervisor

__all__ = ["EventHandler", "IndexFunc", "Informer", "InformerFactory", "Store", "object_key"]

log = logging.getLogger(__name__)

WATCH_BACKOFF = Backoff(base=0.25, cap=10.0, jitter=0.2)
"""Between reconnects (and relists) of one informer: 0.25 s doubling to 10 s; reset once a watch makes
progress, so a server that answers every fresh list's watch with 410 is not hammered either."""
PAGE_SIZE = 100
"""Objects per list page. A page's raw JSON and its parsed copy are transient, but Python keeps much of that
peak resident: with 500 Nodes a page the first sync left ~14 MB behind, with 100 about 3 MB, for a few
more round trips (tests/bench/bench_informer.py)."""
INTERN_FLOOR = 4096
"""The shared-string table is reset when it exceeds this plus 8 entries per cached object (kube.slim)."""
QUICK_CLOSE = 1.0
"""A watch the server closes within this many seconds without one event counts as a failure, not a renewal."""


class EventHandler(Protocol):
    """What an informer tells about each change; `on_delete` gets the object's last known state."""

    def on_add(self, obj: JSONObj) -> None: ...

    def on_update(self, old: JSONObj, new: JSONObj) -> None: ...

    def on_delete(self, obj: JSONObj) -> None: ...


def _version(obj: JSONObj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _uid(obj: JSONObj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class Informer:
    """List-then-watch cache of one kind (optionally one namespace and selectors); see the module doc."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = PAGE_SIZE,
        watch_timeout: int = 300,
        backoff: Backoff = WATCH_BACKOFF,
        clock: Clock | None = None,
        relist_period: float | None = None,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Store()
        self.resource_version = ""
        """The last version seen (list, event or bookmark); "" until the first list, and after a 410."""
        # Counters for metrics and tests: lists done, relists (lists after the first), watch events
        # applied, bookmarks, reconnects after a failure, and handler calls that raised.
        self.lists = self.relists = self.events = self.bookmarks = self.reconnects = self.handler_errors = 0
        self._client = client
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._clock: Clock = clock or MonotonicClock()
        self._relist_period = relist_period
        self._listed_at = 0.0
        self._handlers: list[EventHandler] = []
        self._breaks: list[Callable[[], None]] = []
        self._synced = asyncio.Event()
        self._interner = Interner()
        self._running = False
        self.keep_managed_fields = False
        """Cache objects with their managedFields (dropped by default: no reconciler reads them). A
        reader that serves them on (the aggregated API's cached GET) sets this before the first list."""

    @property
    def name(self) -> str:
        """`plural[.group]` plus namespace and selectors, for logs and task names."""
        res = self.resource
        name = f"{res.plural}.{res.group}" if res.group else res.plural
        scope = [
            f"{label}={value}"
            for label, value in (
                ("namespace", self.namespace),
                ("labels", self.label_selector),
                ("fields", self.field_selector),
            )
            if value
        ]
        return f"{name}[{','.join(scope)}]" if scope else name

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        self.store.add_index(name, fn)

    def add_handler(self, handler: EventHandler) -> None:
        """Subscribe to changes; once synced, the objects already cached are replayed as adds."""
        self._handlers.append(handler)
        if self.has_synced():
            for key, obj in zip(self.store.keys(), self.store.list(), strict=True):
                self._call(handler, "on_add", key, obj)

    def add_break_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` whenever the informer's events stop being one unbroken stream.

        That is when it loses its version to a 410 and when a list has replaced the store (the first list
        and every relist), whether or not that list changed anything. Handlers hear of a relist only
        through the differences it finds; a consumer that follows the events as a stream (the aggregated
        API's watch cache) must end its streams at once instead of at the next change.
        """
        self._breaks.append(listener)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """List, then watch forever: relist on 410, reconnect with backoff on failure; ends by cancel."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        try:
            await self._run()
        finally:
            self._running = False

    async def _run(self) -> None:
        attempts = self._backoff.attempts()
        while True:
            try:
                if not self.resource_version or self._relist_due() <= 0:
                    await self._relist()
                started = self._clock.now()
                if not await self._watch(attempts) and self._clock.now() - started < QUICK_CLOSE:
                    raise errors.Unavailable(status=0, reason="WatchClosed", message="closed without events")
                attempts.reset()  # a watch that delivered, or stayed open until its timeout, is progress
            except errors.KubeError as err:
                await self._recover(err, attempts)

    def _relist_due(self) -> float:
        """Seconds until the periodic relist is due (infinite without a period)."""
        if self._relist_period is None:
            return float("inf")
        return self._listed_at + self._relist_period - self._clock.now()

    async def _recover(self, err: errors.KubeError, attempts: Attempts) -> None:
        delay = attempts.next_delay()
        self.reconnects += 1
        if isinstance(err, errors.Gone):
            log.info("informer %s: %s; relisting in %.2fs", self.name, err, delay)
            self.resource_version = ""
            self._broken()
        else:
            log.warning("informer %s: %s; reconnecting in %.2fs", self.name, err, delay)
        await self._clock.sleep(delay)

    async def _relist(self) -> None:
        fresh: dict[str, JSONObj] = {}
        version = ""
        pages = self._client.list_pages(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self._page_size,
        )
        async for page in pages:  # slim each page as it comes, so the raw list is never held whole
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            for obj in map(self._slim, page.get("items") or ()):
                fresh[object_key(obj)] = obj
        self.lists += 1
        self._listed_at = self._clock.now()
        if self.lists > 1:
            self.relists += 1
        self._replace(fresh)
        self.resource_version = version
        if not self._synced.is_set():
            log.info("informer %s: synced %d objects at version %s", self.name, len(self.store), version)
            self._synced.set()
        self._broken()

    def _broken(self) -> None:
        for listener in tuple(self._breaks):
            self._guarded(listener, f"break listener {listener}")

    def _replace(self, fresh: dict[str, JSONObj]) -> None:
        """Make the store equal a fresh list (slimmed, by key), telling handlers about every difference.

        An object whose key now names another object (deleted and recreated during the gap: a new UID)
        is told as the old one's delete and the new one's add, never as an update of one object.
        """
        for key in sorted(set(self.store.keys()) - fresh.keys()):
            self._emit("on_delete", key, self.store.pop(key))
        for key, obj in fresh.items():
            old = self.store.get(key)
            if old is not None and _version(old) == _version(obj):
                continue
            self.store.put(key, obj)
            if old is None:
                self._emit("on_add", key, obj)
            elif _uid(old) != _uid(obj):
                self._emit("on_delete", key, old)
                self._emit("on_add", key, obj)
            else:
                self._emit("on_update", key, old, obj)

    async def _watch(self, attempts: Attempts) -> int:
        """One watch request from resource_version; returns how many events it delivered."""
        seen = 0
        timeout = int(self._watch_timeout * (1 + random.random()))  # spread renewals of many informers
        if self._relist_period is not None:  # end the watch when the next relist is due
            timeout = max(1, min(timeout, math.ceil(self._relist_due())))
        stream = watch(
            self._client,
            self.resource,
            resource_version=self.resource_version,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                self._apply(event)
                seen += 1
                attempts.reset()
        return seen

    def _apply(self, event: WatchEvent) -> None:
        obj = event["object"]
        version = _version(obj)
        if event["type"] == "BOOKMARK":
            self.bookmarks += 1
        else:
            self.events += 1
            obj = self._slim(obj)
            key = object_key(obj)
            if event["type"] == "DELETED":
                if self.store.pop(key) is not None:
                    self._emit("on_delete", key, obj)
            else:
                old = self.store.put(key, obj)
                if old is None:
                    self._emit("on_add", key, obj)
                else:
                    self._emit("on_update", key, old, obj)
        if version:
            self.resource_version = version

    def _slim(self, obj: JSONObj) -> JSONObj:
        if len(self._interner) > INTERN_FLOOR + 8 * len(self.store):
            self._interner.reset()
        return self._interner.slim(obj, keep_managed_fields=self.keep_managed_fields)

    def _emit(self, method: str, key: str, *args: Any) -> None:
        for handler in tuple(self._handlers):
            self._call(handler, method, key, *args)

    def _call(self, handler: EventHandler, method: str, key: str, *args: Any) -> None:
        self._guarded(getattr(handler, method), f"handler {handler}.{method} on {key}", *args)

    def _guarded(self, fn: Callable[..., None], what: str, *args: Any) -> None:
        """A consumer's callback: its failure is counted and logged, and never stops the informer."""
        try:
            fn(*args)
        except Exception:
            self.handler_errors += 1
            log.exception("informer %s: %s failed", self.name, what)


class InformerFactory:
    """One shared Informer per (kind, namespace, selectors) in a process, started under a Supervisor."""

    def __init__(self, client: Client, **options: Any) -> None:
        """`options` (page_size, watch_timeout, backoff, clock) go to every Informer it makes."""
        self._client = client
        self._options = options
        self._informers: dict[tuple[Resource, str | None, str | None, str | None], Informer] = {}
        self._started: set[Informer] = set()

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def informer(
        self, resource: Resource, *, namespace: str | None = None, **selectors: Unpack[Selectors]
    ) -> Informer:
        label_selector, field_selector = selectors.get("label_selector"), selectors.get("field_selector")
        key = (resource, namespace or None, label_selector or None, field_selector or None)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self._client,
                resource,
                namespace=key[1],
                label_selector=key[2],
                field_selector=key[3],
                **self._options,
            )
            self._informers[key] = informer
        return informer

    def start(self, supervisor: Supervisor) -> None:
        """Spawn every informer not started yet as a task named `informer:<name>`."""
        for informer in self._informers.values():
            if informer not in self._started:
                supervisor.spawn(f"informer:{informer.name}", informer.run, restart="on-failure")
                self._started.add(informer)

    async def wait_for_sync(self) -> None:
        """Return once every informer made so far has completed its first list."""
        await asyncio.gather(*(informer.wait_synced() for informer in self._informers.values()))
