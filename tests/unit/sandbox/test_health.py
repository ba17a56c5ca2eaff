"""A probe with a readiness predicate counts a 200 only when the predicate accepts the body."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from gpustack_operator.sandbox import health, process


@pytest_asyncio.fixture
async def url() -> AsyncIterator[str]:
    async def nodes(_: web.Request) -> web.Response:
        return web.Response(text='{"items": ["published"]}')

    app = web.Application()
    app.router.add_get("/nodes", nodes)
    runner = web.AppRunner(app)
    await runner.setup()
    port = process.free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/nodes"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("word", "healthy", "answer"),
    [
        pytest.param("published", True, "ready (judged from what it wrote)", id="predicate-holds"),
        pytest.param("pending", False, "not ready yet", id="predicate-fails"),
    ],
)
async def test_a_200_is_ready_only_when_the_predicate_accepts_the_body(
    url: str, word: str, healthy: bool, answer: str
) -> None:
    assert await health.check(health.Probe(url, ready=lambda body: word in body)) == (healthy, answer)


async def test_without_a_predicate_a_200_is_ready_and_the_body_is_reported(url: str) -> None:
    assert await health.check(health.Probe(url)) == (True, '200 {"items": ["published"]}')
