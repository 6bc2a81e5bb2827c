"""`served` bounds each request head in time and size: the request line and headers must
arrive within the header timeout of the connection opening (or, on a kept-alive
connection, of the next request's first byte), else 408 and the connection is closed; a
head over the size bound gets 431. An idle kept-alive connection and a request being
answered are not cut.

Raw sockets against a real uvicorn server (`served_in_thread`) in front of a small
Starlette app, with a 0.5 s header timeout and a 1 KiB head bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import select
import socket
import time
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.serving.keepalive import MAX_HEAD_BYTES, served_in_thread
from prefixkit.testing.fake_vllm import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

HEADER_TIMEOUT_S = 0.5
HEAD_BOUND = 1024
# how late a deadline may be seen on a busy 2-core machine running tests in parallel
LATE_S = 1.0
# the whole head of a GET / is this many bytes plus the padding header's value
HEAD_FRAME = len(b"GET / HTTP/1.1\r\nhost: t\r\nx-pad: \r\n\r\n")

Address = tuple[str, int]


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


async def ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def echo_length(request: Request) -> PlainTextResponse:
    return PlainTextResponse(str(len(await request.body())))


async def slow(request: Request) -> PlainTextResponse:
    await asyncio.sleep(2 * HEADER_TIMEOUT_S)
    return PlainTextResponse("slow")


async def early(request: Request) -> PlainTextResponse:
    return PlainTextResponse("early")  # without reading the body


APP = Starlette(
    routes=[
        Route("/", ok),
        Route("/echo", echo_length, methods=["POST"]),
        Route("/early", early, methods=["POST"]),
        Route("/slow", slow),
    ]
)


def _address(url: str) -> Address:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def server() -> Iterator[Address]:
    with served_in_thread(
        APP,
        "127.0.0.1",
        free_port(),
        header_timeout_s=HEADER_TIMEOUT_S,
        max_head_bytes=HEAD_BOUND,
    ) as url:
        yield _address(url)


@contextlib.contextmanager
def _connected(server: Address) -> Iterator[socket.socket]:
    with socket.create_connection(server, timeout=10.0) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        yield sock


@pytest.fixture
def connection(server: Address) -> Iterator[socket.socket]:
    with _connected(server) as sock:
        yield sock


def _get(path: str = "/", pad: int = 0) -> bytes:
    """A GET request head of `HEAD_FRAME + pad` bytes."""
    return f"GET {path} HTTP/1.1\r\nhost: t\r\nx-pad: {'a' * pad}\r\n\r\n".encode()


def _answer(stream: BinaryIO) -> Answer:
    """The next response on `stream`: its status, headers and body."""
    status_line = stream.readline()
    assert status_line, "the server closed the connection without answering"
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    body = stream.read(int(headers.get("content-length", "0")))
    return Answer(int(status_line.split()[1]), headers, body)


def _status_and_body(stream: BinaryIO) -> tuple[int, bytes]:
    answer = _answer(stream)
    return answer.status, answer.body


def _refusal(stream: BinaryIO) -> tuple[int, str]:
    """The status and OpenAI-shaped error code of the last answer on a connection the
    server then closes (asserted)."""
    answer = _answer(stream)
    assert answer.headers["connection"] == "close"
    assert stream.read() == b"", "the connection stayed open after the refusal"
    return answer.status, json.loads(answer.body)["error"]["code"]


def _trickle_until_answered(sock: socket.socket, every_s: float = 0.1) -> int:
    """Send a head that never ends, a byte every `every_s`, until the server answers;
    the bytes sent."""
    endless = b"GET / HTTP/1.1\r\nhost: t\r\nx-slow: " + b"a" * 1000
    for sent in range(1, len(endless) + 1):
        sock.sendall(endless[sent - 1 : sent])
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            return sent
    raise AssertionError("a head trickled for 100 s was never cut")


def test_a_connection_that_sends_nothing_gets_408_and_is_closed_at_the_deadline(
    server: Address,
) -> None:
    started = time.monotonic()  # before the connection opens, as its deadline starts
    with _connected(server) as sock:
        assert _refusal(sock.makefile("rb")) == (408, "request_timeout")
    assert HEADER_TIMEOUT_S - 0.05 <= time.monotonic() - started <= HEADER_TIMEOUT_S + LATE_S


def test_a_head_trickled_a_byte_at_a_time_is_cut_at_the_deadline_although_bytes_keep_coming(
    server: Address,
) -> None:
    started = time.monotonic()
    with _connected(server) as sock:
        sent = _trickle_until_answered(sock)
        waited = time.monotonic() - started
        assert _refusal(sock.makefile("rb")) == (408, "request_timeout")
    assert HEADER_TIMEOUT_S - 0.05 <= waited <= HEADER_TIMEOUT_S + LATE_S
    assert sent > 1  # each byte after the first would cancel uvicorn's own timer


def test_a_whole_request_is_answered(connection: socket.socket) -> None:
    connection.sendall(_get())
    assert _status_and_body(connection.makefile("rb")) == (200, b"ok")


def test_a_request_answered_after_the_header_timeout_is_not_cut(
    connection: socket.socket,
) -> None:
    # the deadline covers the head only: the app takes twice the header timeout
    connection.sendall(_get("/slow"))
    assert _status_and_body(connection.makefile("rb")) == (200, b"slow")


def test_a_kept_alive_connection_idle_past_the_header_timeout_serves_its_next_request(
    connection: socket.socket,
) -> None:
    stream = connection.makefile("rb")
    connection.sendall(_get())
    assert _answer(stream).status == 200
    time.sleep(3 * HEADER_TIMEOUT_S)  # idle: uvicorn's keep-alive (75 s) governs it
    connection.sendall(_get())
    assert _status_and_body(stream) == (200, b"ok")


def test_the_next_head_trickled_on_a_kept_alive_connection_is_cut_at_its_own_deadline(
    connection: socket.socket,
) -> None:
    stream = connection.makefile("rb")
    connection.sendall(_get())
    assert _answer(stream).status == 200
    time.sleep(2 * HEADER_TIMEOUT_S)  # the deadline starts at the next head's first byte
    started = time.monotonic()
    _trickle_until_answered(connection)
    waited = time.monotonic() - started
    assert HEADER_TIMEOUT_S - 0.05 <= waited <= HEADER_TIMEOUT_S + LATE_S
    assert _refusal(stream) == (408, "request_timeout")


def test_pipelined_requests_sent_at_once_are_all_answered(connection: socket.socket) -> None:
    stream = connection.makefile("rb")
    connection.sendall(_get() + _get("/slow") + _get())
    assert [_status_and_body(stream) for _ in range(3)] == [
        (200, b"ok"),
        (200, b"slow"),
        (200, b"ok"),
    ]


def test_a_pipelined_head_left_unfinished_is_cut_once_its_turn_comes(
    connection: socket.socket,
) -> None:
    stream = connection.makefile("rb")
    connection.sendall(_get() + b"GET / HTTP/1.1\r\nhost: t\r\n")
    assert _answer(stream).status == 200
    started = time.monotonic()
    assert _refusal(stream) == (408, "request_timeout")
    assert time.monotonic() - started <= HEADER_TIMEOUT_S + LATE_S


def test_a_head_sent_after_a_body_its_answer_did_not_wait_for_is_cut_at_its_deadline(
    connection: socket.socket,
) -> None:
    stream = connection.makefile("rb")
    connection.sendall(b"POST /early HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\n\r\n")
    assert _status_and_body(stream) == (200, b"early")
    started = time.monotonic()
    connection.sendall(b"body" + b"GET / HTTP/1.1\r\nhost: t\r\n")
    assert _refusal(stream) == (408, "request_timeout")
    assert HEADER_TIMEOUT_S - 0.05 <= time.monotonic() - started <= HEADER_TIMEOUT_S + LATE_S


def test_a_head_one_byte_over_the_bound_gets_431_and_is_closed(
    connection: socket.socket,
) -> None:
    connection.sendall(_get(pad=HEAD_BOUND - HEAD_FRAME + 1))
    assert _refusal(connection.makefile("rb")) == (431, "request_header_fields_too_large")


def test_a_head_of_exactly_the_bound_is_answered(connection: socket.socket) -> None:
    connection.sendall(_get(pad=HEAD_BOUND - HEAD_FRAME))
    assert _status_and_body(connection.makefile("rb")) == (200, b"ok")


def test_a_body_arriving_with_its_head_does_not_count_against_the_head_bound(
    connection: socket.socket,
) -> None:
    body = b"b" * (8 * HEAD_BOUND)
    head = f"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: {len(body)}\r\n\r\n".encode()
    connection.sendall(head + body)
    assert _status_and_body(connection.makefile("rb")) == (200, str(len(body)).encode())


def test_served_bounds_a_head_to_64_kib_by_default() -> None:
    assert MAX_HEAD_BYTES == 64 * 1024
    with (
        served_in_thread(APP, "127.0.0.1", free_port()) as url,
        _connected(_address(url)) as sock,
    ):
        sock.sendall(_get(pad=MAX_HEAD_BYTES - HEAD_FRAME + 1))
        assert _refusal(sock.makefile("rb")) == (431, "request_header_fields_too_large")


@settings(max_examples=60)
@given(
    pad=st.integers(HEAD_BOUND - HEAD_FRAME - 8, HEAD_BOUND - HEAD_FRAME + 8)
    | st.integers(0, 2 * HEAD_BOUND),
    cuts=st.lists(st.integers(0, 3 * HEAD_BOUND), max_size=6),
)
def test_a_head_split_anyhow_and_sent_within_the_deadline_is_answered_by_its_size_alone(
    server: Address, pad: int, cuts: list[int]
) -> None:
    head = _get(pad=pad)
    edges = [0, *sorted({cut % len(head) for cut in cuts}), len(head)]
    with _connected(server) as sock:
        for start, end in itertools.pairwise(edges):
            if start > HEAD_BOUND:  # refused and closed: more bytes would meet a reset
                break
            sock.sendall(head[start:end])
            time.sleep(0.002)  # each piece its own read on the server
        status = _answer(sock.makefile("rb")).status
    assert status == (200 if len(head) <= HEAD_BOUND else 431)


@settings(max_examples=40)
@given(
    body=st.binary(max_size=3 * HEAD_BOUND),
    pad=st.integers(HEAD_BOUND - HEAD_FRAME - 4, HEAD_BOUND - HEAD_FRAME + 4),
    cuts=st.lists(st.integers(0, 6 * HEAD_BOUND), max_size=6),
)
def test_a_head_pipelined_behind_a_body_is_bounded_by_its_own_size(
    server: Address, body: bytes, pad: int, cuts: list[int]
) -> None:
    first = b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    second = _get(pad=pad)
    sent = first + second
    edges = [0, *sorted({cut % len(sent) for cut in cuts}), len(sent)]
    with _connected(server) as sock:
        for start, end in itertools.pairwise(edges):
            sock.sendall(sent[start:end])
            time.sleep(0.002)  # each piece its own read on the server
        stream = sock.makefile("rb")
        answers = [_status_and_body(stream)]
        answers.append(_status_and_body(stream))
    assert answers[0] == (200, str(len(body)).encode())
    assert answers[1][0] == (200 if len(second) <= HEAD_BOUND else 431)
