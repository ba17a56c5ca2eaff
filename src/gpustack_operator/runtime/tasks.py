"""Supervised, named long-lived tasks: the only place in the project that creates asyncio tasks.

A bare `asyncio.create_task()` loses its exception until garbage collection, has no name in logs and
is never stopped on shutdown. The worker runs several eternal tasks (API server, webhooks, one per
controller, certificate rotation), so every one of them is started through a `Supervisor`, which:

- names each task and logs a crash with that name and the traceback;
- restarts it with backoff when asked (`restart="on-failure"` or `"always"`);
- reports the first task that ended for good through `wait()`, so the process can stop;
- on `stop()` cancels everything, waits up to a timeout, and names the tasks that did not stop.

Use it as `async with Supervisor() as sup:` so leaving the block (even by cancellation) stops the
children. `run_until_signal()` in `signals.py` builds the CLI's main loop on top of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

from .backoff import Attempts, Backoff
from .clock import Clock, MonotonicClock

__all__ = ["Restart", "Supervisor", "TaskExit", "TaskFactory"]

logger = logging.getLogger(__name__)

TaskFactory = Callable[[], Coroutine[Any, Any, None]]
Restart = Literal["never", "on-failure", "always"]

DEFAULT_RESTART_BACKOFF = Backoff(base=0.5, cap=60.0, jitter=0.2)


@dataclass(frozen=True)
class TaskExit:
    """Why `Supervisor.wait()` returned: a task ended for good, or someone asked to stop."""

    name: str
    error: BaseException | None = None
    requested: bool = False


class Supervisor:
    """Starts named coroutines, restarts them as asked, and stops them all gracefully."""

    def __init__(
        self,
        name: str = "supervisor",
        *,
        clock: Clock | None = None,
        backoff: Backoff = DEFAULT_RESTART_BACKOFF,
        healthy_after: float = 60.0,
        grace: float = 10.0,
    ) -> None:
        self.name = name
        self._clock: Clock = clock or MonotonicClock()
        self._backoff = backoff
        self._healthy_after = healthy_after  # a run this long resets the restart backoff
        self._grace = grace  # default seconds stop() waits for cancelled tasks
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._exits: list[TaskExit] = []
        self._exited = asyncio.Event()
        self._stopping = False

    @property
    def names(self) -> list[str]:
        """Names of the tasks still running."""
        return sorted(self._tasks)

    @property
    def exits(self) -> list[TaskExit]:
        """Every task that ended for good (and every stop request), oldest first."""
        return list(self._exits)

    def spawn(
        self, name: str, factory: TaskFactory, *, restart: Restart = "never", backoff: Backoff | None = None
    ) -> asyncio.Task[None]:
        """Run `factory()` as a task named `name`; with `restart`, call it again after it ends."""
        if self._stopping:
            raise RuntimeError(f"{self.name}: cannot start {name!r}, supervisor is stopping")
        if name in self._tasks:
            raise ValueError(f"{self.name}: a task named {name!r} is already running")
        guard = self._guard(name, factory, restart, (backoff or self._backoff).attempts())
        task = asyncio.get_running_loop().create_task(guard, name=name)
        self._tasks[name] = task
        task.add_done_callback(self._forget)
        return task

    def request_stop(self, reason: str) -> None:
        """Make `wait()` return (e.g. from a signal handler); does not stop anything by itself."""
        self._record(TaskExit(reason, requested=True))

    async def wait(self) -> TaskExit:
        """Wait until a task ends for good or a stop is requested; return the first such event."""
        await self._exited.wait()
        return self._exits[0]

    async def stop(self, grace: float | None = None) -> list[str]:
        """Cancel every task and wait up to `grace` seconds; return the names still running."""
        grace = self._grace if grace is None else grace
        self._stopping = True
        tasks = dict(self._tasks)
        if not tasks:
            return []
        logger.debug("Supervisor %s stopping %s", self.name, ", ".join(sorted(tasks)))
        for task in tasks.values():
            task.cancel()
        _, pending = await asyncio.wait(tasks.values(), timeout=grace)
        stragglers = sorted(name for name, task in tasks.items() if task in pending)
        if stragglers:
            logger.warning(
                "Supervisor %s: tasks did not stop within %ss: %s", self.name, grace, ", ".join(stragglers)
            )
        return stragglers

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _forget(self, task: asyncio.Task[None]) -> None:
        if self._tasks.get(task.get_name()) is task:
            del self._tasks[task.get_name()]

    def _record(self, exit_: TaskExit) -> None:
        self._exits.append(exit_)
        self._exited.set()

    async def _guard(self, name: str, factory: TaskFactory, restart: Restart, attempts: Attempts) -> None:
        while True:
            started = self._clock.now()
            error: Exception | None = None
            try:
                await factory()
            except asyncio.CancelledError:
                if not self._stopping:
                    logger.warning("Task %s was cancelled outside its supervisor %s", name, self.name)
                    self._record(TaskExit(name, asyncio.CancelledError()))
                raise
            except Exception as e:
                error = e
            if self._stopping:
                return
            if restart == "never" or (restart == "on-failure" and error is None):
                if error is not None:
                    logger.error("Task %s crashed", name, exc_info=error)
                else:
                    logger.info("Task %s finished", name)
                self._record(TaskExit(name, error))
                return
            if self._clock.now() - started >= self._healthy_after:
                attempts.reset()
            delay = attempts.next_delay()
            if error is not None:
                logger.error("Task %s crashed; restarting in %.3fs", name, delay, exc_info=error)
            else:
                logger.warning("Task %s finished unexpectedly; restarting in %.3fs", name, delay)
            await self._clock.sleep(delay)
