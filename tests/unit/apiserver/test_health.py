"""/healthz, /readyz and /metrics as a probe or a scraper sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, Counter

from gpustack_operator.apiserver.health import Check, build_app, parse_address

MakeClient = Callable[..., Awaitable[TestClient]]


@pytest_asyncio.fixture
async def client_for() -> AsyncIterator[MakeClient]:
    clients: list[TestClient] = []

    async def make(**kw: Any) -> TestClient:
        client = TestClient(TestServer(build_app(**kw)))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_readyz_fails_naming_the_check_that_is_not_ready(client_for: MakeClient) -> None:
    state = {"synced": False}
    ready: Mapping[str, Check] = {"prepare": lambda: True, "informers": lambda: state["synced"]}
    client = await client_for(ready=ready)
    resp = await client.get("/readyz")
    assert resp.status == 500
    text = await resp.text()
    assert "[+]prepare ok" in text
    assert "[-]informers failed" in text
    state["synced"] = True
    resp = await client.get("/readyz")
    assert resp.status == 200
    assert await resp.text() == "readyz check passed\n"


async def test_a_check_that_raises_counts_as_failed(client_for: MakeClient) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    client = await client_for(live={"loop": broken})
    resp = await client.get("/healthz")
    assert resp.status == 500
    assert "[-]loop failed" in await resp.text()


async def test_verbose_lists_every_check_even_when_healthy(client_for: MakeClient) -> None:
    client = await client_for(live={"ping": lambda: True})
    resp = await client.get("/healthz?verbose")
    assert resp.status == 200
    assert await resp.text() == "[+]ping ok\nhealthz check passed\n"


async def test_metrics_serves_the_registry_in_prometheus_text_format(client_for: MakeClient) -> None:
    registry = CollectorRegistry()
    Counter("demo_things", "Things.", registry=registry).inc(3)
    client = await client_for(registry=registry)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=")
    assert "demo_things_total 3.0" in await resp.text()


async def test_only_the_endpoints_asked_for_are_served(client_for: MakeClient) -> None:
    client = await client_for(live={"ping": lambda: True})
    assert (await client.get("/metrics")).status == 404
    assert (await client.get("/readyz")).status == 404


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("127.0.0.1:8080", ("127.0.0.1", 8080), id="host and port"),
        pytest.param(":8081", ("0.0.0.0", 8081), id="no host means every interface"),
        pytest.param("[::1]:9000", ("::1", 9000), id="IPv6 in brackets"),
        pytest.param("0", None, id="0 disables the server"),
    ],
)
def test_bind_addresses(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["8080", "localhost:", "host:http", "127.0.0.1:70000"])
def test_bad_bind_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="want host:port"):
        parse_address(text)
