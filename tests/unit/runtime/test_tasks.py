"""Supervisor: named tasks that are restarted, reported and stopped the way an operator needs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gpustack_operator.runtime.backoff import Backoff
from gpustack_operator.runtime.clock import FakeClock
from gpustack_operator.runtime.tasks import Restart, Supervisor, TaskExit
from tests.helpers import eventually, yield_to_loop

NO_WAIT = Backoff(base=0, cap=0)


async def test_crashing_task_is_logged_by_name_and_restarted_after_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    runs: list[int] = []
    cleaned: list[int] = []

    async def flaky() -> None:
        runs.append(len(runs))
        if len(runs) <= 2:
            raise RuntimeError(f"boom {len(runs)}")
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(len(runs))

    caplog.set_level(logging.ERROR, logger="gpustack_operator.runtime.tasks")
    async with Supervisor(clock=clock, backoff=Backoff(base=1, cap=10)) as sup:
        sup.spawn("cert rotation", flaky, restart="on-failure")
        await eventually(lambda: len(runs) == 1 and clock.pending == 1)
        clock.advance(0.9)
        await yield_to_loop()
        assert len(runs) == 1, "restarted before its backoff elapsed"
        clock.advance(0.1)
        await eventually(lambda: len(runs) == 2 and clock.pending == 1)
        clock.advance(1.9)
        await yield_to_loop()
        assert len(runs) == 2, "second restart should wait twice as long"
        clock.advance(0.1)
        await eventually(lambda: len(runs) == 3)
        assert sup.names == ["cert rotation"]
        assert sup.exits == []
        assert await sup.stop() == []
    assert cleaned == [3], "stop must cancel the running task so its cleanup runs"
    assert sup.names == []
    crashes = [r for r in caplog.records if "cert rotation" in r.getMessage()]
    assert len(crashes) == 2
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in crashes)


async def test_a_long_healthy_run_resets_the_restart_backoff() -> None:
    clock = FakeClock()
    runs: list[float] = []

    async def crashes_after_a_while() -> None:
        runs.append(clock.now())
        if len(runs) == 2:
            await clock.sleep(60)  # healthy for a minute...
        raise RuntimeError("...then crashes")

    async with Supervisor(clock=clock, backoff=Backoff(base=1, cap=100), healthy_after=30) as sup:
        sup.spawn("informer", crashes_after_a_while, restart="always")
        for step, runs_before in [(1, 1), (60, 2), (1, 2)]:
            await eventually(lambda: len(runs) == runs_before and clock.pending == 1)  # noqa: B023
            clock.advance(step)
        await eventually(lambda: len(runs) == 3)
        # run 1 crashed at t=0 -> restart at 1; run 2 was healthy 60s, crashed at 61 -> backoff back to 1s
        assert runs == [0, 1, 62]


async def test_task_that_crashes_without_restart_is_reported_by_wait() -> None:
    async def broken() -> None:
        raise ValueError("bad config")

    async with Supervisor() as sup:
        sup.spawn("api server", broken)
        async with asyncio.timeout(5):
            exit_ = await sup.wait()
    assert exit_.name == "api server"
    assert isinstance(exit_.error, ValueError)
    assert not exit_.requested


@pytest.mark.parametrize(
    ("restart", "want_runs_at_least", "want_exit"),
    [
        pytest.param("never", 1, True, id="never-reports-a-clean-finish"),
        pytest.param("on-failure", 1, True, id="on-failure-does-not-restart-a-clean-finish"),
        pytest.param("always", 3, False, id="always-restarts-even-a-clean-finish"),
    ],
)
async def test_restart_policy_for_a_task_that_returns(
    restart: Restart, want_runs_at_least: int, want_exit: bool
) -> None:
    runs: list[None] = []

    async def finite() -> None:
        runs.append(None)

    async with Supervisor(backoff=NO_WAIT) as sup:
        sup.spawn("job", finite, restart=restart)
        await eventually(lambda: len(runs) >= want_runs_at_least and (bool(sup.exits) or not want_exit))
        await yield_to_loop()
    assert sup.exits == ([TaskExit("job")] if want_exit else [])
    if want_exit:
        assert len(runs) == 1


async def test_stop_names_tasks_that_ignore_cancellation() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    async def polite() -> None:
        await asyncio.Event().wait()

    sup = Supervisor()
    stubborn_task = sup.spawn("stubborn", stubborn)
    sup.spawn("polite", polite)
    await yield_to_loop()
    assert await sup.stop(grace=0.05) == ["stubborn"]
    assert sup.names == ["stubborn"]
    release.set()
    async with asyncio.timeout(5):
        await stubborn_task
    assert sup.names == []


async def test_cancelling_the_owner_stops_the_children() -> None:
    child_cleaned = asyncio.Event()
    started = asyncio.Event()

    async def child() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            child_cleaned.set()

    async def owner() -> None:
        async with Supervisor() as sup:
            sup.spawn("child", child)
            await asyncio.Event().wait()

    async with asyncio.timeout(5), asyncio.TaskGroup() as tg:
        owner_task = tg.create_task(owner())
        await started.wait()
        owner_task.cancel()
    assert owner_task.cancelled()
    assert child_cleaned.is_set()


async def test_task_cancelled_from_outside_is_reported_not_restarted() -> None:
    async def eternal() -> None:
        await asyncio.Event().wait()

    async with Supervisor(backoff=NO_WAIT) as sup:
        task = sup.spawn("watch", eternal, restart="always")
        await yield_to_loop()
        task.cancel()
        async with asyncio.timeout(5):
            exit_ = await sup.wait()
    assert exit_.name == "watch"
    assert isinstance(exit_.error, asyncio.CancelledError)


async def test_request_stop_ends_wait_without_touching_tasks() -> None:
    async def eternal() -> None:
        await asyncio.Event().wait()

    async with Supervisor() as sup:
        sup.spawn("server", eternal)
        sup.request_stop("signal SIGTERM")
        async with asyncio.timeout(5):
            assert await sup.wait() == TaskExit("signal SIGTERM", requested=True)
        assert sup.names == ["server"]
    assert sup.names == []


async def test_names_are_unique_and_nothing_starts_after_stop() -> None:
    async def eternal() -> None:
        await asyncio.Event().wait()

    sup = Supervisor()
    sup.spawn("controller/nodes", eternal)
    with pytest.raises(ValueError, match="already running"):
        sup.spawn("controller/nodes", eternal)
    await sup.stop()
    with pytest.raises(RuntimeError, match="stopping"):
        sup.spawn("late", eternal)
