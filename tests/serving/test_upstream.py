"""The relay's upstream connections and what it does to a request and an answer on the
way: connections kept alive and reused, an answer streamed byte for byte as it comes, a
request body parsed once, an upstream that restarts or stalls.

The serving app runs on a real uvicorn server (no tenants: every request forwarded), in
front of a fake replica or of a small upstream of the test's own that records the client
port of each request (one port: one connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.engine_adapter.serving.limits import Limits
from prefixkit.engine_adapter.serving.router import DirectRoute, PreciseRoute, Routing
from prefixkit.engine_adapter.serving.upstream import UpstreamAnswer, UpstreamPool, UpstreamPools
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

BODY = {"model": "fake-model", "prompt": "a new conversation " * 8}


class Upstream:
    """An upstream that records the client port of every request and answers
    ``/v1/completions`` with `chunks`, streamed one by one (the second not before `gate`
    is set, each `pause_s` after the one before), counting those `sent`."""

    def __init__(self, chunks: list[bytes], pause_s: float = 0.0) -> None:
        self.chunks = chunks
        self.pause_s = pause_s
        self.ports: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.sent = 0

    def app(self) -> Starlette:
        async def health(request: Request) -> Response:
            return JSONResponse({})

        async def complete(request: Request) -> Response:
            assert request.client is not None
            self.ports.append(request.client.port)
            await request.body()

            async def stream() -> AsyncIterator[bytes]:
                for number, chunk in enumerate(self.chunks):
                    while number == 1 and not self.gate.is_set():
                        await anyio.sleep(0.01)
                    if number and self.pause_s:
                        await anyio.sleep(self.pause_s)
                    yield chunk
                    self.sent += 1

            return StreamingResponse(stream(), media_type="text/event-stream")

        routes = [Route("/health", health), Route("/v1/completions", complete, methods=["POST"])]
        return Starlette(routes=routes)


@contextlib.contextmanager
def relayed(routing: Routing, limits: Limits | None = None) -> Iterator[str]:
    """The serving app with `routing`, served; its URL."""
    with served_in_thread(serving_app(routing, None, limits), "127.0.0.1", free_port()) as url:
        yield url


@contextlib.contextmanager
def upstream_served(chunks: list[bytes], pause_s: float = 0.0) -> Iterator[tuple[Upstream, str]]:
    upstream = Upstream(chunks, pause_s)
    with served_in_thread(upstream.app(), "127.0.0.1", free_port()) as url:
        yield upstream, url


def test_requests_one_after_another_share_one_upstream_connection() -> None:
    with (
        upstream_served([b"data: ok\n\n"]) as (upstream, url),
        relayed(DirectRoute(url, [url])) as router,
        httpx.Client(base_url=router) as client,
    ):
        for _ in range(20):
            assert client.post("/v1/completions", json=BODY).status_code == 200
    assert len(upstream.ports) == 20
    assert len(set(upstream.ports)) == 1


def test_requests_at_once_open_at_most_one_upstream_connection_each() -> None:
    at_once = 8
    with (
        upstream_served([b"data: ok\n\n"]) as (upstream, url),
        relayed(DirectRoute(url, [url])) as router,
        httpx.Client(base_url=router, limits=httpx.Limits(max_connections=at_once)) as client,
        ThreadPoolExecutor(at_once) as pool,
    ):
        statuses = list(
            pool.map(lambda _: client.post("/v1/completions", json=BODY).status_code, range(80))
        )
    assert statuses == [200] * 80
    assert len(set(upstream.ports)) <= at_once


def test_a_streamed_answer_reaches_the_client_byte_for_byte_as_it_comes() -> None:
    chunks = [
        b"data: first\n\n",
        "data: caf\u00e9 \u2603".encode()[:-2],  # a character cut between two chunks
        "\u2603".encode()[-2:] + b"\r\n\r\n",
        bytes(range(256)) * 1024,
        b"",
        b"data: [DONE]\n\n",
    ]
    with (
        upstream_served(chunks) as (upstream, url),
        relayed(DirectRoute(url, [url])) as router,
        httpx.Client(base_url=router) as client,
    ):
        upstream.gate.clear()  # the second chunk waits until the client has the first
        received = bytearray()
        with client.stream("POST", "/v1/completions", json=BODY) as response:
            pieces = response.iter_raw()
            received += next(pieces)
            assert bytes(received) == chunks[0]
            upstream.gate.set()
            for piece in pieces:
                received += piece
    assert bytes(received) == b"".join(chunks)


def test_a_client_that_does_not_read_holds_the_upstream_back() -> None:
    chunks = [bytes(64 * 1024)] * 1024  # 64 MB: more than the sockets on the way hold
    with (
        upstream_served(chunks) as (upstream, url),
        relayed(DirectRoute(url, [url])) as router,
        httpx.Client(base_url=router) as client,
        client.stream("POST", "/v1/completions", json=BODY) as response,
    ):
        time.sleep(1.0)
        assert upstream.sent < len(chunks)  # the relay reads no further than the client
        received = sum(len(piece) for piece in response.iter_raw())
    assert received == 64 * 1024 * 1024


def test_an_upstream_silent_mid_stream_past_the_read_timeout_breaks_the_stream_off() -> None:
    limits = Limits(upstream_read_timeout_s=0.5)
    with (
        upstream_served([b"data: first\n\n", b"data: second\n\n"]) as (upstream, url),
        relayed(DirectRoute(url, [url]), limits) as router,
        httpx.Client(base_url=router) as client,
    ):
        upstream.gate.clear()  # the second chunk never comes while the client waits
        started = time.monotonic()
        with (
            pytest.raises(httpx.RemoteProtocolError),  # never a clean, shorter answer
            client.stream("POST", "/v1/completions", json=BODY) as response,
        ):
            for _ in response.iter_raw():
                pass
        assert time.monotonic() - started < 3.0
        upstream.gate.set()


def test_a_stream_whose_every_pause_is_under_the_read_timeout_arrives_whole() -> None:
    chunks = [b"data: %d\n\n" % n for n in range(6)]  # 1.8 s in all, 0.3 s apart
    limits = Limits(upstream_read_timeout_s=1.0)
    with (
        upstream_served(chunks, pause_s=0.3) as (_, url),
        relayed(DirectRoute(url, [url]), limits) as router,
        httpx.Client(base_url=router) as client,
    ):
        response = client.post("/v1/completions", json=BODY)
    assert response.status_code == 200
    assert response.content == b"".join(chunks)


def test_the_router_parses_a_request_body_once(
    replicas: list[FakeVLLM], monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = json.dumps(BODY, indent=2).encode()
    parses = []
    loads = json.loads

    def counted(text: str | bytes, *args: Any, **kwargs: Any) -> Any:
        if text == raw:
            parses.append(threading.current_thread().name)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counted)
    settings = RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[None for _ in replicas],
        health_interval_s=60.0,
    )
    with relayed(PreciseRoute(RouterState(settings))) as router:
        response = httpx.post(
            f"{router}/v1/completions",
            content=raw,
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 200
    # the body passes as sent: the replica parses the same bytes, in a thread of its own
    assert [name for name in parses if name != "fake-vllm"] == ["prefixkit-server"]
    assert sum(len(r.generations) for r in replicas) == 1


def test_a_replica_restarted_between_two_requests_answers_the_next_one() -> None:
    replica = FakeVLLM().start()
    try:
        with (
            relayed(DirectRoute(replica.url, [replica.url])) as router,
            httpx.Client(base_url=router) as client,
        ):
            assert client.post("/v1/completions", json=BODY).status_code == 200
            replica.stop()  # the router's kept-alive connection to it is closed
            replica = FakeVLLM(port=replica.port).start()
            response = client.post("/v1/completions", json=BODY)
        assert response.status_code == 200
        assert len(replica.generations) == 1
    finally:
        replica.stop()


def test_an_upstream_silent_past_the_read_timeout_is_a_502(replicas: list[FakeVLLM]) -> None:
    replica = replicas[0]
    replica.delay_headers_s = 5.0
    limits = Limits(upstream_read_timeout_s=0.5)
    with relayed(DirectRoute(replica.url, [replica.url]), limits) as router:
        response = httpx.post(f"{router}/v1/completions", json=BODY, timeout=4.0)
    assert response.status_code == 502
    assert "ReadTimeout" in response.json()["error"]["message"]


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    """`body` in chunked transfer coding, chunks of `sizes` (cycled), with an extension."""
    framed, at = bytearray(), 0
    for size in itertools.cycle(sizes or [len(body) or 1]):
        if at >= len(body):
            break
        piece = body[at : at + size]
        framed += b"%x;ext=1\r\n%s\r\n" % (len(piece), piece)
        at += size
    return bytes(framed + b"0\r\n\r\n")


async def _pieces(upstream: UpstreamAnswer, taken: list[bool] | None) -> list[bytes]:
    """The body pieces of `upstream`: from `body`, or (`taken` given) from `pipe`, its
    `take` returning `taken`'s values in turn (False: the client takes no more for now)."""
    if taken is None:
        return [piece async for piece in upstream.body()]
    pieces: list[bytes] = []
    answers = itertools.cycle(taken)

    def take(piece: bytes) -> bool:
        pieces.append(piece)
        return next(answers)

    async def drained() -> None:
        await asyncio.sleep(0)

    await upstream.pipe(take, drained)
    return pieces


