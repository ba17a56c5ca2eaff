"""Find asyncio tasks a test leaves running.

A test that starts a task and never ends it keeps running code against the next test's world (on the
session-wide loop) or is cancelled silently with its loop; either hides a shutdown bug a user would meet.
Longer-lived fixtures (the sandbox, the kube client, a module's controller manager) legitimately keep tasks
across tests, so every task is given an owner when it is created:

* a task created by another task inherits that task's owner, so whatever a long-lived fixture's tasks
  spawn later stays theirs;
* otherwise (the root task pytest-asyncio makes for a test or a fixture, a task created from a loop
  callback), the owner is what is being set up at that moment: a fixture of a scope wider than the function
  owns it, else the running test does.

After the test and its function-scoped fixtures are torn down, the test's own tasks that are still pending
are the leak. Tasks are recorded through a task factory installed on each loop pytest-asyncio creates.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Coroutine, Generator
from typing import Any

import pytest

_RUNNER = re.compile(r"_(\w+)_scoped_runner")


class TaskLeaks:
    """The pytest plugin: tracks who owns each task and reports a test's pending ones."""

    def __init__(self) -> None:
        self._owners: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()
        self._setting_up: list[str] = []  # owners of the fixtures being set up, innermost last
        self._test = ""  # node id of the running test, "" between tests
        self._found: dict[str, list[str]] = {}  # leaks seen when a test's own loop closed, described

    def begin(self, nodeid: str) -> None:
        self._test = nodeid
        self._found[nodeid] = []

    def end(self, nodeid: str) -> list[str]:
        """Describe the test's tasks still pending now, and those found when a loop of its own closed."""
        found = self._found.pop(nodeid, []) + [describe(task) for task in self._pending(nodeid)]
        self._test = ""
        return list(dict.fromkeys(found))

    def _pending(self, owner: str) -> list[asyncio.Task[Any]]:
        return [task for task, who in list(self._owners.items()) if who == owner and not task.done()]

    def _owner_now(self) -> str:
        if self._setting_up and self._setting_up[-1]:
            return self._setting_up[-1]
        return self._test

    def _factory(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        parent = asyncio.current_task(loop) if loop.is_running() else None
        inherited = self._owners.get(parent) if parent is not None else None
        owner = inherited if inherited is not None else self._owner_now()
        if owner:
            self._owners[task] = owner
        return task

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        wide = fixturedef.scope != "function"
        # A wider fixture owns what its setup starts; a function-scoped one leaves ownership to the test
        # (or to the wider fixture that requested it).
        inner = self._setting_up[-1] if self._setting_up else ""
        self._setting_up.append(f"fixture {fixturedef.argname} ({fixturedef.scope})" if wide else inner)
        try:
            result = yield
        finally:
            self._setting_up.pop()
        runner = _RUNNER.fullmatch(fixturedef.argname)
        if runner is not None:
            self._adopt(result.get_loop(), fixturedef, function_scoped=runner.group(1) == "function")
        return result

    def _adopt(
        self, loop: asyncio.AbstractEventLoop, fixturedef: pytest.FixtureDef[Any], function_scoped: bool
    ) -> None:
        """Record the tasks of a loop pytest-asyncio just created."""
        if loop.get_task_factory() is None:
            loop.set_task_factory(self._factory)
        if function_scoped:
            # Runs after the fixtures on this loop are finalized and before the runner closes the loop
            # (which would cancel what is left, unseen).
            fixturedef.addfinalizer(self._before_loop_closes)

    def _before_loop_closes(self) -> None:
        if self._test:
            self._found.setdefault(self._test, []).extend(
                describe(task) for task in self._pending(self._test)
            )


def describe(task: asyncio.Task[Any]) -> str:
    """One line naming a task and where its coroutine is suspended."""
    coro = task.get_coro()
    where = ""
    frame = getattr(coro, "cr_frame", None)
    if frame is not None:
        where = f" at {frame.f_code.co_filename}:{frame.f_lineno}"
    name = getattr(coro, "__qualname__", repr(coro))
    cancelling = " (cancel requested, never awaited)" if task.cancelling() else ""
    return f"task {task.get_name()!r} running {name}(){where}{cancelling}"
