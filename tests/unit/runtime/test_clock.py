"""Clocks: the fake one moves only when told to, the real one really fires."""

from __future__ import annotations

import asyncio

import pytest

from gpustack_operator.runtime.clock import FakeClock, MonotonicClock
from tests.helpers import yield_to_loop


def test_fake_timers_fire_in_deadline_order_and_see_their_own_time() -> None:
    clock = FakeClock(start=100.0)
    fired: list[tuple[str, float]] = []
    clock.call_at(105, lambda: fired.append(("late", clock.now())))
    clock.call_at(101, lambda: fired.append(("early", clock.now())))
    cancelled = clock.call_at(102, lambda: fired.append(("cancelled", clock.now())))
    cancelled.cancel()

    clock.advance(3)
    assert fired == [("early", 101.0)]
    assert clock.now() == 103.0
    clock.advance(10)
    assert fired == [("early", 101.0), ("late", 105.0)]
    assert clock.pending == 0


def test_fake_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        FakeClock().advance(-1)


async def test_fake_sleep_returns_only_after_enough_time_is_advanced() -> None:
    clock = FakeClock()
    woke: list[float] = []

    async def sleeper() -> None:
        await clock.sleep(10)
        woke.append(clock.now())

    async def driver() -> None:
        await yield_to_loop()
        assert clock.pending == 1
        clock.advance(9.5)
        await yield_to_loop()
        assert woke == []
        clock.advance(0.5)

    async with asyncio.timeout(5):
        await asyncio.gather(sleeper(), driver())
    assert woke == [10.0]


async def test_fake_sleep_of_zero_does_not_need_the_clock_to_move() -> None:
    clock = FakeClock()
    async with asyncio.timeout(5):
        await clock.sleep(0)
    assert clock.now() == 0


async def test_cancelled_fake_sleep_leaves_no_timer_behind() -> None:
    clock = FakeClock()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await clock.sleep(60)
    assert clock.pending == 0


async def test_monotonic_clock_timer_fires_and_sleep_returns() -> None:
    clock = MonotonicClock()
    fired = asyncio.Event()
    start = clock.now()
    clock.call_at(start + 0.01, fired.set)
    async with asyncio.timeout(5):
        await fired.wait()
        await clock.sleep(0.001)
    assert clock.now() >= start + 0.01