def _read_twice(
    answer: bytes, cuts: list[int], taken: list[bool] | None = None
) -> tuple[list[list[bytes]], int]:
    """Ask a server that sends `answer` in pieces of `cuts` bytes (cycled, each its own
    write) twice through one `UpstreamPool`: the body pieces each answer gave (read as
    `_pieces` reads them), and how many connections the pool opened."""
    served = []  # connections being served

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError):  # the client closed it
            while await reader.readuntil(b"\r\n\r\n"):
                at = 0
                for cut in itertools.cycle(cuts):  # the answer in pieces, each its own write
                    if at >= len(answer):
                        break
                    writer.write(answer[at : at + cut])
                    await writer.drain()
                    await asyncio.sleep(0)
                    at += cut
        writer.close()
        await writer.wait_closed()
        served.remove(writer)

    async def run() -> tuple[list[list[bytes]], int]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = UpstreamPool(f"http://127.0.0.1:{port}")
        bodies: list[list[bytes]] = []
        try:
            for _ in range(2):
                upstream = await pool.send("GET", "/")
                try:
                    bodies.append(await _pieces(upstream, taken))
                finally:
                    upstream.close()
        finally:
            pool.close()
            server.close()
            while served:
                await asyncio.sleep(0.001)
        return bodies, pool.opened

    return asyncio.run(run())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=6),
    cuts=st.lists(st.integers(1, 400), min_size=1, max_size=8),
    chunked=st.booleans(),
)
def test_an_answer_however_framed_and_cut_is_read_whole_and_the_connection_reused(
    body: bytes, sizes: list[int], cuts: list[int], chunked: bool
) -> None:
    framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % len(body)
    answer = b"HTTP/1.1 200 OK\r\n%s\r\n\r\n%s" % (
        framing,
        _chunked(body, sizes) if chunked else body,
    )

    pieces, opened = _read_twice(answer, cuts)
    assert [b"".join(read) for read in pieces] == [body, body]
    assert opened == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=6),
    cuts=st.lists(st.integers(1, 400), min_size=1, max_size=8),
    taken=st.lists(st.booleans(), min_size=1, max_size=5),
)
def test_a_chunked_answer_piped_however_cut_and_paused_is_passed_whole_and_the_connection_reused(
    body: bytes, sizes: list[int], cuts: list[int], taken: list[bool]
) -> None:
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + _chunked(body, sizes)

    pieces, opened = _read_twice(answer, cuts, taken)
    assert [b"".join(read) for read in pieces] == [body, body]
    assert all(pieces[0]) and all(pieces[1])  # never an empty piece
    assert opened == 1


