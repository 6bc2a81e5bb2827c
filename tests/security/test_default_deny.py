"""Default deny: a tenant reaches the engine through a short list of routes and nothing else.
Every other route vLLM 0.32 serves (from the committed snapshot of its ``/openapi.json``,
never from the gateway's own table), the development and admin routes of a dev-mode
replica among them, FastAPI's documentation routes and the routes of other vLLM builds, is
404 for a tenant and never reaches the replica; an operator reaches each of them."""

from __future__ import annotations

import json

import httpx
import pytest

from .conftest import ACME, GLOBEX, OPERATOR, Served
from .engine_routes import VLLM_0_32, engine_routes
from .openai_errors import openai_error
from .raw_http import raw_request

# what a tenant may ask for (the specification, written out: not the gateway's table)
TENANT_MAY_USE = frozenset(
    {
        ("POST", "/v1/completions"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
        ("POST", "/tokenize"),
        ("POST", "/detokenize"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
        ("GET", "/health"),
        ("GET", "/metrics"),
    }
)
ENGINE_ROUTES = sorted(
    {
        (route.method, route.template.replace("{response_id}", "resp_fake1"))
        for route in engine_routes(VLLM_0_32)
    }
    - TENANT_MAY_USE
)
# routes outside the snapshot: FastAPI's documentation (its /openapi.json below), runtime LoRA loading, pooling and
# audio routes of other vLLM builds, the gateway's own operator route
OTHER_ROUTES = [
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    ("POST", "/v1/load_lora_adapter"),
    ("POST", "/v1/unload_lora_adapter"),
    ("POST", "/v1/embeddings"),
    ("POST", "/pooling"),
    ("POST", "/classify"),
    ("POST", "/score"),
    ("POST", "/v1/score"),
    ("POST", "/rerank"),
    ("POST", "/v1/rerank"),
    ("POST", "/v2/rerank"),
    ("POST", "/v1/audio/transcriptions"),
    ("POST", "/v1/audio/translations"),
    ("GET", "/router/state"),
]
# the routes a tenant may use, under every other method
OTHER_METHODS = sorted(
    (method, path)
    for _, path in TENANT_MAY_USE
    for method in ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS")
    if (method, path) not in TENANT_MAY_USE
)
# development routes that empty a replica's prefix cache, with the query that makes them
CACHE_EMPTYING = [
    "/reset_prefix_cache?reset_running_requests=true",
    "/sleep?level=1",
    "/pause?clear_cache=true",
    "/release_kv_cache_memory",
]
# a body with what each admin route reads (and a prompt, for a route that would generate)
ADMIN_BODY = json.dumps(
    {
        "model": "fake-model",
        "prompt": "hello",
        "messages": [{"role": "user", "content": "hello"}],
        "method": "noop",
        "request_ids": ["cmpl-1"],
        "new_data_parallel_size": 2,
        "lora_name": "stolen",
        "lora_path": "/tmp/adapter",
    }
).encode()
JSON = [("Content-Type", "application/json")]


def _name(route: tuple[str, str]) -> str:
    return " ".join(route)


def _ask(served: Served, key: dict[str, str], method: str, target: str) -> tuple[int | None, bytes]:
    headers = [*key.items(), *JSON]
    answer = raw_request(served.url, method, target.encode(), headers, ADMIN_BODY)
    return answer.status, answer.body


def _hit_tokens(served: Served, key: dict[str, str], text: str) -> int:
    body = {"model": "fake-model", "prompt": text, "max_tokens": 2}
    response = httpx.post(served.url + "/v1/completions", json=body, headers=key, timeout=10)
    assert response.status_code == 200, response.text
    cached: int = response.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    return cached


@pytest.mark.parametrize("route", ENGINE_ROUTES + OTHER_ROUTES + OTHER_METHODS, ids=_name)
def test_a_route_a_tenant_may_not_use_is_404_and_reaches_no_replica(
    served: Served, route: tuple[str, str]
) -> None:
    method, path = route
    mark = served.mark()
    status, body = _ask(served, ACME, method, path)
    assert status == 404
    if method != "HEAD":
        assert openai_error(body)["code"] == "not_found"
    assert served.since(mark) == []


def test_the_engines_openapi_document_is_refused_before_any_route_is_looked_up(
    served: Served,
) -> None:
    # a path with a dot is not in canonical form: refused before the route table is read
    mark = served.mark()
    status, body = _ask(served, ACME, "GET", "/openapi.json")
    assert status == 400
    assert openai_error(body)["code"] == "invalid_request_error"
    assert served.since(mark) == []


@pytest.mark.parametrize("route", ENGINE_ROUTES, ids=_name)
def test_an_operator_reaches_every_engine_route(served: Served, route: tuple[str, str]) -> None:
    method, path = route
    mark = served.mark()
    _ask(served, OPERATOR, method, path)
    assert [(r.method, r.path) for r in served.since(mark)] == [route]


@pytest.mark.parametrize("target", CACHE_EMPTYING)
def test_a_tenants_attempt_to_empty_the_cache_leaves_another_tenants_prefix_cached(
    served: Served, target: str
) -> None:
    prompt = f"globex's support handbook, kept warm ({target}). " * 20
    _hit_tokens(served, GLOBEX, prompt)
    status, _ = _ask(served, ACME, "POST", target)
    assert status == 404
    assert _hit_tokens(served, GLOBEX, prompt) > 0


def test_an_operators_reset_reaches_the_replica_and_empties_its_cache(served: Served) -> None:
    prompt = "globex's support handbook, reset by an operator. " * 20
    _hit_tokens(served, GLOBEX, prompt)
    mark = served.mark()
    status, _ = _ask(served, OPERATOR, "POST", "/reset_prefix_cache")
    assert status == 200
    assert [r.path for r in served.since(mark)] == ["/reset_prefix_cache"]
    assert _hit_tokens(served, GLOBEX, prompt) == 0


@pytest.mark.parametrize("suffix", ["", "/cancel"])
def test_another_tenants_stored_response_is_out_of_reach(served: Served, suffix: str) -> None:
    body = {"model": "fake-model", "input": "globex's quarterly numbers", "max_output_tokens": 2}
    created = httpx.post(served.url + "/v1/responses", json=body, headers=GLOBEX, timeout=10)
    assert created.status_code == 200, created.text
    path = f"/v1/responses/{created.json()['id']}{suffix}"
    mark = served.mark()
    response = httpx.request("POST" if suffix else "GET", served.url + path, headers=ACME)
    assert response.status_code == 404
    assert openai_error(response.content)["code"] == "not_found"
    assert served.since(mark) == []
