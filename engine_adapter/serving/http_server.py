"""uvicorn's HTTP/1.1 protocol (h11) with a deadline and a size bound on each request head.

uvicorn has no header timeout: a connection that sends nothing, or trickles its request
line and headers a byte at a time, is held open for as long as the client likes (its
keep-alive timer is not armed before the first request and any byte cancels it). A few
hundred such connections cost a client nothing and hold the server's sockets and
memory. h11 bounds an *incomplete* head (`h11_max_incomplete_event_size`), but a head
over that size arriving complete in one read passes.

`bounded_h11_protocol` makes the protocol class `served` (`keepalive`) gives uvicorn:

* from the moment a connection is opened, and on a kept-alive connection from the first
  byte of its next request, the whole head must arrive within `header_timeout_s`;
  otherwise the client gets ``408 Request Timeout`` (``Connection: close``) and the
  connection is closed. An idle kept-alive connection is left to uvicorn's
  `timeout_keep_alive`;
* a head over `max_head_bytes` (request line, headers and the blank line after them)
  gets ``431 Request Header Fields Too Large`` and the connection is closed.

These answers, and uvicorn's 400 to bytes that are not an HTTP/1.1 request, carry an
error in OpenAI's shape, as the app's own errors do; the connection then closes after a
lingering moment (`LINGER_S`, what the client still sends discarded), so a client that
reads its answer late gets the answer, not a reset. The same holds whenever uvicorn
closes a connection (an answer with ``Connection: close``, as every gateway refusal).
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any, ClassVar

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from .refused import error_body

__all__ = ["LINGER_S", "TIMER_RESOLUTION_S", "BoundedH11Protocol", "bounded_h11_protocol"]

LINGER_S = 2.0  # how long a refused connection reads and discards before it closes
# added to every deadline a client is promised: uvloop's timers count whole milliseconds
# from the loop's cached time and fire up to a millisecond early
TIMER_RESOLUTION_S = 0.001


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol bounding each request head in time and size (the module
    docstring says how); `bounded_h11_protocol` sets the bounds."""

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
        self._head_bytes = 0  # of the awaited head, received so far
        self._lingering = False  # refused: what the client still sends is discarded

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_LingeringClose(transport, self))  # type: ignore[arg-type]
        self._start_head(0)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self.conn.their_state is not h11.IDLE:  # a body, or pipelined requests h11 holds
            super().data_received(data)
            self._follow_held_head()
            return
        if self._head_deadline is None:  # the next request on a kept-alive connection
            self._start_head(0)
        room = max(0, self.max_head_bytes - self._head_bytes)
        self._head_bytes += len(data)
        # h11 takes a head of any size that arrives whole: give it no more than the bound
        # (and never b"", which h11 reads as the end of the stream)
        if room:
            super().data_received(data[:room])
        if self.conn.their_state is h11.IDLE:
            if self._head_bytes > self.max_head_bytes:
                self._refuse(
                    431,
                    f"the request line and headers are over {self.max_head_bytes} bytes: "
                    "send fewer or shorter headers",
                    "request_header_fields_too_large",
                )
            return
        self._end_head()
        if len(data) > room and not self.transport.is_closing():
            super().data_received(data[room:])

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_held_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)

    def _follow_held_head(self) -> None:
        """Start the deadline of a next head that arrived, in part, before its turn:
        pipelined behind a request, or behind the end of a body its answer did not wait
        for. h11 holds those bytes until the request before them is done."""
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            held = len(self.conn.trailing_data[0])
            if held:
                self._start_head(held)

    def _start_head(self, received: int) -> None:
        self._end_head()
        self._head_bytes = received
        self._head_deadline = self.loop.call_later(
            self.header_timeout_s + TIMER_RESOLUTION_S, self._head_overdue
        )

    def _end_head(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None
        self._head_bytes = 0

    def _head_overdue(self) -> None:
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
        """Answer `status` with an OpenAI-shaped error unless this request's answer has
        begun, then close the connection."""
        self._end_head()
        if self.transport.is_closing():
            return
        if self.conn.our_state is h11.IDLE:
            body = json.dumps(error_body(message, code)).encode()
            headers = [
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
                ("connection", "close"),
            ]
            self.transport.write(
                b"".join(
                    (
                        self.conn.send(
                            h11.Response(
                                status_code=status,
                                headers=headers,
                                reason=HTTPStatus(status).phrase,
                            )
                        )
                        or b"",
                        self.conn.send(h11.Data(data=body)) or b"",
                        self.conn.send(h11.EndOfMessage()) or b"",
                    )
                )
            )
        self.transport.close()


class _LingeringClose:
    """The connection's transport as uvicorn sees it, except that closing it lingers:
    writing stops at once (the client reads the end of the answer), but what the client
    is still sending is read and discarded for `LINGER_S` before the socket closes.
    Closing with unread bytes makes the kernel reset the connection, and a client that
    reads its answer late (after sending the rest of a refused body) would get the reset
    instead of the answer."""

    def __init__(self, transport: asyncio.Transport, protocol: BoundedH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._closing = False

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


def bounded_h11_protocol(header_timeout_s: float, max_head_bytes: int) -> type[BoundedH11Protocol]:
    """The protocol class (uvicorn's ``http=``) giving each request head `header_timeout_s`
    seconds to arrive and at most `max_head_bytes` bytes."""
    timeout_s, max_bytes = header_timeout_s, max_head_bytes

    class Bounded(BoundedH11Protocol):
        header_timeout_s = timeout_s
        max_head_bytes = max_bytes

    return Bounded
