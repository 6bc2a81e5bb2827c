"""The precise router's proxy when a replica goes away between two health checks.

Two fake replicas (real uvicorn servers on loopback: ``/health``,
``/tokenize`` answering a prompt's bytes as its tokens, ``/v1/completions``
naming the replica) behind the router app (its lifespan running: HTTP clients,
health loop, KV-event follower). The health loop polls once at start and then
not for a minute, so a replica stopped after that first poll is still marked
healthy when the requests come: the proxy finds out by the refused connection.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import uvicorn
from prefixkit.engine_adapter.precise_router import RouterSettings, precise_router_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient


def _free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


async def _broken_stream() -> AsyncIterator[bytes]:
    """A stream that breaks off after its first event (the replica's connection drops)."""
    yield b'data: {"choices": [{"index": 0, "text": "ok"}]}\n\n'
    raise RuntimeError("the replica failed mid-stream")


class FakeReplica:
    """An OpenAI-compatible replica in a thread, stoppable mid-test."""

    def __init__(self, name: str) -> None:
        async def health(request: Request) -> JSONResponse:
            return JSONResponse({})

        async def tokenize(request: Request) -> JSONResponse:
            self.tokenized += 1
            body = await request.json()
            return JSONResponse({"tokens": list(body["prompt"].encode())})

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": "m", "served_by": name}]})

        async def completions(request: Request) -> Response:
            if (await request.json()).get("stream"):
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
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fake replica {name} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def replicas() -> Iterator[list[FakeReplica]]:
    started = [FakeReplica("a"), FakeReplica("b")]
    yield started
    for replica in started:
        replica.stop()


@pytest.fixture
def router(replicas: list[FakeReplica]) -> Iterator[TestClient]:
    settings = RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[f"tcp://127.0.0.1:{_free_port()}" for _ in replicas],  # no events
        health_interval_s=60.0,
    )
    with TestClient(precise_router_app(settings)) as client:
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
