"""Shared test helpers: poll for a condition instead of sleeping, and the sandbox's etcd gateway.

`eventually` is the one way tests (and benchmarks) wait for something to become true, and `consistently`
the one way they assert that something stays true (nothing happens) over a window; a new wait loop or a
bare sleep in a test is a second implementation with its own timeout and error message to get wrong, and a
sleep followed by one look cannot tell "nothing happened" from "it happened and was undone".
`exposed` reads a number out of a Prometheus exposition, as a scrape sees it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")

FIRST_INTERVAL = 0.001


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T | None], *, timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
) -> Any:
    """Call probe() (sync or async) until it returns something truthy, and return that.

    The first retries come quickly (1 ms, doubling) so that an in-process condition is seen as soon as the
    loop has moved; later ones every `interval` seconds, so that a real cluster is not hammered. A probe that
    raises AssertionError counts as "not yet" and its message is kept: after `timeout` seconds the test
    fails naming `what` and the last answer or assertion.
    """
    deadline = time.monotonic() + timeout
    pause = min(FIRST_INTERVAL, interval)
    last: object = None
    while True:
        try:
            value = await _ask(probe)
        except AssertionError as exc:
            last = exc
            value = None
        if value:
            return value
        last = value if last is None or value is not None else last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout:g}s (last: {last!r})")
        await asyncio.sleep(pause)
        pause = min(pause * 2, interval)


async def _ask(probe: Callable[[], Any]) -> Any:
    """The probe's answer, awaited when it is a coroutine (probes may be sync or async)."""
    value = probe()
    return await value if inspect.isawaitable(value) else value


async def consistently(
    probe: Callable[[], Any],
    *,
    duration: float,
    interval: float = 0.25,
    what: str = "condition",
) -> None:
    """Call probe() (sync or async) every `interval` seconds for `duration` seconds; every answer must be
    truthy. The first falsy answer, or AssertionError (its message kept), fails the test at once, naming
    `what`, the answer and when it came."""
    start = time.monotonic()
    deadline = start + duration
    while True:
        try:
            value = await _ask(probe)
        except AssertionError as exc:
            raise AssertionError(f"{what} broke after {time.monotonic() - start:.1f}s: {exc}") from exc
        if not value:
            raise AssertionError(f"{what} broke after {time.monotonic() - start:.1f}s (answer: {value!r})")
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))


async def grpc_calls_settled(timeout: float = 10.0) -> None:
    """Wait until grpc.aio has delivered the status of every call of this loop: it does so in a task of its
    own (`_handle_status_once_received`) that may still be pending after the channel is closed and the
    call cancelled, and on a busy machine after a test has ended; the task-leak check would count it."""

    def settled() -> bool:
        return not any(
            "_handle_status_once_received" in repr(task.get_coro()) and not task.done()
            for task in asyncio.all_tasks()
        )

    await eventually(settled, timeout=timeout, interval=0.01, what="grpc calls' statuses delivered")


async def yield_to_loop(times: int = 5) -> None:
    """Let other ready tasks run a few steps (no wall-clock time involved)."""
    for _ in range(times):
        await asyncio.sleep(0)


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


def exposed(text: str, sample: str, /, **labels: str) -> float:
    """The sum of the samples named `sample` (`..._total`, `..._count`, `..._bucket` as exposed) whose
    labels include `labels`, in the Prometheus exposition `text`; 0 when there are none."""
    return sum(
        found.value
        for family in text_string_to_metric_families(text)
        for found in family.samples
        if found.name == sample and labels.items() <= found.labels.items()
    )
