"""Bounds a tenant meets: what the gateway refuses before any engine sees it (a body too
large, too slow, not a JSON object, compressed, too deep, not valid Unicode; a head that
never comes), each answered in OpenAI's error shape; what it cuts off (an engine too slow
to answer); and a client that leaves, whose request the engine stops.

Raw sockets where an HTTP client would not send the request as given (a declared length it
never sends, a chunked body, a body trickled a byte at a time, nothing at all)."""

from __future__ import annotations

import contextlib
import gzip
import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from prefixkit.engine_adapter import Limits

from .conftest import ACME, Served, serving
from .openai_errors import openai_error
from .raw_http import raw_request

MAX_BODY = 64 * 1024
BODY_TIMEOUT_S = 0.5
HEADER_TIMEOUT_S = 0.5
# how late a deadline may be seen on a busy 2-core machine
LATE_S = 1.0
# the replica's answers may be that late too: an upstream read timeout below it turns a
# slow answer on a busy machine into a 502
READ_TIMEOUT_S = 0.5 + LATE_S
LIMITS = Limits(
    max_body_bytes=MAX_BODY,
    body_timeout_s=BODY_TIMEOUT_S,
    header_timeout_s=HEADER_TIMEOUT_S,
    upstream_read_timeout_s=READ_TIMEOUT_S,
)
JSON = ("Content-Type", "application/json")
KEY = ("Authorization", ACME["Authorization"])
BODY = json.dumps({"model": "fake-model", "prompt": "a bounded request", "max_tokens": 2})


@pytest.fixture(scope="module")
def bounded() -> Iterator[Served]:
    """One replica behind a gateway with small bounds (`LIMITS`)."""
    with serving(limits=LIMITS) as running:
        yield running


@contextlib.contextmanager
def _connection(url: str) -> Iterator[socket.socket]:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        yield sock


