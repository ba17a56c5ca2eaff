"""kube.http1 under the Client, over real TLS on 127.0.0.1: watches stream, connections are kept and
replaced, and a broken or silent server is Unavailable, never a hang or a wrong answer.

aiohttp plays a well-behaved server; `raw_server` writes exact bytes, so the parser (h11) is shown the
framings and breakages a real server or a proxy in between can produce: chunks cut anywhere, trailers,
`Connection: close`, close-delimited bodies, repeated headers, garbage."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.incluster import InClusterConfig, InClusterTransport

from .tls import mount, serving_context

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Peer = tuple[asyncio.StreamReader, asyncio.StreamWriter]


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


@asynccontextmanager
async def raw_server(
    tmp_path: Path, answers: Sequence[Sequence[bytes]]
) -> AsyncIterator[tuple[Client, list[int]]]:
    """A TLS server that answers the n-th request it reads with the pieces of `answers[n]`, each written and
    flushed on its own (a short pause between them), and a Client reaching it in-cluster style; also yields
    how many requests each accepted connection carried. A connection is closed after the last answer and
    after one that asks for it (`Connection: close`, or HTTP/1.0's body running to the connection's end)."""
    context, ca = serving_context(tmp_path)
    pending = list(answers)
    per_connection: list[int] = []
    handlers: set[asyncio.Task[None]] = set()

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        per_connection.append(0)
        try:
            while pending:
                await reader.readuntil(b"\r\n\r\n")
                per_connection[-1] += 1
                pieces = pending.pop(0)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                answer = b"".join(pieces)
                if answer.startswith(b"HTTP/1.0") or b"\r\nconnection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up
        finally:
            writer.close()

    server = await asyncio.start_server(reply, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}
    config = InClusterConfig.from_environ(env, mount(tmp_path / "sa", "token", ca))
    try:
        async with Client(InClusterTransport(config), retries=0) as kube:
            yield kube, per_connection
        if handlers:  # each ends on the client's hang-up; none is left for the loop to cancel
            await asyncio.wait(handlers, timeout=5)
    finally:
        server.close()
        await server.wait_closed()


def cut(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


NAMESPACE = b'{"kind":"Namespace"}'
KEPT = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n" + NAMESPACE
EVENTS = [b'{"type":"ADDED","n":%d}\n' % i for i in range(3)]
WATCH = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    # a chunk extension, a chunk holding one event and a half, the rest of it with the third event
    + b"%x;name=value\r\n%s\r\n" % (len(EVENTS[0]), EVENTS[0])
    + b"%x\r\n%s\r\n" % (len(EVENTS[1]) + 5, EVENTS[1] + EVENTS[2][:5])
    + b"%X\r\n%s\r\n" % (len(EVENTS[2]) - 5, EVENTS[2][5:])
    + b"0\r\nX-Trailer: t\r\n\r\n"
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(WATCH)])
async def test_a_chunked_watch_cut_anywhere_yields_its_events_and_keeps_the_connection(
    tmp_path: Path, size: int
) -> None:
    async with raw_server(tmp_path, [[WATCH[:40], *cut(WATCH[40:], size)], [KEPT]]) as (kube, per_connection):
        async with kube.stream("/api/v1/pods", params={"watch": "1"}, read_timeout=5) as lines:
            received = [line async for line in lines]
        assert (await kube.get(resources.NAMESPACES, "default"))["kind"] == "Namespace"
    assert received == [event.rstrip(b"\n") for event in EVENTS]
    assert per_connection == [2]  # the watch was read to its end, so its connection carried the GET


async def test_an_answer_asking_to_close_is_read_whole_and_its_connection_is_not_reused(
    tmp_path: Path,
) -> None:
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 20\r\n\r\n" + NAMESPACE
    until_eof = b"HTTP/1.0 200 OK\r\n\r\n" + NAMESPACE  # no length: the body ends with the connection
    async with raw_server(tmp_path, [[close], [until_eof], [KEPT], [KEPT]]) as (kube, per_connection):
        for _ in range(4):
            assert (await kube.get(resources.NAMESPACES, "default"))["kind"] == "Namespace"
    assert per_connection == [1, 1, 2]


async def test_repeated_warning_headers_reach_the_caller(tmp_path: Path) -> None:
    answer = KEPT.replace(b"\r\n\r\n", b'\r\nWarning: 299 - "one"\r\nwarning: 299 - "two"\r\n\r\n')
    warnings: list[str] = []
    async with raw_server(tmp_path, [[answer]]) as (kube, _):
        await kube.request("GET", "/api/v1/namespaces/default", warnings=warnings)
    assert warnings == ['299 - "one"', '299 - "two"']


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        pytest.param(
            b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kind":', "complete", id="body-cut-short"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk", id="bad-chunk-size"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}", "complete", id="chunk-cut"
        ),
        pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", "broken HTTP answer", id="not-http"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", "broken HTTP answer", id="bad-status"),
        pytest.param(b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", "broken HTTP answer", id="bad-header"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 2**17, "broken HTTP answer", id="head-too-long"),
        pytest.param(b"", "closed the connection before answering", id="closed-without-answering"),
    ],
)
async def test_a_broken_answer_is_unavailable(tmp_path: Path, answer: bytes, says: str) -> None:
    async with raw_server(tmp_path, [[answer]]) as (kube, _):
        with pytest.raises(errors.Unavailable, match=says):
            await kube.get(resources.NAMESPACES, "default")
