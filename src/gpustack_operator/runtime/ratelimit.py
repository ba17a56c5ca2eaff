"""A token bucket: how fast a client may call kube-apiserver (`--kube-api-qps`, `--kube-api-burst`).

Each caller reserves a token at once and sleeps until its token is due, so concurrent callers are served in
arrival order without a lock and the long-run rate never exceeds `rate`, while up to `burst` calls can go
out back to back after a quiet period.
"""

from __future__ import annotations

from .clock import Clock, MonotonicClock


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; `acquire()` waits for one."""

    def __init__(self, rate: float, burst: int, *, clock: Clock | None = None) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, got rate={rate} burst={burst}")
        self.rate = rate
        self.burst = burst
        self._clock: Clock = clock or MonotonicClock()
        self._tokens = float(burst)
        self._stamp = self._clock.now()

    def reserve(self) -> float:
        """Take a token now (possibly borrowed from the future); return seconds until it may be used."""
        now = self._clock.now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)
