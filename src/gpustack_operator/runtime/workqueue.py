"""A rate-limited work queue of keys, the contract a level-based reconciler relies on.

Informer events only say "look at this object again"; many events for one object while it waits
must cost one reconcile, and one object must never be reconciled by two workers at once, or two
reconciles race each other's writes. This queue gives those guarantees in plain asyncio:

- `add(key)` de-duplicates: a key waiting in the queue is there once, however often it is added;
- a key handed out by `get()` is *processing* until `done(key)`; adding it meanwhile marks it
  dirty, and `done()` puts it back, so the latest state is always looked at after the last add;
- `add_rate_limited(key)` requeues after a per-key exponential backoff, `forget(key)` resets it;
- `add_after(key, seconds)` requeues later (a reconciler's requeue-after); the earlier deadline wins;
- `shutdown()` stops handing out keys and wakes blocked `get()`s with `ShutDownError`;
  `shutdown_with_drain()` also waits for keys in flight to be `done()`. Keys still waiting are
  dropped: a level-based controller lists everything again when it starts.

Metrics go through an optional `QueueObserver`, so this module never imports prometheus.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from .backoff import Backoff, KeyedAttempts
from .clock import Clock, MonotonicClock
from .deadlines import Deadlines

__all__ = ["QueueObserver", "ShutDownError", "WorkQueue"]

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class ShutDownError(Exception):
    """Raised by `WorkQueue.get()` once the queue is shut down: the worker should return."""


class QueueObserver(Protocol):
    """Metric hooks; implementations must be cheap and must not raise."""

    def added(self) -> None: ...  # an add that was not de-duplicated away
    def depth(self, depth: int) -> None: ...  # keys waiting to be handed out
    def queue_latency(self, seconds: float) -> None: ...  # first add -> get
    def work_duration(self, seconds: float) -> None: ...  # get -> done
    def retried(self) -> None: ...  # an add_rate_limited()


class WorkQueue(Generic[K]):
    """De-duplicating, per-key serialised, rate-limited queue of keys (see the module docstring)."""

    def __init__(
        self,
        name: str = "workqueue",
        *,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        observer: QueueObserver | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock or MonotonicClock()
        self._observer = observer
        self._attempts: KeyedAttempts[K] = KeyedAttempts(backoff or Backoff())
        self._queue: deque[K] = deque()
        self._dirty: dict[K, float] = {}  # key -> when it was first added since last handed out
        self._processing: dict[K, float] = {}  # key -> when get() handed it out
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._delayed: Deadlines[K] = Deadlines(self._clock, self.add)
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def depth(self) -> int:
        """Keys waiting to be handed out (not counting those in flight or delayed)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Keys handed out by `get()` and not yet `done()`."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Keys waiting for an `add_after()` / `add_rate_limited()` deadline."""
        return len(self._delayed)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty[key] = self._clock.now()
        if self._observer:
            self._observer.added()
        if key not in self._processing:
            self._push(key)

    async def get(self) -> K:
        """Wait for the next key; raises `ShutDownError` once the queue is shut down."""
        while not self._queue and not self._shutting_down:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                getter.cancel()
                if getter in self._getters:
                    self._getters.remove(getter)
                elif self._queue:
                    self._wake_one()  # we were woken but cannot take the key: pass it on
                raise
        if self._shutting_down:
            raise ShutDownError(self.name)
        key = self._queue.popleft()
        now = self._clock.now()
        self._processing[key] = now
        self._idle.clear()
        added_at = self._dirty.pop(key, now)
        if self._observer:
            self._observer.depth(len(self._queue))
            self._observer.queue_latency(now - added_at)
        return key

    def done(self, key: K) -> None:
        """Mark `key` finished; if it was added meanwhile it is queued again."""
        started = self._processing.pop(key, None)
        if started is None:
            raise ValueError(f"{self.name}: done({key!r}) for a key that is not being processed")
        if self._observer:
            self._observer.work_duration(self._clock.now() - started)
        if key in self._dirty and not self._shutting_down:
            self._push(key)
        if not self._processing:
            self._idle.set()

    def add_rate_limited(self, key: K) -> None:
        """Requeue `key` after its next backoff delay (it failed again)."""
        if self._shutting_down:
            return
        if self._observer:
            self._observer.retried()
        self.add_after(key, self._attempts.next_delay(key))

    def forget(self, key: K) -> None:
        """Reset `key`'s backoff (it succeeded); does not remove it from the queue."""
        self._attempts.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._attempts.failures(key)

    def add_after(self, key: K, seconds: float) -> None:
        """Add `key` once `seconds` have passed; a pending earlier deadline for it wins."""
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        self._delayed.schedule(key, self._clock.now() + seconds)

    def shutdown(self) -> None:
        """Stop handing out keys and wake every blocked `get()` with `ShutDownError`."""
        if not self._shutting_down:
            logger.debug("Work queue %s shutting down (%s in flight)", self.name, len(self._processing))
        self._shutting_down = True
        self._delayed.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

    async def shutdown_with_drain(self, grace: float | None = None) -> bool:
        """Shut down, then wait until every key in flight is `done()`; False if `grace` ran out."""
        self.shutdown()
        try:
            async with asyncio.timeout(grace):
                await self._idle.wait()
        except TimeoutError:
            logger.warning(
                "Work queue %s: %s keys still in flight after %ss", self.name, len(self._processing), grace
            )
            return False
        return True

    def _push(self, key: K) -> None:
        self._queue.append(key)
        if self._observer:
            self._observer.depth(len(self._queue))
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return
