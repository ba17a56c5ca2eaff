"""Per-key deadlines served by a single timer: the "requeue after" half of the work queue.

A controller may ask for thousands of objects to be looked at again later. One event-loop timer per
key would be wasteful, and a background task per queue would have to be supervised; instead a heap
of deadlines keeps exactly one timer on the clock, set for the earliest deadline, and re-arms it
after each firing. Each key has at most one pending deadline, and an earlier one replaces a later
one (so a short requeue-after is never postponed by a long one).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .clock import Clock, Timer

__all__ = ["Deadlines"]

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """Calls `on_due(key)` once the clock passes the key's deadline."""

    def __init__(self, clock: Clock, on_due: Callable[[K], None]) -> None:
        self._clock = clock
        self._on_due = on_due
        self._heap: list[tuple[float, int, K]] = []  # stale entries are skipped when popped
        self._deadline: dict[K, float] = {}
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._deadline)

    def __contains__(self, key: object) -> bool:
        return key in self._deadline

    def schedule(self, key: K, deadline: float) -> bool:
        """Set `key`'s deadline unless an earlier (or equal) one is pending; True if it was set."""
        current = self._deadline.get(key)
        if current is not None and current <= deadline:
            return False
        self._deadline[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), key))
        self._arm()
        return True

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()
        self._deadline.clear()

    def _arm(self) -> None:
        if not self._heap:
            return
        first = self._heap[0][0]
        if self._timer is not None:
            if self._timer_at <= first:
                return
            self._timer.cancel()
        self._timer_at = first
        self._timer = self._clock.call_at(first, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._clock.now()
        due: list[K] = []
        while self._heap and self._heap[0][0] <= now:
            deadline, _, key = heapq.heappop(self._heap)
            if self._deadline.get(key) == deadline:
                del self._deadline[key]
                due.append(key)
        self._arm()
        for key in due:
            self._on_due(key)
