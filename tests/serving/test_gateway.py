"""The tenant gateway in front of the real engine (`deploy` with tenants, one replica):
per-tenant salts, 401, streaming relay, idle connections kept."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
from prefixkit.engine_adapter import ReplicaEndpoint, Tenants, Topology, deploy
from prefixkit.sdk import tenant_salt

from tests.engine_calls import cached_tokens, complete

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine, IdleGap

pytestmark = pytest.mark.engine

GATEWAY_PORT = 18010
SECRET = "gateway-test-secret-0123456789"
TENANTS = {"key-acme": "acme", "key-globex": "globex"}
ACME = {"Authorization": "Bearer key-acme"}
GLOBEX = {"x-api-key": "key-globex"}


@pytest.fixture(scope="module")
def gateway(engine: EmbeddedEngine) -> Iterator[str]:
    endpoint = ReplicaEndpoint.of(engine.config)
    topology = Topology(port=GATEWAY_PORT)
    with deploy([endpoint], topology, tenants=Tenants(TENANTS, SECRET)) as deployment:
        yield deployment.url


def test_a_tenants_repeated_prefix_hits(
    gateway: str, engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prompt = make_document(400, "gateway-own-repeat")
    complete(gateway, engine.model, prompt + "\nOne?", headers=ACME)
    again = complete(gateway, engine.model, prompt + "\nTwo?", headers=ACME)
    assert cached_tokens(again) > 0


def test_another_tenant_with_the_same_prompt_does_not_hit(
    gateway: str, engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prompt = make_document(400, "gateway-isolation")
    complete(gateway, engine.model, prompt, headers=ACME)
    other = complete(gateway, engine.model, prompt, headers=GLOBEX)
    assert cached_tokens(other) == 0


def test_a_forged_cache_salt_is_replaced_by_the_tenants_own(
    gateway: str, engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prompt = make_document(400, "gateway-forged-salt")
    acme_salt = tenant_salt("acme", SECRET)
    complete(gateway, engine.model, prompt, headers=ACME, cache_salt="forged-by-acme")
    # the gateway stored acme's blocks under acme's real salt, not the forged one ...
    direct = complete(engine.base_url, engine.model, prompt, cache_salt=acme_salt)
    assert cached_tokens(direct) > 0
    # ... and globex cannot reach them by forging acme's salt
    forged = complete(gateway, engine.model, prompt, headers=GLOBEX, cache_salt=acme_salt)
    assert cached_tokens(forged) == 0


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"x-api-key": "key-acme-but-longer"}]
)
def test_unknown_or_missing_key_gets_401(
    gateway: str, engine: EmbeddedEngine, headers: dict[str, str]
) -> None:
    response = httpx.post(
        f"{gateway}/v1/completions",
        json={"model": engine.model, "prompt": "hi", "max_tokens": 1},
        headers=headers,
    )
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "invalid_api_key"


def test_health_needs_no_key(gateway: str) -> None:
    assert httpx.get(f"{gateway}/health").status_code == 200


def test_streaming_is_relayed_as_it_is_generated(gateway: str, engine: EmbeddedEngine) -> None:
    body = {
        "model": engine.model,
        "messages": [{"role": "user", "content": "Tell a long story about a lighthouse."}],
        "max_tokens": 48,
        "min_tokens": 48,
        "temperature": 0,
        "stream": True,
    }
    arrivals = []
    started = time.perf_counter()
    with httpx.stream(
        "POST", f"{gateway}/v1/chat/completions", json=body, headers=ACME, timeout=120
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.perf_counter() - started)
    assert len(arrivals) >= 48
    # a buffering proxy would deliver every event at the end, all at once
    assert arrivals[0] < arrivals[-1] / 2, (arrivals[0], arrivals[-1])


def test_a_client_connection_idle_past_the_clients_own_expiry_is_still_served(
    gateway: str, statuses_across_idle_gap: IdleGap
) -> None:
    # httpx (and the SDKs on it) reuse an idle connection for up to 5 s; a
    # server closing it at the same moment resets the next request
    assert statuses_across_idle_gap(gateway, "/health", 6.0) == (200, 200)
