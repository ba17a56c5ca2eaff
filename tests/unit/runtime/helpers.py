"""Small async test helpers shared by the runtime tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(condition: Callable[[], bool], *, within: float = 5.0) -> None:
    """Yield to the event loop until `condition()` holds; fail after `within` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                if condition():
                    return
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise AssertionError(f"condition still false after {within}s") from None


async def yield_to_loop(times: int = 5) -> None:
    """Let other ready tasks run a few steps (no wall-clock time involved)."""
    for _ in range(times):
        await asyncio.sleep(0)
