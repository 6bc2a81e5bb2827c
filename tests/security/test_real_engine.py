"""Tenant isolation against the real CPU engine (vLLM 0.32, dev endpoints on): every route the
running engine could run as generation is salted or refused for a tenant, read from its
own ``/openapi.json`` so the next vLLM release cannot open a hole silently; the salted
routes, Anthropic's Messages through the official client among them, give a tenant its own
cache hits and another tenant none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import pytest
from prefixkit.engine_adapter import ReplicaEndpoint, Topology, deploy
from prefixkit.engine_adapter.serving.gateway import Admitted, admit
from prefixkit.engine_adapter.serving.routes import RouteUse

from .conftest import ACME, GLOBEX, TENANTS
from .engine_routes import generation_templates_of

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine

GATEWAY_PORT = 18030


@pytest.fixture(scope="module")
def gateway(engine: EmbeddedEngine) -> Iterator[str]:
    endpoint = ReplicaEndpoint.of(engine.config)
    with deploy([endpoint], Topology(port=GATEWAY_PORT), tenants=TENANTS) as deployment:
        yield deployment.url


def test_every_generation_route_of_the_running_engine_is_salted_or_refused(
    engine: EmbeddedEngine,
) -> None:
    spec = httpx.get(f"{engine.base_url}/openapi.json", timeout=30).json()
    routes = generation_templates_of(spec)
    assert "/v1/chat/completions" in routes and "/reset_prefix_cache" in routes
    for template in routes:
        path = template.replace("{", "").replace("}", "")
        decision = admit("POST", path.encode(), ACME, TENANTS)
        if isinstance(decision, Admitted):
            assert decision.use is RouteUse.SALTED and decision.salt is not None, template


def _ask(url: str, model: str, path: str, headers: dict[str, str], document: str) -> dict[str, Any]:
    bodies: dict[str, dict[str, Any]] = {
        "/v1/completions": {"prompt": document + "\nQ: one?", "max_tokens": 1},
        "/v1/chat/completions": {
            "messages": [{"role": "system", "content": document}, {"role": "user", "content": "?"}],
            "max_tokens": 1,
        },
        "/v1/responses": {"instructions": document, "input": "?", "max_output_tokens": 16},
    }
    response = httpx.post(
        url + path, json={"model": model, **bodies[path]}, headers=headers, timeout=300
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _cached(answer: dict[str, Any]) -> int:
    usage = answer["usage"]
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/v1/responses"])
def test_a_salted_route_hits_a_tenants_own_cache_and_not_anothers(
    gateway: str, engine: EmbeddedEngine, make_document: Callable[[int, str], str], path: str
) -> None:
    document = make_document(300, f"real-engine-isolation-{path}")
    _ask(gateway, engine.model, path, ACME, document)
    assert _cached(_ask(gateway, engine.model, path, ACME, document)) > 0
    assert _cached(_ask(gateway, engine.model, path, GLOBEX, document)) == 0


def test_anthropic_messages_through_the_official_client_hit_only_the_tenants_own_cache(
    gateway: str, engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    document = make_document(300, "real-engine-anthropic-messages")

    def ask(key: str) -> anthropic.types.Message:
        client = anthropic.Anthropic(base_url=gateway, api_key=key, max_retries=0)
        return client.messages.create(
            model=engine.model,
            max_tokens=1,
            system=document,
            messages=[{"role": "user", "content": "Summarise."}],
        )

    ask("key-acme")
    assert (ask("key-acme").usage.cache_read_input_tokens or 0) > 0
    assert (ask("key-globex").usage.cache_read_input_tokens or 0) == 0
