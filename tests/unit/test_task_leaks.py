"""The leak check (tests/conftest.py, tests/task_leaks.py) fails exactly the tests that leave tasks running.

It runs a small suite in a child pytest with our conftest: a test, a function-scoped fixture and a test on
a loop of its own each leak a task; a session fixture whose task keeps spawning children, a fixture that
cleans up, and finished tasks are all fine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SAMPLE = """
import asyncio
import pytest
import pytest_asyncio


@pytest_asyncio.fixture(scope="session")
async def service():
    async def spawner():
        while True:
            await asyncio.sleep(0.01)
            asyncio.get_running_loop().create_task(asyncio.sleep(3600), name="service child")

    task = asyncio.create_task(spawner(), name="service")
    yield task
    task.cancel()


@pytest_asyncio.fixture
async def tidy():
    task = asyncio.create_task(asyncio.sleep(3600), name="tidy")
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture
async def sloppy():
    yield asyncio.create_task(asyncio.sleep(3600), name="sloppy")


async def forever():
    await asyncio.Event().wait()


async def test_leaks():
    asyncio.create_task(forever(), name="forgotten")


async def test_uses_a_long_lived_service_and_a_tidy_fixture(service, tidy):
    await asyncio.sleep(0.05)


async def test_with_a_sloppy_fixture(sloppy):
    pass


async def test_finished_tasks_are_fine():
    await asyncio.create_task(asyncio.sleep(0))


@pytest.mark.asyncio(loop_scope="function")
async def test_leaks_on_its_own_loop():
    asyncio.create_task(asyncio.sleep(3600), name="own loop")


def test_sync():
    pass
"""

INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = session
asyncio_default_test_loop_scope = session
"""


def test_only_the_tests_that_leave_tasks_running_fail_and_each_task_is_named(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "conftest.py").write_text("from tests.conftest import no_leaked_tasks, pytest_configure\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rE", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout
    failed = sorted(
        line.split("::")[1].split(" ")[0] for line in out.splitlines() if line.startswith("ERROR ")
    )
    assert failed == ["test_leaks", "test_leaks_on_its_own_loop", "test_with_a_sloppy_fixture"], out
    assert "6 passed, 3 errors" in out, out
    assert "task 'forgotten' running forever() at " in out, out
    assert "task 'sloppy' running sleep()" in out, out
    assert "task 'own loop' running sleep()" in out, out
    assert "service" not in out.split("short test summary")[0].split("ERRORS")[1], "long-lived tasks blamed"
