"""The fake vLLM replica serves the routes of vLLM 0.32's API server: every path and method its
``/openapi.json`` lists (committed in tests/data), the development routes only in dev mode
(vLLM's ``VLLM_SERVER_DEV_MODE=1``), and FastAPI's 404 and 405 for the rest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prefixkit.testing.fake_vllm import FakeVLLM

OPENAPI = Path(__file__).parents[1] / "data" / "engine_routes" / "vllm-0.32-openapi.json"

# vLLM 0.32 registers these only with VLLM_SERVER_DEV_MODE=1: the routers of
# entrypoints/serve/dev (cache, rpc, server_info, sleep) and entrypoints/rl/online
DEV_PATHS = {
    "/reset_prefix_cache",
    "/reset_mm_cache",
    "/reset_encoder_cache",
    "/collective_rpc",
    "/server_info",
    "/sleep",
    "/wake_up",
    "/is_sleeping",
    "/release_kv_cache_memory",
    "/pause",
    "/resume",
    "/is_paused",
    "/abort_requests",
    "/init_weight_transfer_engine",
    "/shutdown_weight_transfer_engine",
    "/start_weight_update",
    "/start_draft_weight_update",
    "/update_weights",
    "/finish_weight_update",
    "/update_weight_version",
    "/weight_info",
    "/weight_checker",
    "/get_world_size",
}


def openapi_routes() -> list[tuple[str, str]]:
    """(method, path) of every operation in vLLM 0.32's /openapi.json."""
    paths: dict[str, dict[str, Any]] = json.loads(OPENAPI.read_text())["paths"]
    return [(method.upper(), path) for path, item in paths.items() for method in item]


ROUTES = openapi_routes()


@pytest.fixture(scope="module")
def dev_replica() -> Iterator[FakeVLLM]:
    with FakeVLLM(dev_mode=True) as started:
        yield started


@pytest.fixture(scope="module")
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM() as started:
        yield started


def _ask(replica: FakeVLLM, method: str, path: str) -> httpx.Response:
    """`method` `path` with an empty JSON object for a body; a stored response's id for
    ``{response_id}``."""
    if "{response_id}" in path:
        body = {"model": "fake-model", "input": "hello"}
        created = httpx.post(f"{replica.url}/v1/responses", json=body, timeout=10).json()
        path = path.replace("{response_id}", created["id"])
    content: dict[str, Any] | None = {} if method == "POST" else None
    return httpx.request(method, replica.url + path, json=content, timeout=10)


def _routed(response: httpx.Response) -> bool:
    """Whether a route took the request (it may still refuse the body)."""
    unrouted = response.status_code in (404, 405) and response.json().get("detail") in (
        "Not Found",
        "Method Not Allowed",
    )
    return not unrouted


def test_the_committed_route_list_holds_the_dev_routes() -> None:
    assert {path for _, path in ROUTES} >= DEV_PATHS


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_in_dev_mode_every_route_of_vllms_openapi_answers(
    dev_replica: FakeVLLM, method: str, path: str
) -> None:
    response = _ask(dev_replica, method, path)
    assert _routed(response), response.text
    assert response.status_code < 500


@pytest.mark.parametrize(("method", "path"), [r for r in ROUTES if r[1] not in DEV_PATHS])
def test_without_dev_mode_every_other_route_answers(
    replica: FakeVLLM, method: str, path: str
) -> None:
    assert _routed(_ask(replica, method, path))


@pytest.mark.parametrize(("method", "path"), [r for r in ROUTES if r[1] in DEV_PATHS])
def test_without_dev_mode_the_dev_routes_are_not_found(
    replica: FakeVLLM, method: str, path: str
) -> None:
    response = _ask(replica, method, path)
    assert (response.status_code, response.json()) == (404, {"detail": "Not Found"})


def test_an_unknown_path_is_not_found_in_fastapis_shape(dev_replica: FakeVLLM) -> None:
    response = httpx.post(f"{dev_replica.url}/v1/embeddings", json={})
    assert (response.status_code, response.json()) == (404, {"detail": "Not Found"})


def test_a_known_path_with_another_method_is_405(dev_replica: FakeVLLM) -> None:
    response = httpx.get(f"{dev_replica.url}/v1/completions")
    assert (response.status_code, response.json()) == (405, {"detail": "Method Not Allowed"})
    assert response.headers["allow"] == "POST"


def test_a_get_route_takes_no_head_as_fastapi_serves_it(dev_replica: FakeVLLM) -> None:
    assert httpx.head(f"{dev_replica.url}/health").status_code == 405


@pytest.mark.parametrize(
    ("body", "api"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "chat.completion"),
        ({"prompt": "hi"}, "text_completion"),
    ],
)
def test_sagemaker_invocations_answer_as_the_api_the_body_is_for(
    replica: FakeVLLM, body: dict[str, Any], api: str
) -> None:
    response = httpx.post(f"{replica.url}/invocations", json=body, timeout=10)
    assert response.json()["object"] == api


def test_a_json_route_refuses_another_media_type_as_vllm_does(replica: FakeVLLM) -> None:
    response = httpx.post(f"{replica.url}/v1/completions", content=b'{"prompt": "hi"}')
    assert response.status_code == 400
    assert "Only 'application/json' is allowed" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/responses", {"model": "fake-model", "input": "hi", "tools": 5}),
        ("/v1/messages", {"model": "fake-model", "max_tokens": 5, "messages": 5}),
        ("/v1/completions", {"model": "fake-model", "prompt": [1 << 64] * 40}),
        ("/v1/completions", {"model": "fake-model", "prompt": [5, -1], "stream": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "NaN"}]}),
        ("/tokenize", {"messages": [{"role": "user", "content": 5}]}),
        ("/v1/chat/completions", {"messages": ["hi"], "stream": True}),
    ],
)
def test_a_body_vllm_would_not_validate_is_answered_400_not_a_crash(
    replica: FakeVLLM, path: str, body: dict[str, Any]
) -> None:
    content = json.dumps(body).replace('"NaN"', "NaN")  # as JavaScript and Python write it
    response = httpx.post(
        f"{replica.url}{path}",
        content=content,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 400
    assert "does not validate" in response.json()["error"]["message"]
