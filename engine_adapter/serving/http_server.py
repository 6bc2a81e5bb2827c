"""uvicorn's HTTP/1.1 protocol (httptools, llhttp's C parser) with a deadline and a size
bound on each request head.

uvicorn has no header timeout: a connection that sends nothing, or trickles its request
line and headers a byte at a time, is held open for as long as the client likes (its
keep-alive timer is not armed before the first request and any byte cancels it). A few
hundred such connections cost a client nothing and hold the server's sockets and
memory. Nor does it bound a head's size: the parser gathers a header of any length.

`bounded_protocol` makes the protocol class `served` (`keepalive`) gives uvicorn:

* from the moment a connection is opened, and on a kept-alive connection from the first
  byte of its next request (or, for a request sent before the one ahead of it was
  answered, from that answer's end), the whole head must arrive within
  `header_timeout_s`; otherwise the client gets ``408 Request Timeout``
  (``Connection: close``) and the connection is closed. An idle kept-alive connection is
  left to uvicorn's `timeout_keep_alive`;
* a head over `max_head_bytes` (request line, headers and the blank line after them)
  gets ``431 Request Header Fields Too Large`` and the connection is closed.

The protocol finds where each head ends itself (the first empty line) and where a body
framed by ``Content-Length`` ends, and gives the parser one head or one body at a time,
so a head is measured to the byte however the bytes are split or pipelined. (After a
chunked request body, the next head's bytes that arrived with its end count from the
next read.)

These answers, and the 400 to bytes that are not an HTTP/1.1 request, carry an error in
OpenAI's shape, as the app's own errors do; the connection then closes after a lingering
moment (`LINGER_S`, what the client still sends discarded), so a client that reads its
answer late gets the answer, not a reset. The same holds whenever uvicorn closes a
connection (an answer with ``Connection: close``, as every gateway refusal).

Each request's scope carries a `DirectBody` (``scope["extensions"][DIRECT_BODY]``): the
relay writes a streamed answer's pieces through it straight to the connection, as
uvicorn would write them, without an ASGI message and a coroutine step per piece.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from .refused import error_body

__all__ = [
    "DIRECT_BODY",
    "LINGER_S",
    "TIMER_RESOLUTION_S",
    "BoundedProtocol",
    "DirectBody",
    "bounded_protocol",
]

LINGER_S = 2.0  # how long a refused connection reads and discards before it closes
# added to every deadline a client is promised: uvloop's timers count whole milliseconds
# from the loop's cached time and fire up to a millisecond early
TIMER_RESOLUTION_S = 0.001
_HEAD_END = b"\r\n\r\n"
DIRECT_BODY = "prefixkit.direct_body"  # the scope's extension holding its `DirectBody`


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol bounding each request head in time and size (the
    module docstring says how); `bounded_protocol` sets the bounds."""

    header_timeout_s: ClassVar[float]
    max_head_bytes: ClassVar[int]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._in_head = True  # the bytes that come belong to a request head
        self._head_bytes = 0  # of the head being read, received so far
        self._head_tail = b""  # its last bytes, where an empty line may begin
        self._body_left: int | None = None  # of a body framed by length; None: chunked
        self._head_begun = False  # the parser has the start of the head being read
        self._lingering = False  # refused: what the client still sends is discarded
        self._refusal: tuple[int, str, str] | None = None  # once the answers under way end

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_LingeringClose(transport, self))  # type: ignore[arg-type]
        self._start_head()

    def data_received(self, data: bytes) -> None:
        while data and not self._lingering and not self.transport.is_closing():
            if self._in_head:
                data = self._head_received(data)
            else:  # a body: to its end where its length says it
                take = min(self._body_left, len(data)) if self._body_left else len(data)
                if self._body_left:
                    self._body_left -= take
                super().data_received(data[:take])
                data = data[take:]

    def _head_received(self, data: bytes) -> bytes:
        """Give the parser the bytes of `data` up to the end of the head being read;
        the bytes after it."""
        if self._head_deadline is None and not self._answering():
            self._start_head(self._head_bytes)
        seen = self._head_tail + data
        end = seen.find(_HEAD_END)
        take = len(data) if end < 0 else end + len(_HEAD_END) - len(self._head_tail)
        room = self.max_head_bytes - self._head_bytes
        self._head_bytes += take
        if self._head_bytes > self.max_head_bytes:
            if room > 0:  # bytes that are not HTTP get their 400 first
                super().data_received(data[:room])
            self._refuse(
                431,
                f"the request line and headers are over {self.max_head_bytes} bytes: "
                "send fewer or shorter headers",
                "request_header_fields_too_large",
            )
            return b""
        self._head_tail = seen[-(len(_HEAD_END) - 1) :] if end < 0 else b""
        super().data_received(data[:take])
        return data[take:]

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._in_head and self._head_deadline is None and not self._answering():
            self._start_head(self._head_bytes)

    def on_headers_complete(self) -> None:
        self._end_head()
        self._in_head = self._head_begun = False
        self._body_left = 0
        for name, value in self.headers:
            if name == b"transfer-encoding":
                self._body_left = None
                break
            if name == b"content-length":
                self._body_left = int(value)  # the parser has checked it
        super().on_headers_complete()
        # the request target as sent, before its query (uvicorn's parsed path drops the
        # scheme and host of an absolute-form target): what the gateway checks is canonical
        self.scope["raw_path"] = self.root_path.encode("ascii") + self.url.partition(b"?")[0]
        if self.cycle is not None and self.cycle.scope is self.scope:
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
            extensions[DIRECT_BODY] = DirectBody(self.cycle)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0
        self._head_tail = b""

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next pipelined request
        if self._refusal is not None:
            self._refuse(*self._refusal)
            return
        held = self._head_bytes or self._head_begun
        if self._in_head and held and not self._answering() and not self.transport.is_closing():
            self._start_head(self._head_bytes)  # a head sent early: its turn has come

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)

    def _answering(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _start_head(self, received: int = 0) -> None:
        self._end_head()
        self._head_bytes = received
        self._head_deadline = self.loop.call_later(
            self.header_timeout_s + TIMER_RESOLUTION_S, self._head_overdue
        )

    def _end_head(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        self._refuse(
            408,
            f"the request line and headers did not arrive within {self.header_timeout_s:g} s "
            "of the connection opening or of the request's first byte: send each request "
            "head whole, without pausing",
            "request_timeout",
        )

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not an HTTP/1.1 request, in OpenAI's shape."""
        self._refuse(
            400,
            f"the request is not valid HTTP/1.1 ({msg}): send a request line, headers and a "
            "body framed by Content-Length or chunked encoding",
            "invalid_request_error",
        )

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answer `status` with an OpenAI-shaped error and close the connection. While
        the answers to whole requests before it are under way, once they end (what the
        client sends meanwhile is discarded); while the answer to a request whose body
        is cut short is under way, close without answering."""
        self._end_head()
        if self.transport.is_closing():
            return
        if self._answering() and self._in_head:  # the request before is whole: answer it
            self._refusal = (status, message, code)
            self._lingering = True
            return
        self._refusal = None
        if self._answering():  # a body cut by bytes that are not HTTP: the answer too
            self.transport.close()
            return
        body = json.dumps(error_body(message, code)).encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status, HTTPStatus(status).phrase.encode(), len(body), body)
        )
        self.transport.close()


class _LingeringClose:
    """The connection's transport as uvicorn sees it, except that closing it lingers:
    writing stops at once (the client reads the end of the answer), but what the client
    is still sending is read and discarded for `LINGER_S` before the socket closes.
    Closing with unread bytes makes the kernel reset the connection, and a client that
    reads its answer late (after sending the rest of a refused body) would get the reset
    instead of the answer."""

    def __init__(self, transport: asyncio.Transport, protocol: BoundedProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._closing = False
        # called for every piece of every answer: the transport's own, not `__getattr__`
        self.write: Callable[[bytes], None] = transport.write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._protocol._lingering = True
        transport = self._transport
        if transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
        transport.resume_reading()  # keep draining, whatever flow control paused
        self._protocol.loop.call_later(LINGER_S, transport.close)


class DirectBody:
    """The body of one request's answer written straight to the client's connection (the
    scope's ``extensions[DIRECT_BODY]``; `upstream.ClientBody`): each piece one chunk, the
    bytes uvicorn writes for an ``http.response.body`` message, without the message. The
    answer's head and its end go through uvicorn's ``send``, which keeps its own account
    of the answer. It bypasses anything between the server and the app: a middleware
    that changes an answer's body must drop the extension from the scope it passes on."""

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle

    def open(self) -> bool:
        cycle = self._cycle
        return (
            cycle.response_started
            and cycle.chunked_encoding is True
            and not cycle.response_complete
            and cycle.scope["method"] != "HEAD"
        )

    def write(self, piece: bytes) -> bool:
        cycle = self._cycle
        if cycle.disconnected:
            return True  # the relay is cancelled next: nothing to wait for
        if piece:
            cycle.transport.write(b"%x\r\n%b\r\n" % (len(piece), piece))
        return not cycle.flow.write_paused

    async def drain(self) -> None:
        cycle = self._cycle
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()


def bounded_protocol(header_timeout_s: float, max_head_bytes: int) -> type[BoundedProtocol]:
    """The protocol class (uvicorn's ``http=``) giving each request head `header_timeout_s`
    seconds to arrive and at most `max_head_bytes` bytes."""
    timeout_s, max_bytes = header_timeout_s, max_head_bytes

    class Bounded(BoundedProtocol):
        header_timeout_s = timeout_s
        max_head_bytes = max_bytes

    return Bounded
