"""run_until_signal: SIGTERM stops a process gracefully; a second signal forces it."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap

import pytest

from gpustack_operator.runtime.signals import run_until_signal
from gpustack_operator.runtime.tasks import Supervisor

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from gpustack_operator.runtime import Supervisor, run_until_signal

    STUBBORN = sys.argv[1] == "stubborn"

    async def server() -> None:
        print("ready", flush=True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            print("cancelled", flush=True)
            if STUBBORN:
                await asyncio.Event().wait()
            raise
        finally:
            print("cleaned up", flush=True)

    async def setup(sup: Supervisor) -> None:
        sup.spawn("server", server)

    sys.exit(asyncio.run(run_until_signal(setup, grace=30)))
    """
)


async def start(mode: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SCRIPT, mode, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        assert await proc.stdout.readline() == b"ready\n"
    return proc


async def test_sigterm_stops_the_process_gracefully_with_exit_code_zero() -> None:
    proc = await start("polite")
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["cancelled", "cleaned up"]


async def test_second_sigterm_forces_exit_when_a_task_will_not_stop() -> None:
    proc = await start("stubborn")
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(30):
        assert await proc.stdout.readline() == b"cancelled\n"
        proc.send_signal(signal.SIGTERM)
        await proc.communicate()
    assert proc.returncode == -signal.SIGTERM


async def test_crashed_task_stops_the_rest_and_exits_nonzero() -> None:
    stopped = asyncio.Event()

    async def crashes() -> None:
        raise RuntimeError("lost the lease")

    async def server() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    async def setup(sup: Supervisor) -> None:
        sup.spawn("server", server)
        sup.spawn("leader election", crashes)

    async with asyncio.timeout(10):
        assert await run_until_signal(setup, grace=5) == 1
    assert stopped.is_set()


async def test_signal_handler_in_process_stops_and_is_removed_afterwards() -> None:
    loop = asyncio.get_running_loop()

    async def setup(sup: Supervisor) -> None:
        async def raise_signal() -> None:
            await asyncio.sleep(0)
            signal.raise_signal(signal.SIGUSR1)
            await asyncio.Event().wait()

        sup.spawn("signaller", raise_signal)

    # If no handler were installed, SIGUSR1's default action would kill pytest: fail softly instead.
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        async with asyncio.timeout(10):
            assert await run_until_signal(setup, signals=[signal.SIGUSR1], grace=5) == 0
        assert not loop.remove_signal_handler(signal.SIGUSR1), "handler must be uninstalled after the run"
    finally:
        signal.signal(signal.SIGUSR1, previous)


async def test_exception_in_setup_propagates_after_stopping_what_it_started() -> None:
    sup = Supervisor()

    async def setup(sup: Supervisor) -> None:
        async def eternal() -> None:
            await asyncio.Event().wait()

        sup.spawn("server", eternal)
        raise OSError("port in use")

    with pytest.raises(OSError, match="port in use"):
        await run_until_signal(setup, supervisor=sup, grace=5)
    assert sup.names == []
