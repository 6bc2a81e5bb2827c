"""The relay's HTTP/1.1 client: a request forwarded to an engine (a vLLM replica, or SMG in
front of them) and its answer streamed back to the client as it comes.

* One pool of kept-alive connections per upstream base URL (`UpstreamPools`), reused
  last-in first-out. Each connection is an asyncio protocol: the event loop tells it when
  its upstream closes it, so a closed connection is never taken from the pool and no
  connection is polled before reuse. An idle connection is dropped after
  `UPSTREAM_IDLE_S`, before the engines' own 5 s (see `keepalive`); at most
  `max_connections` are open to one upstream at a time (a request beyond them waits).
* `UpstreamPools.send` writes the request head and body in one write and returns the
  answer's status and headers with its body still to come; `relay_answer` passes the
  body to the client piece by piece as it arrives (the chunks of a chunked answer that
  arrived together as one piece, each piece passed on as read, never buffered whole,
  never re-encoded). A chunked answer (every stream) is piped when the server gives the
  client's connection (`ClientBody`): each read's chunks are written to the client from
  the upstream connection's read callback, with no task step, ASGI message or timer per
  read; a client that takes no more for now pauses the reading.
* Failures are httpx's exception types, as the rest of the serving app knows them: a
  refused connection is `httpx.ConnectError` (nothing reached the engine: the caller may
  place the request elsewhere), a connection that does not open within the connect
  timeout `httpx.ConnectTimeout`, an answer that stops for longer than the read timeout
  `httpx.ReadTimeout`, an answer broken off or malformed `httpx.RemoteProtocolError`.
* However the relay ends (answered, broken off by the engine, cancelled because the
  client hung up), the answer is closed: read whole, its connection goes back to the
  pool; otherwise the connection is closed, so the engine stops generating for nobody. A
  stream the engine breaks off reaches the client broken, never as a clean, shorter
  answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Protocol, cast
from urllib.parse import urlsplit

import httpx
from starlette.types import Send

from .keepalive import UPSTREAM_IDLE_S
from .relay import HOP_BY_HOP

__all__ = ["ClientBody", "UpstreamAnswer", "UpstreamPool", "UpstreamPools", "relay_answer"]

_HOP_BY_HOP = frozenset(name.encode() for name in HOP_BY_HOP)
_MAX_HEAD_BYTES = 64 * 1024  # an answer's status line and headers
_MAX_CHUNK_LINE = 4096  # a chunk's size line, with any extensions
_READ_BYTES = 64 * 1024  # passed on at most at a time (answers framed by length or close)
_HIGH_WATER = 256 * 1024  # buffered and not yet passed on: reading pauses above this
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_HEAD_BYTES = 4096  # what `relay_answer` keeps of an answer's start
_TAIL_BYTES = 16384  # ... and of its end


def _nothing() -> None:
    return None


def _take(buffer: bytearray, start: int, size: int, skip: int = 0) -> bytes:
    """`size` bytes of `buffer` from `start` (one copy), and everything before them and
    `skip` bytes after them dropped from it."""
    with memoryview(buffer) as view:
        data = bytes(view[start : start + size])
    del buffer[: start + size + skip]
    return data


def _complete_chunks(buffer: bytearray) -> tuple[bytes, int]:
    """The data of the complete chunks at the start of a chunked body's `buffer`, joined
    and removed from it, and where the last chunk's size line ends if that line has
    arrived (-1 if not). Raises `httpx.RemoteProtocolError` on malformed framing."""
    spans: list[tuple[int, int]] = []
    start = 0
    last = -1
    while True:
        end = buffer.find(b"\r\n", start)
        if end < 0:
            if len(buffer) - start > _MAX_CHUNK_LINE:
                raise httpx.RemoteProtocolError("a chunk size line is too long")
            break
        size_text = bytes(buffer[start:end]).partition(b";")[0].strip()
        if not size_text or not _HEX_DIGITS.issuperset(size_text):
            raise httpx.RemoteProtocolError(f"malformed chunk size {size_text[:40]!r}")
        size = int(size_text, 16)
        if size == 0:
            last = end + 2
            break
        data_end = end + 2 + size
        if len(buffer) < data_end + 2:
            break
        if buffer[data_end : data_end + 2] != b"\r\n":
            raise httpx.RemoteProtocolError("a chunk does not end with CRLF")
        spans.append((end + 2, data_end))
        start = data_end + 2
    with memoryview(buffer) as view:
        data = b"".join([view[a:b] for a, b in spans])
    del buffer[:start]
    return data, last - start if last >= 0 else -1


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection to an upstream: what it received and not yet read, and a
    future to wait on for more."""

    def __init__(self, pool: UpstreamPool, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False  # by the upstream, or lost
        self.paused = False  # reading, while the buffer is over `_HIGH_WATER`
        self.waiter: asyncio.Future[None] | None = None  # a read: more bytes
        self.drained: asyncio.Future[None] | None = None  # writing paused: resumed
        self.idle_since = 0.0
        self.taker: Callable[[], None] | None = None  # while piping: called on each read
        self.read_at = 0.0  # the loop's time at the last read, while piping

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream's, on any event loop

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.taker is not None:
            self.read_at = self.loop.time()
            self.taker()
            return
        if len(self.buffer) > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _expire(self, waiter: asyncio.Future[None], writing: bool) -> None:
        """End a wait that lasted too long, and the connection with it."""
        pool = self.pool
        if not waiter.done():
            waiter.set_exception(
                httpx.WriteTimeout(f"{pool.base_url} took no data for {pool.write_timeout} s")
                if writing
                else httpx.ReadTimeout(f"{pool.base_url} sent nothing for {pool.read_timeout} s")
            )
        self.abort()

    async def _wait(self, waiter: asyncio.Future[None], writing: bool) -> None:
        """Wait for `waiter`, at most the pool's read (or write) timeout."""
        if not writing:
            self.waiter = waiter
        timeout = self.pool.write_timeout if writing else self.pool.read_timeout
        timer = self.loop.call_later(timeout, self._expire, waiter, writing)
        try:
            await waiter
        finally:
            timer.cancel()
            if not writing:
                self.waiter = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None and not self.loop.is_closed():
            self.transport.abort()

    async def more(self) -> None:
        """Wait for more bytes; raises `httpx.RemoteProtocolError` at the end of the
        stream."""
        if self.closed:
            raise httpx.RemoteProtocolError("the upstream closed the connection mid-answer")
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        await self._wait(self.loop.create_future(), writing=False)

    async def drain(self) -> None:
        """Wait until the transport has written what it holds (above its high-water
        mark)."""
        while self.drained is not None and not self.closed:
            await self._wait(self.drained, writing=True)

    async def piped(self, take: Callable[[bytes], bool]) -> None:
        """Pass a chunked body's complete chunks to `take` from `data_received`, as each
        read brings them (no task step per read), until the last chunk's size line has
        come, `take` returns False (the client takes no more for now), the buffer holds
        more than `_HIGH_WATER` bytes of one chunk, the framing is malformed or the
        upstream closes; returns then, the rest left in the buffer. Raises
        `httpx.ReadTimeout` when no byte comes for the read timeout."""
        waiter = self.loop.create_future()
        buffer = self.buffer
        timer: asyncio.TimerHandle

        def taken() -> None:
            try:
                data, last = _complete_chunks(buffer)
                if (data and not take(data)) or last >= 0 or len(buffer) > _HIGH_WATER:
                    stop()
            except httpx.RemoteProtocolError:
                stop()  # the caller reads the same framing again, and raises
            except Exception as error:  # `take`'s: raised by `piped`, not the event loop
                self.taker = None
                if not waiter.done():
                    waiter.set_exception(error)

        def stop() -> None:
            self.taker = None
            self._wake()

        def overdue() -> None:
            nonlocal timer
            idle = self.loop.time() - self.read_at
            if idle < self.pool.read_timeout:
                timer = self.loop.call_later(self.pool.read_timeout - idle, overdue)
            else:
                self._expire(waiter, writing=False)

        if self.closed:
            return
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self.waiter = waiter
        self.taker = taken
        self.read_at = self.loop.time()
        timer = self.loop.call_later(self.pool.read_timeout, overdue)
        try:
            await waiter
        finally:
            timer.cancel()
            self.taker = None
            self.waiter = None


class UpstreamAnswer:
    """An upstream's answer: `status_code`, `headers` (lower-case names, as raw bytes),
    its body from `body` (once). Close it with `close` however it is used."""

    def __init__(
        self,
        pool: UpstreamPool,
        connection: _Connection,
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        length: int | None,
        chunked: bool,
        keep_alive: bool,
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self._pool = pool
        self._connection: _Connection | None = connection
        self._length = length  # None: chunked or to the end of the connection
        self._chunked = chunked
        self._keep_alive = keep_alive
        self._complete = length == 0

    async def body(self) -> AsyncIterator[bytes]:
        """The body as it arrives: of a chunked answer, the chunks that arrived together
        as one piece; else as read."""
        connection = self._connection
        if connection is None or self._complete:
            return
        buffer = connection.buffer
        if self._chunked:
            while True:
                data, last = _complete_chunks(buffer)
                if data:
                    yield data
                if last >= 0:
                    await self._trailers(last)
                    return
                await connection.more()
        elif self._length is not None:
            left = self._length
            while left:
                if not buffer:
                    await connection.more()
                data = _take(buffer, 0, min(left, len(buffer), _READ_BYTES))
                left -= len(data)
                if not left:
                    self._complete = True
                yield data
        else:  # to the end of the connection
            while True:
                if not buffer:
                    if connection.closed:
                        self._complete = True
                        return
                    with contextlib.suppress(httpx.RemoteProtocolError):
                        await connection.more()
                    continue
                yield _take(buffer, 0, min(len(buffer), _READ_BYTES))

    @property
    def pipes(self) -> bool:
        """Whether `pipe` can pass this answer's body (chunked, not read yet)."""
        return self._chunked and self._connection is not None and not self._complete

    async def pipe(
        self, take: Callable[[bytes], bool], drained: Callable[[], Awaitable[None]]
    ) -> None:
        """Pass a chunked body to `take` as it arrives, the chunks that arrived together
        as one piece, each passed from the connection's read callback: no task step and
        no timer per read. `take` returns False when the client takes no more for now:
        reading pauses until `drained()` returns. Returns at the body's end; raises as
        `body` does."""
        connection = self._connection
        assert connection is not None and self._chunked, "pipe: a chunked answer's body"
        buffer = connection.buffer
        while True:
            data, last = _complete_chunks(buffer)
            writable = take(data) if data else True
            if last >= 0:
                await self._trailers(last)
                return
            if not writable:
                await drained()
            elif connection.closed or len(buffer) > _HIGH_WATER:
                await connection.more()  # raises at the end of the stream; resumes reading
            else:
                await connection.piped(take)

    async def _trailers(self, start: int) -> None:
        """Skip a chunked body's trailer section (ends with an empty line)."""
        assert self._connection is not None
        connection = self._connection
        buffer = connection.buffer
        while True:
            end = buffer.find(b"\r\n", start)
            while end < 0:
                if len(buffer) - start > _MAX_HEAD_BYTES:
                    raise httpx.RemoteProtocolError("the answer's trailers are too long")
                await connection.more()
                end = buffer.find(b"\r\n", start)
            line_empty = end == start
            start = end + 2
            if line_empty:
                del buffer[:start]
                self._complete = True
                return

    def close(self) -> None:
        """Give the connection back to its pool if the answer was read whole and the
        upstream keeps it open, else close it."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        reusable = self._complete and self._keep_alive and not connection.buffer
        self._pool.release(connection, reusable)


class UpstreamPool:
    """Kept-alive HTTP/1.1 connections to one upstream base URL (module docstring), made
    on the event loop they serve."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        write_timeout: float = 60.0,
        idle_s: float = UPSTREAM_IDLE_S,
        max_connections: int = 256,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream URL {base_url!r}: give http://host:port or https://...")
        self.base_url = base_url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.prefix = parts.path.rstrip("/")
        authority = parts.netloc.rpartition("@")[2]
        self._host_line = f"\r\nhost: {authority}".encode("latin-1")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.idle_s = idle_s
        self.opened = 0  # connections opened so far
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(max_connections)
        self._ssl: ssl.SSLContext | None = None

    async def send(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> UpstreamAnswer:
        """Send a request (`target`: path and query) and return the answer with its body
        still to come; raises `httpx.HTTPError` (module docstring)."""
        lines = [f"{method} {self.prefix}{target} HTTP/1.1".encode("latin-1"), self._host_line]
        for name, value in headers:
            lines.append(f"\r\n{name}: {value}".encode("latin-1"))
        if body or method not in ("GET", "HEAD"):
            lines.append(b"\r\ncontent-length: %d" % len(body))
        lines.append(b"\r\n\r\n")
        lines.append(body)
        request = b"".join(lines)
        await self._slots.acquire()
        connection: _Connection | None = None
        try:
            connection = await self._connection()
            assert connection.transport is not None
            connection.transport.write(request)
            if connection.drained is not None:
                await connection.drain()
            answer = await self._answer(connection, method)
        except BaseException:
            if connection is not None:
                self.release(connection, reusable=False)
            else:
                self._slots.release()
            raise
        return answer

    async def _connection(self) -> _Connection:
        now = self.loop.time()
        while self._idle:
            connection = self._idle.pop()
            fresh = now - connection.idle_since < self.idle_s
            if fresh and not connection.closed and not connection.buffer:
                self._busy.add(connection)
                return connection
            connection.abort()
        loop = self.loop
        context = None
        if self.tls:
            context = self._ssl = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, loop),
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {self.base_url} within {self.connect_timeout} s"
            ) from None
        except OSError as error:
            raise httpx.ConnectError(f"{self.base_url}: {error}") from None
        self.opened += 1
        self._busy.add(connection)
        return connection

    async def _answer(self, connection: _Connection, method: str) -> UpstreamAnswer:
        """Read the answer's head (after any 1xx heads)."""
        buffer = connection.buffer
        while True:
            end = buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(buffer) > _MAX_HEAD_BYTES:
                    raise httpx.RemoteProtocolError("the answer's head is too long")
                if connection.closed:
                    raise httpx.RemoteProtocolError(
                        f"{self.base_url} closed the connection without answering"
                    )
                await connection.more()
                end = buffer.find(b"\r\n\r\n")
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            status_line, *lines = head.split(b"\r\n")
            version, _, rest = status_line.partition(b" ")
            code = rest[:3]
            if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
                raise httpx.RemoteProtocolError(f"malformed status line {status_line[:80]!r}")
            status = int(code)
            if 100 <= status < 200 and status != 101:
                continue  # an interim answer: the final one follows
            break
        headers = []
        length: int | None = None
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        for line in lines:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
            name = name.lower()
            value = value.strip()
            if name == b"content-length":
                if not value.isdigit() or (length is not None and int(value) != length):
                    raise httpx.RemoteProtocolError(f"bad Content-Length {value[:40]!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
                if not chunked:
                    keep_alive = False  # framed by the end of the connection
            elif name == b"connection":
                tokens = {token.strip() for token in value.lower().split(b",")}
                if b"close" in tokens:
                    keep_alive = False
                elif b"keep-alive" in tokens:
                    keep_alive = True
            headers.append((name, value))
        if chunked:
            length = None
        elif method == "HEAD" or status in (204, 304) or status < 200:
            length = 0
        elif length is None:
            keep_alive = False  # framed by the end of the connection
        return UpstreamAnswer(self, connection, status, headers, length, chunked, keep_alive)

    def release(self, connection: _Connection, reusable: bool) -> None:
        """A request on `connection` ended: keep the connection for the next one, or close
        it."""
        self._busy.discard(connection)
        self._slots.release()
        if reusable and not connection.closed:
            connection.idle_since = connection.loop.time()
            self._idle.append(connection)
        else:
            connection.abort()

    def close(self) -> None:
        for connection in [*self._idle, *self._busy]:
            connection.abort()
        self._idle.clear()
        self._busy.clear()


class UpstreamPools:
    """An `UpstreamPool` per upstream base URL, made on first use (and again on another
    event loop: a connection serves the loop that opened it), closed by `close`."""

    def __init__(self, *, connect_timeout: float = 10.0, read_timeout: float = 600.0) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._pools: dict[str, UpstreamPool] = {}

    def pool(self, base_url: str) -> UpstreamPool:
        pool = self._pools.get(base_url)
        if pool is None or pool.loop is not asyncio.get_running_loop():
            if pool is not None:
                pool.close()
            pool = self._pools[base_url] = UpstreamPool(
                base_url, connect_timeout=self.connect_timeout, read_timeout=self.read_timeout
            )
        return pool

    async def send(
        self,
        base_url: str,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> UpstreamAnswer:
        """`UpstreamPool.send` on `base_url`'s pool."""
        return await self.pool(base_url).send(method, target, headers, body)

    async def status(self, base_url: str, target: str, timeout: float) -> int:
        """The status of ``GET target`` on `base_url`, its body read and dropped (a health
        poll); raises `httpx.HTTPError`, `httpx.TimeoutException` past `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):
                answer = await self.send(base_url, "GET", target)
                try:
                    async for _ in answer.body():
                        pass
                finally:
                    answer.close()
        except TimeoutError:
            raise httpx.TimeoutException(
                f"{base_url}{target} did not answer within {timeout} s"
            ) from None
        return answer.status_code

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


class ClientBody(Protocol):
    """The body of the client's answer written straight to its connection, each piece as
    one chunk of a chunked body, without an ASGI message per piece (the server's side:
    `http_server.DirectBody`)."""

    def open(self) -> bool:
        """Whether the answer's head is sent, chunked, and its body not ended."""
        ...

    def write(self, piece: bytes) -> bool:
        """Write `piece` (nothing if empty); False when the client takes no more for now."""
        ...

    async def drain(self) -> None:
        """Wait until the client takes more (or is gone)."""
        ...


class _Passed:
    """The pieces of an answer passed to the client: `started` at the first, each through
    `kept` (what of it to pass; None: nothing now), the answer's first and last few
    kilobytes (where its ``usage`` is) kept as they came."""

    def __init__(
        self, started: Callable[[], None], kept: Callable[[bytes, bool], bytes | None] | None
    ) -> None:
        self._started: Callable[[], None] | None = started
        self._kept = kept
        self._head: list[bytes] = []
        self._head_size = 0
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0

    def piece(self, chunk: bytes) -> bytes:
        """What to pass on of `chunk`, a piece of the body with more to follow."""
        if self._started is not None:
            self._started()
            self._started = None
        if self._head_size < _HEAD_BYTES:
            self._head.append(chunk)
            self._head_size += len(chunk)
        tail = self._tail
        tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail_size - len(tail[0]) >= _TAIL_BYTES:
            self._tail_size -= len(tail.popleft())
        if self._kept is None:
            return chunk
        return self._kept(chunk, True) or b""

    def end(self) -> bytes:
        """What to pass on at the body's end."""
        return b"" if self._kept is None else self._kept(b"", False) or b""

    def ends(self) -> bytes:
        return b"".join(self._head)[:_HEAD_BYTES] + b"".join(self._tail)[-_TAIL_BYTES:]


async def relay_answer(
    upstream: UpstreamAnswer,
    send: Send,
    *,
    started: Callable[[], None] = _nothing,
    headers: Iterable[tuple[bytes, bytes]] = (),
    kept: Callable[[bytes, bool], bytes | None] | None = None,
    client: ClientBody | None = None,
) -> bytes:
    """Pass an upstream answer to the client as it comes, with the upstream's end-to-end
    headers and `headers`. `started` runs at its first piece; `kept(piece, more)` says
    what of each piece to pass on (None: nothing now; by default all of it). A chunked
    answer goes straight to `client`'s connection when it is given (`UpstreamAnswer.pipe`),
    else each piece is an ASGI message to `send`. The answer is closed however the relay
    ends (answered, broken off, cancelled because the client left). Returns the answer's
    first and last few kilobytes, as the upstream sent them (where its ``usage`` is)."""
    passed = _Passed(started, kept)
    try:
        await send(
            {
                "type": "http.response.start",
                "status": upstream.status_code,
                "headers": [
                    *((k, v) for k, v in upstream.headers if k not in _HOP_BY_HOP),
                    *headers,
                ],
            }
        )
        if client is not None and upstream.pipes and client.open():
            await upstream.pipe(lambda chunk: client.write(passed.piece(chunk)), client.drain)
        else:
            async for chunk in upstream.body():
                piece = passed.piece(chunk)
                if piece:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": passed.end(), "more_body": False})
    finally:
        upstream.close()
    return passed.ends()
