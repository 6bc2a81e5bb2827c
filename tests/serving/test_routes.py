"""Every route the gateway serves works through every router: one replica (no router),
real SMG, and the precise router, each deployed by `deploy` in front of fake replicas
that publish KV events. Generation requests stream through and reach the engine under
the tenant's own salt, whatever salt the client sent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from prefixkit.engine_adapter import Deployment, Tenants, Topology, deploy
from prefixkit.engine_adapter.engine.replicas import port_is_free
from prefixkit.sdk import tenant_salt
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

from ..metrics_samples import by_label, samples_of

SECRET = "routes-test-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme"}, SECRET, {"key-ops": "ops"})
KEY = {"Authorization": "Bearer key-acme"}
OPERATOR = {"Authorization": "Bearer key-ops"}
PROMPT = "Nimbus Storage keeps your buckets in three regions. " * 20
GENERATION: dict[str, dict[str, object]] = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": PROMPT}]},
    "/v1/completions": {"prompt": PROMPT},
    "/v1/responses": {"instructions": "Answer briefly.", "input": PROMPT},
}


def _free_port_pair() -> int:
    """A free port whose next port is free too (SMG listens on both)."""
    while not port_is_free("127.0.0.1", (port := free_port()) + 1):
        pass
    return port


@pytest.fixture(params=["one replica", "smg", "precise"], scope="module")
def deployment(request: pytest.FixtureRequest) -> Iterator[tuple[Deployment, list[FakeVLLM]]]:
    count = 1 if request.param == "one replica" else 2
    replicas = [FakeVLLM(kv_events=True).start() for _ in range(count)]
    topology = Topology(
        replicas=count,
        router="precise" if request.param == "precise" else "smg",
        port=free_port(),
        router_port=_free_port_pair(),
    )
    try:
        with deploy([r.endpoint for r in replicas], topology, tenants=TENANTS) as running:
            yield running, replicas
    finally:
        for replica in replicas:
            replica.__exit__(None, None, None)


@pytest.mark.parametrize("path", sorted(GENERATION))
def test_a_generation_request_is_answered_under_the_tenants_own_salt(
    deployment: tuple[Deployment, list[FakeVLLM]], path: str
) -> None:
    running, replicas = deployment
    before = [len(r.generations) for r in replicas]
    body = {"model": "fake-model", "cache_salt": "forged-by-the-client", **GENERATION[path]}
    response = httpx.post(running.url + path, json=body, headers=KEY, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]
    (served,) = [r for r, n in zip(replicas, before, strict=True) if len(r.generations) == n + 1]
    assert served.generations[-1].path == path
    assert served.cache_salts[-1] == tenant_salt("acme", SECRET)


@pytest.mark.parametrize("path", sorted(GENERATION))
def test_a_streamed_generation_arrives_event_by_event(
    deployment: tuple[Deployment, list[FakeVLLM]], path: str
) -> None:
    running, _ = deployment
    body = {"model": "fake-model", "stream": True, **GENERATION[path]}
    with httpx.stream("POST", running.url + path, json=body, headers=KEY, timeout=30) as response:
        assert response.status_code == 200
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert len(events) >= 8  # the fake sends 8 pieces, each its own event
    if path == "/v1/responses":
        assert json.loads(events[-1][6:])["type"] == "response.completed"
    else:
        assert events[-1] == "data: [DONE]"


def test_the_model_list_names_the_served_model(
    deployment: tuple[Deployment, list[FakeVLLM]],
) -> None:
    running, _ = deployment
    response = httpx.get(running.url + "/v1/models", headers=KEY)
    assert response.status_code == 200
    assert [model["id"] for model in response.json()["data"]] == ["fake-model"]


def test_tokenize_answers_the_replicas_token_ids(
    deployment: tuple[Deployment, list[FakeVLLM]],
) -> None:
    running, replicas = deployment
    body = {"model": "fake-model", "prompt": PROMPT}
    response = httpx.post(running.url + "/tokenize", json=body, headers=KEY)
    assert response.status_code == 200
    assert response.json()["tokens"] == replicas[0].token_ids(body, "/tokenize")


def test_health_needs_no_key(deployment: tuple[Deployment, list[FakeVLLM]]) -> None:
    running, _ = deployment
    assert httpx.get(running.url + "/health").status_code == 200


def test_an_operator_sees_every_replicas_cache_counters_labelled_by_replica(
    deployment: tuple[Deployment, list[FakeVLLM]],
) -> None:
    running, replicas = deployment
    response = httpx.get(running.url + "/metrics", headers=OPERATOR)
    assert response.status_code == 200
    queries = by_label(samples_of(response.text), "vllm:prefix_cache_queries_total", "replica")
    assert queries == {str(i): float(r.queried_tokens) for i, r in enumerate(replicas)}


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", p) for p in sorted(GENERATION)]
    + [("GET", "/v1/models"), ("POST", "/tokenize"), ("GET", "/metrics")],
)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}])
def test_every_route_but_health_needs_a_known_key(
    deployment: tuple[Deployment, list[FakeVLLM]],
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    running, _ = deployment
    response = httpx.request(method, running.url + path, json={}, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "invalid_api_key"
