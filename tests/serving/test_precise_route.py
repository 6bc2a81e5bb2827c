"""The precise routing stage when a replica goes away between two health checks, and when a
request body cannot be routed.

Two fake replicas behind the serving app with the precise stage (its lifespan running:
HTTP clients, health loop). The health loop polls once at start and then not for a
minute, so a replica stopped after that first poll is still marked healthy when the
requests come: the stage finds out by the refused connection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.router import PreciseRoute
from prefixkit.testing.fake_vllm import FakeVLLM
from starlette.testclient import TestClient


def precise_app_for(replicas: list[FakeVLLM]) -> TestClient:
    settings = RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[None for _ in replicas],  # no events: the index stays empty
        health_interval_s=60.0,
    )
    return TestClient(serving_app(PreciseRoute(RouterState(settings))))


@pytest.fixture
def router(replicas: list[FakeVLLM]) -> Iterator[TestClient]:
    with precise_app_for(replicas) as client:
        deadline = time.monotonic() + 10
        while client.get("/health").json()["healthy"] != [True, True]:
            assert time.monotonic() < deadline, "the first health poll did not pass"
            time.sleep(0.05)
        assert client.app.routing.state().turn == 0  # type: ignore[attr-defined]
        yield client


def _state(router: TestClient) -> RouterState:
    state: RouterState = router.app.routing.state()  # type: ignore[attr-defined]
    return state


def _complete(router: TestClient, prompt: str) -> tuple[int, dict[str, object], str | None]:
    response = router.post("/v1/completions", json={"model": "fake-model", "prompt": prompt})
    return response.status_code, response.json(), response.headers.get("x-prefixkit-replica")


def _served_by(replicas: list[FakeVLLM]) -> list[int]:
    return [len(replica.generations) for replica in replicas]


def test_the_replica_with_the_fewest_requests_in_flight_tokenizes(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    _state(router).inflight[0] = 3  # replica 0's turn, but it is busier
    status, _, _ = _complete(router, "a new conversation " * 8)
    assert status == 200
    assert [r.tokenized for r in replicas] == [0, 1]


def test_a_tokenize_refused_by_a_stopped_replica_is_asked_of_the_next(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    replicas[0].stop()  # the first request's /tokenize goes to replica 0
    status, _, replica = _complete(router, "a new conversation " * 8)
    assert (status, replica, _served_by(replicas)) == (200, "1", [0, 1])
    assert router.get("/health").json()["healthy"] == [False, True]


def test_a_request_routed_to_a_stopped_replica_is_placed_again(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    state = _state(router)
    state.turn = 1  # the /tokenize goes to replica 1 ...
    state.queued_blocks[1] = 500.0  # ... and replica 0 wins the placement
    replicas[0].stop()
    status, _, replica = _complete(router, "a new conversation " * 8)
    assert (status, replica, _served_by(replicas)) == (200, "1", [0, 1])
    assert state.healthy == [False, True]
    assert state.inflight == [0, 0]  # the failed placement ended, the retried one too
    assert state.index.coming_unheld(0) == 0
    assert state.queued_blocks[0] == 0.0


def test_the_model_list_comes_from_a_replica_that_answers(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    replicas[0].stop()
    response = router.get("/v1/models")
    assert response.status_code == 200
    assert response.json()["data"][0]["id"] == "fake-model"
    assert router.get("/health").json()["healthy"] == [False, True]


def test_with_every_replica_stopped_the_stage_answers_502_naming_them(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    for replica in replicas:
        replica.stop()
    status, body, _ = _complete(router, "anyone there?")
    assert status == 502
    error = body["error"]
    assert isinstance(error, dict)
    assert error["type"] == "upstream_unreachable"
    assert "no replica could tokenize" in error["message"]
    assert "replica 0" in error["message"] and "replica 1" in error["message"]


@pytest.mark.parametrize(
    ("payload", "reason", "param"),
    [
        ([1, 2, 3], "must be a JSON object, got an array", None),
        ({"model": "fake-model", "prompt": 42}, "prompt must be a string", "prompt"),
        ({"model": "fake-model", "prompt": []}, "prompt must be a string", "prompt"),
        (
            {"model": "fake-model", "prompt": "hi", "cache_salt": 7},
            "cache_salt must be a string, got int",
            "cache_salt",
        ),
    ],
)
def test_a_body_that_cannot_be_placed_is_refused_with_400_in_openais_shape(
    router: TestClient, payload: object, reason: str, param: str | None
) -> None:
    response = router.post("/v1/completions", json=payload)
    assert response.status_code == 400
    error = response.json()["error"]
    assert reason in error["message"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "invalid_request_error",
        param,
    )


def test_a_responses_request_tokenize_cannot_read_is_placed_and_answered_by_the_engine(
    replicas: list[FakeVLLM], router: TestClient
) -> None:
    # no messages to tokenize: /tokenize answers 400, the engine decides on the request
    response = router.post("/v1/responses", json={"model": "fake-model", "input": []})
    assert response.status_code == 200
    assert sum(r.tokenized for r in replicas) == 1
    assert sum(_served_by(replicas)) == 1


_HUGE_IDS = ",".join(["9" * 30] * 40)
_NEGATIVE_IDS = ",".join(["-" + "9" * 25] * 40)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/responses", '{"model":"fake-model","input":"hi","tools":5}'),
        ("/v1/messages", '{"model":"fake-model","max_tokens":5,"messages":5}'),
        (
            "/v1/messages",
            '{"model":"fake-model","max_tokens":5,'
            '"messages":[{"role":"user","content":"hi"}],"tools":7}',
        ),
        (
            "/v1/chat/completions",
            '{"model":"fake-model","messages":[{"role":"user","content":NaN}]}',
        ),
        (
            "/v1/chat/completions",
            '{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"tools":[{"x":Infinity}]}',
        ),
        ("/v1/responses", '{"model":"fake-model","input":[{"role":"user","content":NaN}]}'),
        ("/v1/completions", '{"model":"fake-model","prompt":[' + _HUGE_IDS + "]}"),
        ("/v1/completions", '{"model":"fake-model","prompt":[' + _NEGATIVE_IDS + "]}"),
    ],
)
def test_a_body_the_stage_cannot_read_is_placed_and_answered_by_the_engine(
    replicas: list[FakeVLLM], router: TestClient, path: str, body: str
) -> None:
    # tools that are not a list, NaN where /tokenize is asked, ids beyond 64 bits: the
    # stage places the request by load and the engine answers it, never a 500 of its own
    response = router.post(path, content=body, headers={"content-type": "application/json"})
    assert "x-prefixkit-replica" in response.headers, response.text
    assert response.status_code in (200, 400), response.text  # the fake engine's answer
    assert sum(len(r.generations) for r in replicas) == 1