def test_chunks_that_arrive_together_are_passed_on_as_one_piece() -> None:
    events = [b'data: {"n": %d}\n\n' % n for n in range(8)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + framed
    pieces, _ = _read_twice(answer, [len(answer)])
    assert pieces == [[b"".join(events)], [b"".join(events)]]


@pytest.mark.parametrize(
    ("framed", "error"),
    [
        (b"zz\r\nhello\r\n0\r\n\r\n", "malformed chunk size"),
        (b"5\r\nhello!!0\r\n\r\n", "does not end with CRLF"),
        (b"5" * 5000, "size line is too long"),
    ],
)
@pytest.mark.parametrize("piped", [False, True], ids=["read", "piped"])
def test_a_malformed_chunked_answer_is_refused_by_what_is_wrong(
    framed: bytes, error: str, piped: bool
) -> None:
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + framed

    async def run() -> None:
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            with contextlib.suppress(ConnectionError):
                await reader.read()  # until the client gives up on the connection
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            done.set()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        pool = UpstreamPool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            upstream = await pool.send("GET", "/")
            try:
                with pytest.raises(httpx.RemoteProtocolError, match=error):
                    await _pieces(upstream, [True] if piped else None)
            finally:
                upstream.close()
        finally:
            pool.close()
            await done.wait()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_health_polls_of_an_upstream_share_one_kept_alive_connection() -> None:
    async def run(url: str) -> tuple[list[int], int]:
        polls = UpstreamPools()
        try:
            statuses = [await polls.status(url, "/health", timeout=2.0) for _ in range(5)]
            return statuses, polls.pool(url).opened
        finally:
            polls.close()
            await asyncio.sleep(0.01)  # the closed connections' transports let go of them

    with upstream_served([b"data: ok\n\n"]) as (_, url):
        assert asyncio.run(run(url)) == ([200] * 5, 1)


def test_a_health_poll_of_an_upstream_that_does_not_answer_times_out() -> None:
    async def run() -> type[BaseException] | None:
        hung_up = asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                await reader.read()  # until the client gives up on the connection
            writer.close()
            hung_up.set()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        polls = UpstreamPools()
        try:
            await polls.status(f"http://127.0.0.1:{port}", "/health", timeout=0.2)
        except httpx.TimeoutException as error:
            return type(error)
        finally:
            polls.close()
            await asyncio.wait_for(hung_up.wait(), 5.0)
            server.close()
            await server.wait_closed()
        return None

    assert asyncio.run(run()) is httpx.TimeoutException
