"""The precise routing stage computes a request's prompt tokens itself, from the model
folder the replicas load, and asks a replica's ``/tokenize`` only for a request it cannot
tokenize exactly there (or when it has no folder), counting each."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.router import PreciseRoute
from prefixkit.testing.fake_vllm import FakeVLLM
from starlette.testclient import TestClient

CHAT: dict[str, Any] = {
    "model": "fake-model",
    "messages": [
        {"role": "system", "content": "You answer questions about egress prices. " * 6},
        {"role": "user", "content": "How much is 250 GB of egress?"},
    ],
    "cache_salt": "tenant-a",
}
IMAGE_CHAT: dict[str, Any] = {
    "model": "fake-model",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is on this invoice?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ],
}


def _router(replicas: list[FakeVLLM], model_dir: Path | None) -> TestClient:
    settings = RouterSettings(
        replica_urls=[r.url for r in replicas],
        kv_endpoints=[None for _ in replicas],
        health_interval_s=60.0,
        model_dir=model_dir,
    )
    return TestClient(serving_app(PreciseRoute(RouterState(settings))))


@pytest.fixture
def started() -> Iterator[Any]:
    clients: list[TestClient] = []

    def start(replicas: list[FakeVLLM], model_dir: Path | None) -> TestClient:
        client = _router(replicas, model_dir).__enter__()
        clients.append(client)
        deadline = time.monotonic() + 10
        while client.get("/health").json()["healthy"] != [True] * len(replicas):
            assert time.monotonic() < deadline, "the first health poll did not pass"
            time.sleep(0.05)
        return client

    yield start
    for client in clients:
        client.__exit__(None, None, None)


def _state(client: TestClient) -> RouterState:
    state: RouterState = client.app.routing.state()  # type: ignore[attr-defined]
    return state


def test_a_chat_request_is_tokenized_in_the_router_not_by_a_replica(
    replicas: list[FakeVLLM], started: Any, hf_tokenizer_dir: Path
) -> None:
    client = started(replicas, hf_tokenizer_dir)
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    state = _state(client)
    assert (state.tokenized_here, state.tokenize_fallbacks) == (1, 0)
    assert [r.tokenized for r in replicas] == [0, 0]


def test_the_router_hashes_the_tokens_it_computed(
    replicas: list[FakeVLLM], started: Any, hf_tokenizer_dir: Path
) -> None:
    client = started(replicas, hf_tokenizer_dir)
    expected = PromptTokenizer.load(hf_tokenizer_dir)
    assert isinstance(expected, PromptTokenizer)
    tokens = expected.tokens("/v1/chat/completions", CHAT)
    assert isinstance(tokens, PromptTokens)
    state = _state(client)
    hashed: list[tuple[list[int], str | None]] = []
    original = state.hashes

    def recording(token_ids: Any, salt: str | None) -> list[int]:
        hashed.append((list(token_ids), salt))
        return original(token_ids, salt)

    state.hashes = recording  # type: ignore[method-assign,assignment]
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert hashed == [(tokens.token_ids, "tenant-a")]


def test_a_request_it_cannot_tokenize_exactly_is_asked_of_a_replica_and_counted(
    replicas: list[FakeVLLM], started: Any, hf_tokenizer_dir: Path
) -> None:
    client = started(replicas, hf_tokenizer_dir)
    assert client.post("/v1/chat/completions", json=IMAGE_CHAT).status_code == 200
    state = _state(client)
    assert (state.tokenized_here, state.tokenize_fallbacks) == (0, 1)
    assert sum(r.tokenized for r in replicas) == 1


def test_without_the_model_folder_it_says_so_at_start_and_asks_the_replicas(
    replicas: list[FakeVLLM], started: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        client = started(replicas, None)
    assert "model folder the replicas load is not known" in caplog.text
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert _state(client).tokenize_fallbacks == 1


def test_a_folder_without_a_fast_tokenizer_is_named_at_start(
    replicas: list[FakeVLLM], started: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        started(replicas, tmp_path)
    assert f"{tmp_path} has no tokenizer.json" in caplog.text


def test_the_router_state_reports_both_counts(
    replicas: list[FakeVLLM], started: Any, hf_tokenizer_dir: Path
) -> None:
    client = started(replicas, hf_tokenizer_dir)
    client.post("/v1/chat/completions", json=CHAT)
    client.post("/v1/chat/completions", json=IMAGE_CHAT)
    state = client.get("/router/state").json()
    assert (state["tokenized_here"], state["tokenize_fallbacks"]) == (1, 1)
