"""An injectable clock, so that code which waits can be tested without waiting.

Anything in the operator that measures or schedules time (the work queue's requeue-after timers,
backoff between restarts and reconnects, latency metrics) takes a `Clock` instead of calling
`time.monotonic()`, `asyncio.sleep()` or `loop.call_later()` directly. Production code uses
`MonotonicClock`; tests pass a `FakeClock` and move time forward with `advance()`, so a test of a
1000-second backoff takes microseconds and never depends on how busy the machine is.

A clock offers three things: `now()` (monotonic seconds), `sleep()` and `call_at()` (a one-shot
timer that can be cancelled). Deadlines are in the clock's own time base, as returned by `now()`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "MonotonicClock", "Timer"]


class Timer(Protocol):
    """A scheduled callback; cancelling one that already ran does nothing."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic time, sleeping and one-shot timers."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...


class MonotonicClock:
    """The real clock: `time.monotonic()` and the running event loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        # The loop's own time base may differ from time.monotonic(); convert through a delay.
        return asyncio.get_running_loop().call_later(max(0.0, when - self.now()), callback)


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when a test calls `advance()`.

    Timers fire synchronously inside `advance()`, in deadline order, with `now()` reading each
    timer's own deadline while its callback runs. Coroutines woken from `sleep()` run once the test
    yields to the event loop (for example `await asyncio.sleep(0)` or an `eventually()` helper).
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = itertools.count()
        self._heap: list[tuple[float, int, _FakeTimer]] = []

    def now(self) -> float:
        return self._now

    @property
    def pending(self) -> int:
        """How many timers (and sleepers) are waiting for time to move."""
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._heap, (when, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_at(self._now + seconds, wake)
        try:
            await future
        finally:
            timer.cancel()

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, firing every timer that falls due on the way."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance by {seconds})")
        target = self._now + seconds
        while self._heap and self._heap[0][0] <= target:
            when, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.cancelled = True
            timer.callback()
        self._now = target
