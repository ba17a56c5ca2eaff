"""A small HTTP/1.1 client on asyncio streams: what the in-cluster transport needs, without aiohttp.

Why it exists: aiohttp costs about 14 MB resident per process (client, cookie jar, websocket, multipart,
attrs, yarl, multidict), and a node agent inside a Pod uses one verb of it. kube-apiserver answers
HTTP/1.1 with a Content-Length or a chunked body (watches are chunked, one event per chunk); we send JSON
and ask for no compression. Idle connections are kept for the next request; a response read to its end
returns its connection to the pool, one left early (a watch that was stopped) closes it. Every failure
is an OSError (ConnectionError for a broken or malformed answer, ssl.SSLError for TLS) or TimeoutError,
the two kube.client maps to Unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import NamedTuple, TypeVar

T = TypeVar("T")

MAX_HEADER_BYTES = 2**16
"""Status line plus headers; a longer head is a broken answer (asyncio's own default limit)."""
READ_PIECE = 2**16
"""Bytes read at a time from a Content-Length body."""
IDLE_KEEP_S = 30.0
"""Seconds an idle connection is kept; older ones may have been closed by the server (its idle timeout)."""


class StreamTimeout(NamedTuple):
    """For a long-lived response: seconds to connect, and the longest silence between two reads."""

    sock_connect: float
    sock_read: float


Timeout = float | StreamTimeout | None
"""A float bounds connecting, sending and each read of the answer; None waits forever."""


class Headers:
    """Response headers, looked up case-insensitively (the last of repeated names wins)."""

    def __init__(self, pairs: Mapping[str, str]) -> None:
        self._items = {name.lower(): value for name, value in pairs.items()}

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._items.get(name.lower(), default)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = 0.0

    @property
    def open(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


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
        self._done = status in (204, 304)
        self._reusable = (headers.get("Connection") or "").lower() != "close"

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the connection back when the body was read to its end, otherwise close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self.pool.give_back(conn, reusable=self._done and self._reusable)

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.iter_any()])

    async def iter_any(self) -> AsyncIterator[bytes]:
        """The body as it arrives (each chunk of a chunked body on its own)."""
        if self._done:
            return
        if self._conn is None:
            raise ConnectionError("the response was already released")
        reader = self._conn.reader
        try:
            if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
                while size := await self._chunk_size(reader):
                    yield await self._timed(reader.readexactly(size))
                    await self._timed(reader.readexactly(2))
                while await self._timed(reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
            elif (length := self.headers.get("Content-Length")) is not None:
                left = int(length)
                while left:
                    piece = await self._timed(reader.read(min(left, READ_PIECE)))
                    if not piece:
                        raise ConnectionResetError(f"connection closed with {left} bytes of the body unread")
                    left -= len(piece)
                    yield piece
            else:  # delimited by the end of the connection
                self._reusable = False
                while piece := await self._timed(reader.read(READ_PIECE)):
                    yield piece
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise ConnectionResetError(f"broken HTTP answer: {exc}") from exc
        self._done = True

    async def _chunk_size(self, reader: asyncio.StreamReader) -> int:
        line = await self._timed(reader.readuntil(b"\r\n"))
        return int(line.split(b";", 1)[0].strip(), 16)

    async def _timed(self, step: Awaitable[T]) -> T:
        async with asyncio.timeout(self._read_timeout):
            return await step


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
        head = [f"{method} {target} HTTP/1.1", f"Host: {self._authority}", "Accept-Encoding: identity"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        await self._slots.acquire()
        try:
            conn, reused = await self._connection(connect_s)
            try:
                return await self._exchange(conn, message, read_s)
            except (ConnectionError, asyncio.IncompleteReadError):
                if not (reused and method == "GET"):
                    raise
            # A kept connection the server had just closed: a read is sent once more on a new one; other
            # verbs fail here and kube.client decides (it retries them as any other Unavailable).
            conn, _ = await self._connection(connect_s, reuse=False)
            return await self._exchange(conn, message, read_s)
        except BaseException:
            self._slots.release()
            raise

    async def _exchange(self, conn: _Connection, message: bytes, read_s: float | None) -> Response:
        try:
            async with asyncio.timeout(read_s):
                conn.writer.write(message)
                await conn.writer.drain()
                raw = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as exc:
            conn.close()
            raise ConnectionResetError("HTTP answer head too long") from exc
        except asyncio.IncompleteReadError as exc:
            conn.close()
            raise ConnectionResetError("the server closed the connection before answering") from exc
        except BaseException:
            conn.close()
            raise
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError) as exc:
            conn.close()
            raise ConnectionResetError(f"not an HTTP answer: {lines[0][:80]!r}") from exc
        pairs = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        headers = Headers({name.strip(): value.strip() for name, value in pairs.items()})
        return Response(self, conn, status, headers, read_s)

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
