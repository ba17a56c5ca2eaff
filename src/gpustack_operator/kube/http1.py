"""A small HTTP/1.1 client on asyncio streams: what the in-cluster transport needs, without aiohttp.

Why it exists: aiohttp costs about 14 MB resident per process (client, cookie jar, websocket, multipart,
attrs, yarl, multidict), and a node agent inside a Pod uses one verb of it. The protocol itself is h11's
(about 0.5 MB): it frames our requests and parses the answers (status line, headers, Content-Length,
chunked and close-delimited bodies, keep-alive and `Connection: close`); this module moves its bytes over
TLS streams, bounds each wait, and keeps idle connections. kube-apiserver answers watches chunked, one
event per chunk; we send JSON and ask for no compression. A response read to its end returns its
connection to the pool when h11 says the connection may carry another request; one left early (a watch
that was stopped) closes it. Every failure is an OSError (ConnectionError for a broken or malformed
answer, ssl.SSLError for TLS) or TimeoutError, the two kube.client maps to Unavailable; a request h11
refuses to frame (a header value with a line break) is its LocalProtocolError, a bug on our side.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import NamedTuple

import h11

MAX_HEADER_BYTES = 2**16
"""Status line plus headers; a longer head is a broken answer (asyncio's own default limit)."""
READ_PIECE = 2**16
"""Bytes read from the socket at a time."""
IDLE_KEEP_S = 30.0
"""Seconds an idle connection is kept; older ones may have been closed by the server (its idle timeout)."""


class StreamTimeout(NamedTuple):
    """For a long-lived response: seconds to connect, and the longest silence between two reads."""

    sock_connect: float
    sock_read: float


Timeout = float | StreamTimeout | None
"""A float bounds connecting, sending and each read of the answer; None waits forever."""


class Headers:
    """Response headers, looked up case-insensitively: `get` the last of repeated names, `getall` each."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self._items: dict[str, list[str]] = {}
        for name, value in pairs:
            self._items.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._items.get(name.lower())
        return values[-1] if values else default

    def getall(self, name: str, default: Iterable[str] = ()) -> list[str]:
        return list(self._items.get(name.lower(), default))


class _Connection:
    """One TLS connection and h11's view of the HTTP/1.1 exchange on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.idle_since = 0.0

    @property
    def open(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    @property
    def reusable(self) -> bool:
        """Both sides finished the exchange, neither asked to close, and nothing came after the answer."""
        states = (self.http.our_state, self.http.their_state)
        return states == (h11.DONE, h11.DONE) and not self.http.trailing_data[0]

    def close(self) -> None:
        self.writer.close()

    async def next_event(self, read_timeout: float | None) -> h11.Event:
        """h11's next event, reading the socket as it needs (each read within `read_timeout`)."""
        while True:
            try:
                event = self.http.next_event()
            except h11.RemoteProtocolError as exc:
                raise ConnectionResetError(f"broken HTTP answer: {exc}") from exc
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # bytes after the answer's end (a client sees no protocol switch)
                raise ConnectionResetError("broken HTTP answer: more bytes after its end")
            async with asyncio.timeout(read_timeout):
                data = await self.reader.read(READ_PIECE)
            if not data and self.http.their_state is h11.SEND_RESPONSE and not self.http.trailing_data[0]:
                raise ConnectionResetError("the server closed the connection before answering")
            self.http.receive_data(data)  # b"": the server closed; h11 says whether the answer was whole

    def buffered_end(self) -> bool:
        """Read what h11 already holds, without waiting: True when the answer's end is in it."""
        try:
            while isinstance(event := self.http.next_event(), h11.Data):
                pass
        except h11.RemoteProtocolError:
            return False
        return isinstance(event, h11.EndOfMessage)


class Response:
    """One answer: `status`, `headers`, `read()`, `content.iter_any()`; `async with` releases it."""

    def __init__(
        self, pool: Pool, conn: _Connection, status: int, headers: Headers, read_timeout: float | None
    ) -> None:
        self.pool = pool
        self._conn: _Connection | None = conn
        self.status, self.headers = status, headers
        self.content = self
        self._read_timeout = read_timeout
        self._done = False

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the connection back when the body was read to its end (or has none), otherwise close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            done = self._done or conn.buffered_end()
            self.pool.give_back(conn, reusable=done and conn.reusable)

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.iter_any()])

    async def iter_any(self) -> AsyncIterator[bytes]:
        """The body as it arrives (a chunk of a chunked body in one piece or more, never two together)."""
        if self._done:
            return
        if self._conn is None:
            raise ConnectionError("the response was already released")
        while not isinstance(event := await self._conn.next_event(self._read_timeout), h11.EndOfMessage):
            if not isinstance(event, h11.Data):
                raise ConnectionResetError(f"broken HTTP answer: {type(event).__name__} inside the body")
            yield bytes(event.data)
        self._done = True


