"""The precise router's proxy when a replica goes away between two health
checks, when a stream breaks off, and when a client hangs up.

Two fake replicas (real uvicorn servers on loopback: ``/health``,
``/tokenize`` answering a prompt's bytes as its tokens, ``/v1/completions``
naming the replica) behind the router app (its lifespan running: HTTP clients,
health loop, KV-event follower). The health loop polls once at start and then
not for a minute, so a replica stopped after that first poll is still marked
healthy when the requests come: the proxy finds out by the refused connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from prefixkit.engine_adapter.routing.router import RouterSettings, precise_router_app
from prefixkit.engine_adapter.serving.keepalive import served
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


async def _broken_stream() -> AsyncIterator[bytes]:
    """A stream that breaks off after its first event (the replica's connection drops)."""
    yield b'data: {"choices": [{"index": 0, "text": "ok"}]}\n\n'
    raise RuntimeError("the replica failed mid-stream")


class Served:
    """An ASGI app served on loopback in a thread as prefixkit serves its own
    (`served`), stoppable mid-test."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = served(app, "127.0.0.1", self.port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class FakeReplica(Served):
    """An OpenAI-compatible replica. A streamed completion breaks off after its
    first event; one asked for ``"slow": "headers"`` answers after a second and
    a half, one asked for ``"slow": "chunk"`` sends its first chunk after that
    long, and counts itself in `streams_cancelled` if it is cancelled meanwhile."""

    def __init__(self, name: str) -> None:
        async def health(request: Request) -> JSONResponse:
            return JSONResponse({})

        async def tokenize(request: Request) -> JSONResponse:
            self.tokenized += 1
            body = await request.json()
            return JSONResponse({"tokens": list(body["prompt"].encode())})

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": "m", "served_by": name}]})

        async def slow_stream() -> AsyncIterator[bytes]:
            try:
                await asyncio.sleep(1.5)
            except asyncio.CancelledError:
                self.streams_cancelled += 1
                raise
            yield b'data: {"choices": [{"index": 0, "text": "late"}]}\n\n'

        async def completions(request: Request) -> Response:
            body = await request.json()
            if body.get("slow") == "headers":
                await asyncio.sleep(1.5)
            if body.get("slow") == "chunk":
                return StreamingResponse(slow_stream(), media_type="text/event-stream")
            if body.get("stream"):
                return StreamingResponse(_broken_stream(), media_type="text/event-stream")
            return JSONResponse({"object": "text_completion", "served_by": name})

        app = Starlette(
            routes=[
                Route("/health", health),
                Route("/v1/models", models),
                Route("/tokenize", tokenize, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"]),
            ]
        )
        self.tokenized = 0  # /tokenize calls answered
        self.streams_cancelled = 0
        super().__init__(app, f"fake replica {name}")


@pytest.fixture
def replicas() -> Iterator[list[FakeReplica]]:
    started = [FakeReplica("a"), FakeReplica("b")]
    yield started
    for replica in started:
        replica.stop()


def _settings(replicas: list[FakeReplica]) -> RouterSettings:
    return RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[f"tcp://127.0.0.1:{_free_port()}" for _ in replicas],  # no events
        health_interval_s=60.0,
    )


@pytest.fixture
def router(replicas: list[FakeReplica]) -> Iterator[TestClient]:
    with TestClient(precise_router_app(_settings(replicas))) as client:
        state = client.app.state.router  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while client.get("/health").json()["healthy"] != [True, True]:
            assert time.monotonic() < deadline, "the first health poll did not pass"
            time.sleep(0.05)
        assert state.turn == 0
        yield client


def _complete(router: TestClient, prompt: str) -> tuple[int, dict[str, object], str | None]:
    response = router.post("/v1/completions", json={"model": "m", "prompt": prompt})
    return response.status_code, response.json(), response.headers.get("x-prefixkit-replica")


def test_the_replica_with_the_fewest_requests_in_flight_tokenizes(
    replicas: list[FakeReplica], router: TestClient
) -> None:
    state = router.app.state.router  # type: ignore[attr-defined]
    state.inflight[0] = 3  # replica 0's turn, but it is busier
    status, _, _ = _complete(router, "a new conversation " * 8)
    assert status == 200
    assert [r.tokenized for r in replicas] == [0, 1]


def test_a_tokenize_refused_by_a_stopped_replica_is_asked_of_the_next(
    replicas: list[FakeReplica], router: TestClient
) -> None:
    replicas[0].stop()  # the first request's /tokenize goes to replica 0
    status, body, replica = _complete(router, "a new conversation " * 8)
    assert (status, body["served_by"], replica) == (200, "b", "1")
    assert router.get("/health").json()["healthy"] == [False, True]


def test_a_request_routed_to_a_stopped_replica_is_placed_again(
    replicas: list[FakeReplica], router: TestClient
) -> None:
    state = router.app.state.router  # type: ignore[attr-defined]
    state.turn = 1  # the /tokenize goes to replica 1 ...
    state.queued_blocks[1] = 500.0  # ... and replica 0 wins the placement
    replicas[0].stop()
    status, body, replica = _complete(router, "a new conversation " * 8)
    assert (status, body["served_by"], replica) == (200, "b", "1")
    assert state.healthy == [False, True]
    assert state.inflight == [0, 0]  # the failed placement ended, the retried one too
    assert state.index.coming_unheld(0) == 0
    assert state.queued_blocks[0] == 0.0


def test_the_model_list_comes_from_a_replica_that_answers(
    replicas: list[FakeReplica], router: TestClient
) -> None:
    replicas[0].stop()
    response = router.get("/v1/models")
    assert response.status_code == 200
    assert response.json()["data"][0]["served_by"] == "b"
    assert router.get("/health").json()["healthy"] == [False, True]


def test_with_every_replica_stopped_the_proxy_answers_502_naming_them(
    replicas: list[FakeReplica], router: TestClient
) -> None:
    for replica in replicas:
        replica.stop()
    status, body, _ = _complete(router, "anyone there?")
    assert status == 502
    message = str(body["error"]["message"])  # type: ignore[index]
    assert "no replica could tokenize" in message
    assert "replica 0" in message and "replica 1" in message


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([1, 2, 3], "must be a JSON object, got list"),
        ({"model": "m", "prompt": 42}, "prompt must be a string"),
        ({"model": "m", "prompt": []}, "prompt must be a string"),
        ({"model": "m", "prompt": "hi", "cache_salt": 7}, "cache_salt must be a string, got int"),
    ],
)
def test_a_body_the_router_cannot_read_is_refused_with_400(
    router: TestClient, payload: object, reason: str
) -> None:
    response = router.post("/v1/completions", json=payload)
    assert response.status_code == 400
    assert reason in response.json()["error"]["message"]


def test_a_stream_the_replica_breaks_off_still_ends_the_request_in_the_router(
    router: TestClient,
) -> None:
    state = router.app.state.router  # type: ignore[attr-defined]
    body = {"model": "m", "prompt": "a new conversation " * 8, "stream": True}
    with (
        pytest.raises(httpx.RemoteProtocolError),  # the client sees the stream break too
        router.stream("POST", "/v1/completions", json=body) as response,
    ):
        for _ in response.iter_raw():
            pass
    assert state.inflight == [0, 0]
    assert [state.index.coming_unheld(r) for r in range(2)] == [0, 0]


def _gone_at_start_under_asgi_2_4(app: ASGIApp) -> ASGIApp:
    """`app` as an ASGI 2.4 server runs it, for a client gone before the
    response starts: sending the start raises OSError (Starlette then streams
    nothing and skips a background task)."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or "gone" not in scope["path"]:
            return await app(scope, receive, send)

        async def send_to_nobody(message: Message) -> None:
            if message["type"] == "http.response.start":
                raise OSError("the client is gone")
            await send(message)

        scope = {
            **scope,
            "path": scope["path"].replace("/gone", ""),
            "asgi": {"spec_version": "2.4"},
        }
        with contextlib.suppress(Exception):
            await app(scope, receive, send_to_nobody)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return served


@pytest.fixture
def served_router(replicas: list[FakeReplica]) -> Iterator[httpx.Client]:
    """The router served by uvicorn (TestClient cannot hang up mid-request);
    under /gone/..., as if the client had gone before the response started."""
    app = _gone_at_start_under_asgi_2_4(precise_router_app(_settings(replicas)))
    served = Served(app, "the router")
    with httpx.Client(base_url=served.url) as client:
        yield client
    served.stop()


def _wait_until_ended(router: httpx.Client, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while router.get("/router/state").json()["inflight"] != [0, 0]:
        assert time.monotonic() < deadline, "the request stayed in flight"
        time.sleep(0.05)
    assert router.get("/router/state").json()["coming_blocks"] == [0, 0]


def test_a_client_that_hangs_up_before_the_first_chunk_ends_its_request_and_the_replicas(
    replicas: list[FakeReplica], served_router: httpx.Client
) -> None:
    body = {"model": "m", "prompt": "a new conversation " * 8, "stream": True, "slow": "chunk"}
    with served_router.stream("POST", "/v1/completions", json=body) as response:
        replica = int(response.headers["x-prefixkit-replica"])
        assert served_router.get("/router/state").json()["inflight"][replica] == 1
    # leaving the block closed the connection; the replica's first chunk is 1.5 s away
    _wait_until_ended(served_router, within_s=1.0)
    deadline = time.monotonic() + 1.0
    while replicas[replica].streams_cancelled == 0:
        assert time.monotonic() < deadline, "the replica went on generating"
        time.sleep(0.05)


def test_a_client_that_hangs_up_before_the_replica_answers_ends_its_request(
    served_router: httpx.Client,
) -> None:
    body = {"model": "m", "prompt": "a new conversation " * 8, "stream": True, "slow": "headers"}
    with pytest.raises(httpx.ReadTimeout):  # hangs up after 0.3 s; the replica answers at 1.5 s
        served_router.post("/v1/completions", json=body, timeout=0.3)
    assert served_router.get("/router/state").json()["inflight"] != [0, 0]
    _wait_until_ended(served_router, within_s=3.0)


def test_a_client_gone_before_the_response_starts_ends_its_request_and_the_replicas(
    replicas: list[FakeReplica], served_router: httpx.Client
) -> None:
    body = {"model": "m", "prompt": "a new conversation " * 8, "stream": True, "slow": "chunk"}
    assert served_router.post("/gone/v1/completions", json=body).status_code == 499
    _wait_until_ended(served_router, within_s=1.0)
    deadline = time.monotonic() + 1.0  # the replica's first chunk is 1.5 s away
    while sum(r.streams_cancelled for r in replicas) == 0:
        assert time.monotonic() < deadline, "the replica went on generating"
        time.sleep(0.05)
