"""WorkQueue: the guarantees a level-based reconciler relies on."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict

import pytest

from gpustack_operator.runtime.backoff import Backoff
from gpustack_operator.runtime.clock import FakeClock
from gpustack_operator.runtime.workqueue import ShutDownError, WorkQueue
from tests.helpers import eventually, yield_to_loop


async def drain_ready(queue: WorkQueue[str]) -> list[str]:
    """Take every key that is ready now, marking each done."""
    keys = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.append(key)
    return keys


async def test_thousand_adds_of_one_key_yield_one_processing() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for _ in range(1000):
        queue.add("ns/pod")
    assert len(queue) == 1
    assert await drain_ready(queue) == ["ns/pod"]
    assert len(queue) == 0


async def test_keys_come_out_in_first_added_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ["b", "a", "b", "c", "a"]:
        queue.add(key)
    assert await drain_ready(queue) == ["b", "a", "c"]


async def test_key_added_while_processing_waits_for_done_then_comes_back_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("k")
    key = await queue.get()
    for _ in range(3):
        queue.add("k")
    assert len(queue) == 0, "a key being processed must not be handed to another worker"
    queue.done(key)
    assert len(queue) == 1
    assert await drain_ready(queue) == ["k"]


async def test_done_for_a_key_not_in_flight_is_an_error() -> None:
    queue: WorkQueue[str] = WorkQueue(name="nodes")
    with pytest.raises(ValueError, match="nodes: done"):
        queue.done("never-got")


@pytest.mark.parametrize("seed", range(20))
async def test_eight_workers_never_share_a_key_and_process_every_last_add(seed: int) -> None:
    rng = random.Random(seed)
    queue: WorkQueue[str] = WorkQueue()
    keys = [f"ns/obj-{i}" for i in range(6)]
    clock = itertools.count()  # logical time: orders adds and processing starts
    last_add: dict[str, int] = {}
    starts: dict[str, list[int]] = defaultdict(list)
    active: set[str] = set()
    overlaps: list[str] = []
    most_active = 0

    async def produce() -> None:
        for _ in range(300):
            key = rng.choice(keys)
            last_add[key] = next(clock)
            queue.add(key)
            await yield_to_loop(rng.randrange(3))
        await eventually(lambda: len(queue) == 0 and queue.in_flight == 0)
        queue.shutdown()

    async def work() -> None:
        nonlocal most_active
        while True:
            try:
                key = await queue.get()
            except ShutDownError:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            most_active = max(most_active, len(active))
            starts[key].append(next(clock))
            await yield_to_loop(rng.randrange(4))
            active.discard(key)
            queue.done(key)

    async with asyncio.timeout(20):
        await asyncio.gather(produce(), *(work() for _ in range(8)))
    assert overlaps == []
    assert most_active > 1, "workers should have run different keys concurrently"
    for key, added in last_add.items():
        assert any(start > added for start in starts[key]), f"{key} not processed after its last add"


async def test_rate_limited_requeues_double_per_key_and_cap() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(base=1, cap=4))
    observed = []
    for _ in range(5):
        queue.add_rate_limited("flaky")
        waited = 0.0
        while not len(queue):
            clock.advance(0.25)
            waited += 0.25
        observed.append(waited)
        assert await drain_ready(queue) == ["flaky"]
    assert observed == [1, 2, 4, 4, 4]
    assert queue.num_requeues("flaky") == 5


async def test_default_rate_limit_starts_at_5ms() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_rate_limited("k")
    clock.advance(0.004)
    assert len(queue) == 0
    clock.advance(0.001)
    assert len(queue) == 1


async def test_forget_resets_the_backoff_of_that_key_only() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(base=1, cap=100))
    for _ in range(4):
        queue.add_rate_limited("a")
        queue.add_rate_limited("b")
        clock.advance(100)
        await drain_ready(queue)
    queue.forget("a")
    assert (queue.num_requeues("a"), queue.num_requeues("b")) == (0, 4)
    queue.add_rate_limited("a")
    queue.add_rate_limited("b")
    clock.advance(1)
    assert await drain_ready(queue) == ["a"]
    clock.advance(15)
    assert await drain_ready(queue) == ["b"]


async def test_add_after_releases_keys_in_deadline_order() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("in-3s", 3)
    queue.add_after("in-1s", 1)
    queue.add_after("in-2s", 2)
    assert queue.delayed == 3
    clock.advance(1.5)
    assert await drain_ready(queue) == ["in-1s"]
    clock.advance(10)
    assert await drain_ready(queue) == ["in-2s", "in-3s"]
    assert queue.delayed == 0


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(10, 2, id="earlier-request-moves-the-deadline-forward"),
        pytest.param(2, 10, id="later-request-does-not-postpone"),
    ],
)
async def test_add_after_earlier_deadline_wins(first: float, second: float) -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("k", first)
    queue.add_after("k", second)
    clock.advance(2)
    assert await drain_ready(queue) == ["k"]
    clock.advance(20)
    assert await drain_ready(queue) == [], "one pending deadline per key: no second requeue"


async def test_add_after_zero_adds_now() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add_after("k", 0)
    assert len(queue) == 1


async def test_add_after_with_the_real_clock_fires() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("k", 0.01)
    async with asyncio.timeout(5):
        assert await queue.get() == "k"
    queue.done("k")


async def test_shutdown_wakes_every_blocked_getter() -> None:
    queue: WorkQueue[str] = WorkQueue()

    async def stop_later() -> None:
        await yield_to_loop()
        queue.shutdown()

    async with asyncio.timeout(5):
        results = await asyncio.gather(*(queue.get() for _ in range(3)), stop_later(), return_exceptions=True)
    assert [type(r) for r in results[:3]] == [ShutDownError] * 3
    with pytest.raises(ShutDownError):
        await queue.get()
    queue.add("after-shutdown")
    assert len(queue) == 0


async def test_woken_getter_that_is_cancelled_passes_the_key_on() -> None:
    queue: WorkQueue[str] = WorkQueue()
    async with asyncio.timeout(5), asyncio.TaskGroup() as tg:
        first = tg.create_task(queue.get())
        second = tg.create_task(queue.get())
        await yield_to_loop()
        queue.add("k")  # wakes `first`...
        first.cancel()  # ...which is cancelled before it can take the key
        assert await second == "k"
    assert first.cancelled()


async def test_shutdown_with_drain_waits_for_keys_in_flight() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("in-flight")
    queue.add("never-started")
    key = await queue.get()
    events: list[str] = []

    async def drain() -> None:
        drained = await queue.shutdown_with_drain(grace=10)
        events.append(f"drained={drained}")

    async def finish() -> None:
        await yield_to_loop(10)
        queue.add(key)  # added while shutting down: must not come back
        events.append("done")
        queue.done(key)

    async with asyncio.timeout(5):
        await asyncio.gather(drain(), finish())
    assert events == ["done", "drained=True"]
    with pytest.raises(ShutDownError):
        await queue.get()


async def test_shutdown_with_drain_gives_up_after_grace() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("stuck")
    await queue.get()
    assert await queue.shutdown_with_drain(grace=0.01) is False
    assert queue.in_flight == 1


async def test_shutdown_cancels_pending_requeues() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("k", 1)
    queue.shutdown()
    clock.advance(5)
    assert (len(queue), queue.delayed, clock.pending) == (0, 0, 0)


class RecordingObserver:
    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.depths: list[int] = []
        self.latencies: list[float] = []
        self.durations: list[float] = []

    def added(self) -> None:
        self.adds += 1

    def depth(self, depth: int) -> None:
        self.depths.append(depth)

    def queue_latency(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def work_duration(self, seconds: float) -> None:
        self.durations.append(seconds)

    def retried(self) -> None:
        self.retries += 1


async def test_observer_sees_adds_depth_latency_duration_and_retries() -> None:
    clock = FakeClock()
    observer = RecordingObserver()
    queue: WorkQueue[str] = WorkQueue(clock=clock, observer=observer, backoff=Backoff(base=1, cap=1))
    queue.add("a")
    queue.add("a")  # de-duplicated: not an add
    queue.add("b")
    clock.advance(2)
    key = await queue.get()
    clock.advance(3)
    queue.done(key)
    queue.add_rate_limited("c")
    assert observer.adds == 2
    assert observer.depths == [1, 2, 1]
    assert observer.latencies == [2]
    assert observer.durations == [3]
    assert observer.retries == 1