def _head(target: bytes, *headers: tuple[str, str]) -> bytes:
    lines = [b"POST " + target + b" HTTP/1.1", b"Host: gateway", b"Connection: close"]
    lines += [f"{name}: {value}".encode() for name, value in headers]
    return b"\r\n".join([*lines, b"", b""])


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the answer on `sock`, read to the end of the connection."""
    received = bytearray()
    while chunk := sock.recv(65536):
        received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), head
    return int(head[9:12]), body


def _refused(
    served: Served, body: bytes | str, *headers: tuple[str, str]
) -> tuple[int | None, dict[str, object]]:
    """Send `body` as acme's completion; the status and OpenAI error, checked to reach no
    replica."""
    mark = served.mark()
    raw = body.encode() if isinstance(body, str) else body
    answer = raw_request(served.url, "POST", b"/v1/completions", [KEY, *headers], raw)
    assert served.since(mark) == []
    return answer.status, openai_error(answer.body)


def _nested(depth: int) -> str:
    """A completion whose body nests objects `depth` deep (the body itself is the first)."""
    inner = "{}" if depth > 1 else ""
    for _ in range(depth - 2):
        inner = '{"a":' + inner + "}"
    return '{"model":"fake-model","prompt":"deep","max_tokens":2,"x":' + inner + "}"


# size


def test_a_body_declared_over_the_limit_is_413_before_it_is_sent(bounded: Served) -> None:
    mark = bounded.mark()
    with _connection(bounded.url) as sock:
        sock.sendall(_head(b"/v1/completions", KEY, JSON, ("Content-Length", "10000000")))
        status, body = _answer(sock)
    assert status == 413
    assert openai_error(body)["code"] == "request_too_large"
    assert bounded.since(mark) == []


def test_a_chunked_body_over_the_limit_is_413(bounded: Served) -> None:
    mark = bounded.mark()
    piece = b" " * 4096
    with _connection(bounded.url) as sock:
        sock.sendall(_head(b"/v1/completions", KEY, JSON, ("Transfer-Encoding", "chunked")))
        with contextlib.suppress(OSError):  # the gateway may answer before the last chunk
            for _ in range(MAX_BODY // len(piece) + 2):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
        status, body = _answer(sock)
    assert status == 413
    assert openai_error(body)["code"] == "request_too_large"
    assert bounded.since(mark) == []


def test_a_body_of_exactly_the_limit_is_admitted(bounded: Served) -> None:
    padded = BODY[:-1] + ',"user":"' + "u" * MAX_BODY
    body = padded[: MAX_BODY - 2] + '"}'
    assert len(body) == MAX_BODY
    mark = bounded.mark()
    answer = raw_request(bounded.url, "POST", b"/v1/completions", [KEY, JSON], body.encode())
    assert answer.status == 200
    assert [r.path for r in bounded.since(mark)] == ["/v1/completions"]


# form


@pytest.mark.parametrize(
    "body", [b"", b"{", b"model=fake-model", b"\xff\xfe{}", b'{"model": "fake-model"} {}']
)
def test_a_body_that_is_not_json_is_400(bounded: Served, body: bytes) -> None:
    status, error = _refused(bounded, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


@pytest.mark.parametrize("body", ["[]", '[{"model": "fake-model"}]', '"text"', "null", "1", "true"])
def test_a_json_value_that_is_not_an_object_is_400(bounded: Served, body: str) -> None:
    status, error = _refused(bounded, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "GZIP", "identity, gzip"])
def test_a_compressed_body_is_415(bounded: Served, encoding: str) -> None:
    status, error = _refused(
        bounded, gzip.compress(BODY.encode()), JSON, ("Content-Encoding", encoding)
    )
    assert (status, error["code"]) == (415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        None,
    ],
)
def test_a_body_not_sent_as_json_is_415(bounded: Served, content_type: str | None) -> None:
    headers = [] if content_type is None else [("Content-Type", content_type)]
    status, error = _refused(bounded, BODY, *headers)
    assert (status, error["code"]) == (415, "unsupported_media_type")


def test_a_body_nested_one_level_deeper_than_the_limit_is_400(bounded: Served) -> None:
    status, error = _refused(bounded, _nested(LIMITS.max_json_depth + 1), JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


def test_a_body_nested_as_deep_as_the_limit_is_admitted(bounded: Served) -> None:
    body = _nested(LIMITS.max_json_depth).encode()
    mark = bounded.mark()
    answer = raw_request(bounded.url, "POST", b"/v1/completions", [KEY, JSON], body)
    assert answer.status == 200
    assert [r.path for r in bounded.since(mark)] == ["/v1/completions"]


@pytest.mark.parametrize("depth", [10_000, 30_000])
def test_a_body_nested_thousands_deep_is_400_not_500(bounded: Served, depth: int) -> None:
    body = '{"model":"fake-model","prompt":' + "[" * depth + "]" * depth + "}"
    status, error = _refused(bounded, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


def test_a_large_body_nested_a_million_deep_is_400_not_500(served: Served) -> None:
    # over the size admitted on the event loop: checked in a worker process
    depth = 1_000_000
    body = '{"model":"fake-model","prompt":' + "[" * depth + "]" * depth + "}"
    status, error = _refused(served, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


@pytest.mark.parametrize(
    "body",
    [
        r'{"model":"fake-model","prompt":"\ud800"}',
        r'{"model":"fake-model","prompt":"trailing \udfff"}',
        r'{"model":"fake-model","prompt":"hi","\ud800":1}',
        r'{"model":"fake-model","messages":[{"role":"user","content":"\udbff x"}]}',
    ],
)
def test_a_lone_surrogate_escape_is_400_not_500(bounded: Served, body: str) -> None:
    status, error = _refused(bounded, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


def test_a_lone_surrogate_in_a_large_body_is_400_not_500(served: Served) -> None:
    body = '{"model":"fake-model","prompt":"' + "x" * 400_000 + r'\ud800"}'
    status, error = _refused(served, body, JSON)
    assert (status, error["code"]) == (400, "invalid_request_error")


def test_a_surrogate_pair_escape_is_admitted(bounded: Served) -> None:
    body = r'{"model":"fake-model","prompt":"a smile \ud83d\ude00","max_tokens":2}'
    mark = bounded.mark()
    answer = raw_request(bounded.url, "POST", b"/v1/completions", [KEY, JSON], body.encode())
    assert answer.status == 200
    (received,) = bounded.since(mark)
    assert json.loads(received.body)["prompt"] == "a smile \U0001f600"


# time


def test_a_body_trickled_slower_than_the_body_timeout_is_408(bounded: Served) -> None:
    mark = bounded.mark()
    body = BODY.encode()
    with _connection(bounded.url) as sock:
        sock.sendall(_head(b"/v1/completions", KEY, JSON, ("Content-Length", str(len(body)))))
        started = time.monotonic()
        for byte in body:  # a byte every 50 ms: the whole body would take seconds
            if select.select([sock], [], [], 0.05)[0]:
                break  # answered
            sock.sendall(bytes([byte]))
        status, answer = _answer(sock)
        elapsed = time.monotonic() - started
    assert status == 408
    assert openai_error(answer)["code"] == "request_timeout"
    assert BODY_TIMEOUT_S <= elapsed < BODY_TIMEOUT_S + LATE_S
    assert bounded.since(mark) == []


def test_a_body_declared_and_never_sent_is_408(bounded: Served) -> None:
    with _connection(bounded.url) as sock:
        sock.sendall(_head(b"/v1/completions", KEY, JSON, ("Content-Length", "100")))
        started = time.monotonic()
        status, answer = _answer(sock)
        elapsed = time.monotonic() - started
    assert status == 408
    assert openai_error(answer)["code"] == "request_timeout"
    assert BODY_TIMEOUT_S <= elapsed < BODY_TIMEOUT_S + LATE_S


def test_a_connection_that_sends_nothing_gets_408_and_is_closed_at_the_header_timeout(
    bounded: Served,
) -> None:
    started = time.monotonic()  # the server's deadline starts once it accepts, not before
    with _connection(bounded.url) as sock:
        status, answer = _answer(sock)  # to the end of the connection: it was closed
        elapsed = time.monotonic() - started
    assert status == 408
    assert openai_error(answer)["code"] == "request_timeout"
    assert HEADER_TIMEOUT_S <= elapsed < HEADER_TIMEOUT_S + LATE_S


def _answer_kept_alive(sock: socket.socket) -> int:
    """The status of the answer on `sock`, its body read by its length (the connection may
    stay open)."""
    received = bytearray()
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, "closed without an answer"
        received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(v) for k, _, v in (x.partition(": ") for x in lines) if k.lower() == "content-length"
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0][9:12])


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` while the client trickles a byte
    every 0.1 s."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if select.select([sock], [], [], 0.1)[0]:
                if not sock.recv(65536):
                    return True
            else:
                sock.sendall(b" ")
    except OSError:  # reset, or a broken pipe: closed
        return True
    return False


REFUSED_BEFORE_THE_BODY = {
    "no key": (b"/v1/completions", [JSON, ("Content-Length", "100000000")], 401),
    "denied route": (b"/reset_prefix_cache", [KEY, JSON, ("Content-Length", "100000000")], 404),
    "declared too large": (b"/v1/completions", [KEY, JSON, ("Content-Length", "100000000")], 413),
    "body too slow": (b"/v1/completions", [KEY, JSON, ("Content-Length", "1000")], 408),
}


@pytest.mark.parametrize("refusal", sorted(REFUSED_BEFORE_THE_BODY))
def test_a_connection_refused_before_its_body_cannot_be_held_open_by_trickling_the_body(
    bounded: Served, refusal: str
) -> None:
    target, headers, status = REFUSED_BEFORE_THE_BODY[refusal]
    lines = [b"POST " + target + b" HTTP/1.1", b"Host: gateway"]  # kept alive: HTTP/1.1
    lines += [f"{name}: {value}".encode() for name, value in headers]
    with _connection(bounded.url) as sock:
        sock.sendall(b"\r\n".join([*lines, b"", b""]))
        assert _answer_kept_alive(sock) == status
        assert _closed_within(sock, BODY_TIMEOUT_S + LATE_S)


@contextlib.contextmanager
def _slow(served: Served, **faults: float) -> Iterator[None]:
    replica = served.replicas[0]
    for name, value in faults.items():
        setattr(replica, name, value)
    try:
        yield
    finally:
        for name in faults:
            setattr(replica, name, 0.0)


def _wait_for(happened: Callable[[], bool], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while not happened():
        assert time.monotonic() < deadline, f"not within {within_s} s"
        time.sleep(0.01)


def test_an_engine_slower_than_the_upstream_read_timeout_is_502(bounded: Served) -> None:
    with _slow(bounded, delay_headers_s=3.0):
        started = time.monotonic()
        response = httpx.post(
            bounded.url + "/v1/completions", content=BODY, headers={**ACME, "content-type": JSON[1]}
        )
        elapsed = time.monotonic() - started
    assert response.status_code == 502
    assert openai_error(response.content)["code"] == "upstream_error"
    assert READ_TIMEOUT_S <= elapsed < READ_TIMEOUT_S + LATE_S


def test_an_upstream_read_timeout_aborts_the_engines_request(bounded: Served) -> None:
    replica = bounded.replicas[0]
    aborted = replica.requests_aborted
    with _slow(bounded, delay_headers_s=3.0):
        httpx.post(
            bounded.url + "/v1/completions", content=BODY, headers={**ACME, "content-type": JSON[1]}
        )
        _wait_for(lambda: replica.requests_aborted > aborted, within_s=1.0)


def test_a_stream_whose_engine_falls_silent_past_the_read_timeout_is_broken_off(
    bounded: Served,
) -> None:
    replica = bounded.replicas[0]
    cancelled = replica.streams_cancelled
    body = {"model": "fake-model", "prompt": "a stream that stalls", "stream": True}
    with (
        _slow(bounded, delay_first_chunk_s=3.0),
        pytest.raises(httpx.RemoteProtocolError),  # never a clean, empty answer
        httpx.stream("POST", bounded.url + "/v1/completions", json=body, headers=ACME) as stream,
    ):
        assert stream.status_code == 200
        stream.read()
    _wait_for(lambda: replica.streams_cancelled > cancelled, within_s=1.0)


# a client that leaves


def test_a_client_that_hangs_up_before_its_answer_aborts_the_engines_request(
    served: Served,
) -> None:
    replica = served.replicas[0]
    aborted = replica.requests_aborted
    with _slow(served, delay_headers_s=3.0):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                served.url + "/v1/completions",
                content=BODY,
                headers={**ACME, "content-type": JSON[1]},
                timeout=0.3,  # hangs up after 0.3 s; the answer is 3 s away
            )
        _wait_for(lambda: replica.requests_aborted > aborted, within_s=1.0)


def test_a_client_that_hangs_up_on_a_stream_cancels_the_engines_stream(served: Served) -> None:
    replica = served.replicas[0]
    cancelled = replica.streams_cancelled
    body = {"model": "fake-model", "prompt": "a stream nobody reads", "stream": True}
    with _slow(served, delay_first_chunk_s=3.0):
        with httpx.stream(
            "POST", served.url + "/v1/completions", json=body, headers=ACME
        ) as response:
            assert response.status_code == 200
        # leaving the block closed the connection; the first chunk is 3 s away
        _wait_for(lambda: replica.streams_cancelled > cancelled, within_s=1.0)
