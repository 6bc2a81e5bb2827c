"""The relay, the same through every routing stage: a stream the replica breaks off, and a
client that hangs up before the replica answers, before the first chunk, or before the
response starts (under ASGI 2.4), end the request (in the precise router's books too)
and close the replica's response, so the engine stops generating for nobody.

The serving app runs on a real uvicorn server (a test client cannot hang up
mid-request), in front of two fake replicas, with the gateway stage or the precise stage.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prefixkit.engine_adapter import Tenants
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.engine_adapter.serving.router import DirectRoute, PreciseRoute, Routing
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from starlette.types import ASGIApp, Message, Receive, Scope, Send

KEY = {"Authorization": "Bearer key-acme"}
TENANTS = Tenants({"key-acme": "acme"}, "relay-test-secret-0123456789")
BODY = {"model": "fake-model", "prompt": "a new conversation " * 8, "stream": True}


def _gone_at_start_under_asgi_2_4(app: ASGIApp) -> ASGIApp:
    """`app` as an ASGI 2.4 server runs it, for a client gone before the response
    starts: sending the start raises OSError (Starlette then streams nothing and
    skips a background task)."""

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
            "raw_path": scope["raw_path"].replace(b"/gone", b""),
            "asgi": {"spec_version": "2.4"},
        }
        with contextlib.suppress(Exception):
            await app(scope, receive, send_to_nobody)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return served


def _routing(stage: str, replicas: list[FakeVLLM]) -> Routing:
    if stage == "gateway":
        return DirectRoute(replicas[0].url, [replicas[0].url], name="replica 0")
    settings = RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[None for _ in replicas],
        health_interval_s=60.0,
    )
    return PreciseRoute(RouterState(settings))


@pytest.fixture(params=["gateway", "precise"])
def served(
    request: pytest.FixtureRequest, replicas: list[FakeVLLM]
) -> Iterator[tuple[httpx.Client, Routing]]:
    """The app with the gateway stage in front of one replica, or the precise stage in
    front of two; under /gone/..., as if the client had gone before the response
    started."""
    routing = _routing(request.param, replicas)
    app = _gone_at_start_under_asgi_2_4(serving_app(routing, TENANTS))
    with (
        served_in_thread(app, "127.0.0.1", free_port()) as url,
        httpx.Client(base_url=url, headers=KEY) as client,
    ):
        yield client, routing


def _in_flight(routing: Routing) -> list[int]:
    state = routing.state()
    return [] if state is None else [n for n in state.inflight if n]


def _wait_until_ended(routing: Routing, replicas: list[FakeVLLM], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while _in_flight(routing) or sum(r.streams_cancelled for r in replicas) == 0:
        assert time.monotonic() < deadline, "the request stayed in flight, or generating"
        time.sleep(0.05)
    state = routing.state()
    assert state is None or [state.index.coming_unheld(r) for r in range(2)] == [0, 0]


def test_a_stream_the_replica_breaks_off_reaches_the_client_broken_and_ends_the_request(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, routing = served
    for replica in replicas:
        replica.break_after_chunks = 1
    with (
        pytest.raises(httpx.RemoteProtocolError),  # never a clean, shorter answer
        client.stream("POST", "/v1/completions", json=BODY) as response,
    ):
        for _ in response.iter_raw():
            pass
    assert _in_flight(routing) == []


def test_a_client_that_hangs_up_before_the_first_chunk_ends_its_request_and_the_replicas(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, routing = served
    for replica in replicas:
        replica.delay_first_chunk_s = 1.5
    with client.stream("POST", "/v1/completions", json=BODY) as response:
        assert response.status_code == 200
    # leaving the block closed the connection; the replica's first chunk is 1.5 s away
    _wait_until_ended(routing, replicas, within_s=1.0)


def test_a_client_that_hangs_up_mid_stream_ends_its_request_and_the_replicas(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, routing = served
    for replica in replicas:
        replica.chunk_interval_s = 0.5  # the whole stream: 4 s
    with client.stream("POST", "/v1/completions", json=BODY) as response:
        next(response.iter_raw())
    # leaving the block closed the connection after the first chunk
    deadline = time.monotonic() + 1.5
    while _in_flight(routing) or any(
        httpx.get(f"{replica.url}/load").json()["server_load"] for replica in replicas
    ):
        assert time.monotonic() < deadline, "the request stayed in flight, or generating"
        time.sleep(0.05)


def test_a_client_that_hangs_up_before_the_replica_answers_ends_its_request(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, routing = served
    for replica in replicas:
        replica.delay_headers_s = 1.5
        replica.delay_first_chunk_s = 1.5
    with pytest.raises(httpx.ReadTimeout):  # hangs up after 0.3 s; headers come at 1.5 s
        client.post("/v1/completions", json=BODY, timeout=0.3)
    _wait_until_ended(routing, replicas, within_s=3.0)


def test_a_client_gone_before_the_response_starts_ends_its_request_and_the_replicas(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, routing = served
    for replica in replicas:
        replica.delay_first_chunk_s = 1.5
    assert client.post("/gone/v1/completions", json=BODY).status_code == 499
    _wait_until_ended(routing, replicas, within_s=1.0)


def test_an_unreachable_upstream_answers_502_in_openais_shape(
    replicas: list[FakeVLLM], served: tuple[httpx.Client, Routing]
) -> None:
    client, _ = served
    for replica in replicas:
        replica.stop()
    response = client.post("/v1/completions", json={**BODY, "stream": False})
    assert response.status_code == 502
    assert set(response.json()["error"]) == {"message", "type", "code", "param"}


class _FailingRoute(DirectRoute):
    async def place(self, path: str, body: dict[str, object], pin: int | None) -> Any:
        raise RuntimeError("a bug in a routing stage")


def test_a_failure_of_the_app_itself_is_a_500_in_openais_shape(
    replicas: list[FakeVLLM],
) -> None:
    routing = _FailingRoute(replicas[0].url, [replicas[0].url])
    with (
        served_in_thread(serving_app(routing, TENANTS), "127.0.0.1", free_port()) as url,
        httpx.Client(base_url=url, headers=KEY) as client,
    ):
        response = client.post("/v1/completions", json={**BODY, "stream": False})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
