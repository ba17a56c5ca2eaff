"""Exponential backoff with a cap and optional jitter.

Retrying at once after a failure turns one broken dependency into a hot loop against the API server;
retrying on a fixed period makes recovery slow. The work queue (a key whose reconcile failed), the
supervisor (a task that crashed) and reconnect loops (a watch or gRPC stream that dropped) all back
off the same way: `base * factor**attempt`, never more than `cap`.

`Backoff` is an immutable policy; `Attempts` counts failures of one retry loop; `KeyedAttempts`
counts failures per key, which is what a work queue needs. Jitter spreads retries of many clients
that failed together; its random source is injectable so tests stay deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Attempts", "Backoff", "KeyedAttempts"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Backoff:
    """The delay before retry number `attempt` (0-based) is `min(cap, base * factor**attempt)`.

    With `jitter` in (0, 1], the delay is drawn uniformly from `[d * (1 - jitter), d]`, so jitter
    only ever shortens it and `cap` stays a true upper bound.
    """

    base: float = 0.005
    """Seconds before the first retry (client-go's per-item default is 5 ms)."""
    cap: float = 1000.0
    """Seconds; no delay is ever longer."""
    factor: float = 2.0
    """Growth per failure; 2 doubles."""
    jitter: float = 0.0
    """Fraction of the delay that may be randomly taken off; 0 disables jitter."""
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)
    """Returns a float in [0, 1); injected by tests."""

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < self.base:
            raise ValueError(f"backoff needs 0 <= base <= cap, got base={self.base} cap={self.cap}")
        if self.factor < 1:
            raise ValueError(f"backoff factor must be >= 1, got {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff jitter must be within [0, 1], got {self.jitter}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (0 for the first retry)."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        try:
            raw = min(self.cap, self.base * self.factor**attempt)
        except OverflowError:
            raw = self.cap
        if self.jitter:
            raw -= raw * self.jitter * self.rng()
        return raw

    def attempts(self) -> Attempts:
        """A fresh failure counter for one retry loop."""
        return Attempts(self)


class Attempts:
    """Failures of one retry loop: `next_delay()` after each failure, `reset()` after a success."""

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.failures = 0

    def next_delay(self) -> float:
        """Record one more failure and return how long to wait before retrying."""
        delay = self.backoff.delay(self.failures)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


class KeyedAttempts(Generic[K]):
    """Failures counted per key, so one broken object does not slow down the others."""

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self._failures: dict[K, int] = {}

    def next_delay(self, key: K) -> float:
        """Record one more failure of `key` and return how long to wait before retrying it."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return self.backoff.delay(failures)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """Start `key` over from the base delay (call after it succeeded)."""
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._failures)
