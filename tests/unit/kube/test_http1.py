"""kube.http1 under the Client, over real TLS on 127.0.0.1: watches stream, connections are kept and
replaced, and a broken or silent server is Unavailable, never a hang or a wrong answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.incluster import InClusterConfig, InClusterTransport

from .tls import mount, serving_context

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def api_server(tmp_path: Path, handler: Handler, **runner_kw: float) -> AsyncIterator[Client]:
    """An HTTPS server answering every path with `handler`, and a Client reaching it in-cluster style."""
    context, ca = serving_context(tmp_path)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    # A handler still running when its client hangs up is cancelled, as the kube-apiserver ends a watch
    # whose client went away; otherwise it would outlive the test.
    runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True, **runner_kw)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(runner.addresses[0][1])}
    config = InClusterConfig.from_environ(env, mount(tmp_path / "sa", "token", ca))
    try:
        async with Client(InClusterTransport(config), retries=0) as kube:
            yield kube
    finally:
        await runner.cleanup()


async def test_a_watch_streams_each_event_as_it_is_sent_then_ends(tmp_path: Path) -> None:
    sent: list[int] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(3):
            sent.append(i)
            await response.write(b'{"type":"ADDED","n":%d}\n' % i)
            await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    received = []
    async with (
        api_server(tmp_path, watch) as kube,
        kube.stream("/api/v1/pods", params={"watch": "1"}, read_timeout=5) as lines,
    ):
        async for line in lines:
            received.append(line)
            assert len(sent) == len(received)  # each event arrives before the next is sent
    assert received == [b'{"type":"ADDED","n":%d}' % i for i in range(3)]


async def test_a_silent_watch_is_unavailable_after_its_read_timeout(tmp_path: Path) -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED"}\n')
        await asyncio.sleep(30)
        return response

    async with (
        api_server(tmp_path, hang) as kube,
        kube.stream("/api/v1/pods", params={}, read_timeout=0.3) as lines,
    ):
        first = await anext(lines)
        with pytest.raises(errors.Unavailable):
            await anext(lines)
    assert first == b'{"type":"ADDED"}'


async def test_requests_share_one_kept_connection(tmp_path: Path) -> None:
    ports: list[int] = []

    async def peer(request: web.Request) -> web.StreamResponse:
        ports.append(request.transport.get_extra_info("peername")[1] if request.transport else 0)
        return web.json_response({"kind": "Namespace"})

    async with api_server(tmp_path, peer) as kube:
        for _ in range(3):
            assert (await kube.get(resources.NAMESPACES, "default"))["kind"] == "Namespace"
    assert len(ports) == 3
    assert len(set(ports)) == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced(tmp_path: Path) -> None:
    async def ok(request: web.Request) -> web.StreamResponse:
        return web.json_response({"method": request.method})

    async with api_server(tmp_path, ok, keepalive_timeout=0.1) as kube:
        assert (await kube.get(resources.NAMESPACES, "a"))["method"] == "GET"
        await asyncio.sleep(0.5)  # the server's keep-alive ran out and it closed the connection
        assert (await kube.create(resources.NAMESPACES, {"metadata": {"name": "b"}}))["method"] == "POST"
        assert (await kube.get(resources.NAMESPACES, "a"))["method"] == "GET"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kind":', id="body-cut-short"),
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", id="bad-chunk-size"),
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", id="not-http"),
        pytest.param(b"", id="closed-without-answering"),
    ],
)
async def test_a_broken_answer_is_unavailable(tmp_path: Path, answer: bytes) -> None:
    context, ca = serving_context(tmp_path)

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(reply, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}
    config = InClusterConfig.from_environ(env, mount(tmp_path / "sa", "token", ca))
    try:
        async with Client(InClusterTransport(config), retries=0) as kube:
            with pytest.raises(errors.Unavailable):
                await kube.get(resources.NAMESPACES, "default")
    finally:
        server.close()
        await server.wait_closed()
