"""Rules every test follows: it leaves no asyncio task running (see tests/task_leaks.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.task_leaks import TaskLeaks

_LEAKS = TaskLeaks()


def pytest_configure(config: pytest.Config) -> None:
    # Registered as a plugin, not as conftest hooks, so that it also sees the setup of session-scoped
    # fixtures (a conftest's hooks apply only to nodes under its own directory).
    if not config.pluginmanager.is_registered(_LEAKS):
        config.pluginmanager.register(_LEAKS, "task-leaks")


@pytest.fixture(autouse=True)
def no_leaked_tasks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if a task it started is still pending once it and its fixtures are done.

    Autouse fixtures are set up before the test's other function-scoped fixtures and torn down after them,
    so this check sees the state after their teardown.
    """
    _LEAKS.begin(request.node.nodeid)
    yield
    leaked = _LEAKS.end(request.node.nodeid)
    if leaked:
        lines = "\n  ".join(leaked)
        pytest.fail(f"{len(leaked)} asyncio task(s) left running by this test:\n  {lines}", pytrace=False)
