"""The main loop of a CLI command: run supervised tasks until SIGTERM/SIGINT, then stop gracefully.

Kubernetes stops a pod with SIGTERM and waits `terminationGracePeriodSeconds` before SIGKILL; in that
window the operator should release its leases, let reconciles in flight finish and close its
servers. Python's default SIGTERM action kills the process at once, so `run_until_signal()` installs
handlers that turn the first SIGTERM/SIGINT into a supervisor stop. The handlers are removed as soon
as stopping starts, so a second signal gets the default behaviour and forces the exit.

Usage in a console script::

    async def setup(sup: Supervisor) -> None:
        sup.spawn("webhook server", server.run, restart="on-failure")

    def main() -> int:
        return asyncio.run(run_until_signal(setup))
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence

from .tasks import Supervisor

__all__ = ["run_until_signal"]

logger = logging.getLogger(__name__)

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


async def run_until_signal(
    setup: Callable[[Supervisor], Awaitable[None]],
    *,
    grace: float = 30.0,
    signals: Sequence[signal.Signals] = STOP_SIGNALS,
    supervisor: Supervisor | None = None,
) -> int:
    """Run `setup(supervisor)`, wait for a signal or for a task to end for good, stop everything.

    Returns a process exit code: 0 after a signal or a clean finish, 1 if a task failed or some
    task did not stop within `grace` seconds. An exception from `setup` propagates (after stopping
    whatever it had started).
    """
    sup = supervisor or Supervisor("main")
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def uninstall() -> None:
        while installed:
            loop.remove_signal_handler(installed.pop())

    def on_signal(sig: signal.Signals) -> None:
        logger.info("Received %s; stopping gracefully (send it again to force)", sig.name)
        uninstall()
        sup.request_stop(f"signal {sig.name}")

    for sig in signals:
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (ValueError, RuntimeError, NotImplementedError) as e:  # not the main thread, or Windows
            logger.warning("Cannot handle %s here (%s); stop by cancelling instead", sig.name, e)
        else:
            installed.append(sig)
    try:
        await setup(sup)
        reason = await sup.wait()
        logger.info("Stopping %s: %s", sup.name, reason.name)
    finally:
        uninstall()
        stragglers = await sup.stop(grace)
    if reason.error is not None or stragglers:
        return 1
    return 0
