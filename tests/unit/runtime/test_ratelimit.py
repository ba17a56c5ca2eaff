"""The API client's token bucket: bursts after quiet periods, a steady rate under load, arrival order."""

from __future__ import annotations

import asyncio

import pytest

from gpustack_operator.runtime import FakeClock, TokenBucket


def test_a_full_bucket_lets_burst_calls_through_then_spaces_them_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10.0, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)


def test_quiet_time_refills_but_never_beyond_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2.0, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.advance(100.0)
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)


async def test_concurrent_callers_finish_in_arrival_order_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=4.0, burst=1, clock=clock)
    done: list[int] = []

    async def call(i: int) -> None:
        await bucket.acquire()
        done.append(i)

    tasks = [asyncio.create_task(call(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert done == [0]
    for expected in ([0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4]):
        clock.advance(0.25)
        for _ in range(3):
            await asyncio.sleep(0)
        assert done == expected
    await asyncio.gather(*tasks)


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_impossible_settings_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate > 0 and burst >= 1"):
        TokenBucket(rate, burst)
