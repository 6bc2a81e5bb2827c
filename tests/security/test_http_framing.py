"""How the gateway frames requests on a connection: a body is never read as a request (a
refusal closes the connection, its body unread), a request framed two ways
(``Content-Length`` and ``Transfer-Encoding``) never leaves its connection open for the
next one (RFC 9112 section 6.1: a proxy in front may have framed it the other way), and a
request HTTP cannot parse is refused in OpenAI's error shape, as every other refusal. Raw
sockets, as an HTTP client would never send these."""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from .conftest import ACME, Served
from .openai_errors import openai_error

CLOSED_WITHIN_S = 1.0


@contextlib.contextmanager
def _connection(url: str) -> Iterator[socket.socket]:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        yield sock


def _answers(sock: socket.socket, within_s: float) -> tuple[list[int], bool]:
    """The statuses of the answers that arrive on `sock` within `within_s`, and whether the
    server closed the connection by then."""
    received = bytearray()
    deadline = time.monotonic() + within_s
    closed = False
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            closed = True
            break
        received += chunk
    return [int(status) for status in _STATUS_LINE.findall(bytes(received))], closed


# a status line (an error's text may say "HTTP/1.1" too, never followed by a status)
_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5]\d\d) ")


def test_a_body_answered_before_it_was_read_is_never_read_as_a_request(served: Served) -> None:
    smuggled = json.dumps({"model": "fake-model", "prompt": "smuggled", "cache_salt": "x"})
    inner = (
        "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\n"
        f"Authorization: {ACME['Authorization']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(smuggled)}\r\n\r\n{smuggled}"
    ).encode()
    outer = (
        b"POST /reset_prefix_cache HTTP/1.1\r\nHost: gateway\r\n"
        + f"Authorization: {ACME['Authorization']}\r\n".encode()
        + f"Content-Length: {len(inner)}\r\n\r\n".encode()
    )
    mark = served.mark()
    with _connection(served.url) as sock:
        with contextlib.suppress(ConnectionError):  # the server may close while we send
            sock.sendall(outer + inner + b"GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n")
        statuses, closed = _answers(sock, within_s=CLOSED_WITHIN_S)
    # the denied route, then the connection closes: its unread body is never parsed
    assert (statuses, closed) == ([404], True)
    assert served.since(mark) == []


def test_a_request_framed_by_both_length_and_chunks_gets_its_connection_closed(
    served: Served,
) -> None:
    with _connection(served.url) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: gateway\r\n"
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        statuses, closed = _answers(sock, within_s=CLOSED_WITHIN_S)
    assert len(statuses) == 1
    assert closed


def test_a_request_http_cannot_parse_is_400_in_openais_shape(served: Served) -> None:
    with _connection(served.url) as sock:
        sock.sendall(b"NOT A REQUEST LINE\r\n\r\n")
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    openai_error(body)