class Pool:
    """Connections to one HTTPS server, at most `limit` in use at once, idle ones kept for reuse."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, limit: int = 100) -> None:
        self.host, self.port, self.context = host, port, context
        self._authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)

    async def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None, timeout: Timeout
    ) -> Response:
        """Send one request and read the answer's head; the body is the Response's to read."""
        connect_s: float | None
        read_s: float | None
        if isinstance(timeout, StreamTimeout):
            connect_s, read_s = timeout.sock_connect, timeout.sock_read
        else:
            connect_s = read_s = timeout
        fields = [("Host", self._authority), ("Accept-Encoding", "identity"), *headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            fields.append(("Content-Length", str(len(body or b""))))
        head = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in fields]
        request = h11.Request(method=method, target=target, headers=head)
        await self._slots.acquire()
        try:
            conn, reused = await self._connection(connect_s)
            try:
                return await self._exchange(conn, request, body, read_s)
            except ConnectionError:
                if not (reused and method == "GET"):
                    raise
            # A kept connection the server had just closed: a read is sent once more on a new one; other
            # verbs fail here and kube.client decides (it retries them as any other Unavailable).
            conn, _ = await self._connection(connect_s, reuse=False)
            return await self._exchange(conn, request, body, read_s)
        except BaseException:
            self._slots.release()
            raise

    async def _exchange(
        self, conn: _Connection, request: h11.Request, body: bytes | None, read_s: float | None
    ) -> Response:
        try:
            async with asyncio.timeout(read_s):
                message = conn.http.send(request) or b""
                if body:
                    message += conn.http.send(h11.Data(data=body)) or b""
                message += conn.http.send(h11.EndOfMessage()) or b""
                conn.writer.write(message)
                await conn.writer.drain()
                while isinstance(event := await conn.next_event(None), h11.InformationalResponse):
                    pass  # 1xx: the final answer follows
        except BaseException:
            conn.close()
            raise
        if not isinstance(event, h11.Response):
            conn.close()
            raise ConnectionResetError(f"broken HTTP answer: {type(event).__name__} instead of a head")
        headers = Headers((name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers)
        return Response(self, conn, event.status_code, headers, read_s)

    async def _connection(self, connect_s: float | None, *, reuse: bool = True) -> tuple[_Connection, bool]:
        """A kept connection (reused: True) when one is fresh enough, else a new one."""
        now = asyncio.get_running_loop().time()
        while reuse and self._idle:
            conn = self._idle.pop()
            if conn.open and now - conn.idle_since < IDLE_KEEP_S:
                return conn, True
            conn.close()
        async with asyncio.timeout(connect_s):
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.context, server_hostname=self.host, limit=MAX_HEADER_BYTES
            )
        return _Connection(reader, writer), False

    def give_back(self, conn: _Connection, *, reusable: bool) -> None:
        self._slots.release()
        if reusable and conn.open:
            conn.http.start_next_cycle()
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
        else:
            conn.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1.0):
                    await conn.writer.wait_closed()
