"""Shared test helpers: poll for a condition instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """Await probe() until it returns something truthy; fail with the last answer after timeout."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = await probe()
        except AssertionError as exc:
            last = exc
            value = None
        if value:
            return value
        last = value if last is None or value is not None else last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout:.0f}s (last: {last!r})")


async def etcd_revision(etcd_port: int) -> int:
    """etcd's current revision, read through its HTTP/JSON gateway (a range over the key "/")."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://127.0.0.1:{etcd_port}/v3/kv/range", json={"key": "Lw=="}) as resp,
    ):
        resp.raise_for_status()
        return int((await resp.json())["header"]["revision"])


async def compact_etcd(etcd_port: int) -> int:
    """Compact etcd's history up to its current revision, so every older resourceVersion is 410 Gone."""
    import aiohttp

    revision = await etcd_revision(etcd_port)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"http://127.0.0.1:{etcd_port}/v3/kv/compaction",
            json={"revision": str(revision), "physical": True},
        ) as resp,
    ):
        resp.raise_for_status()
    return revision
