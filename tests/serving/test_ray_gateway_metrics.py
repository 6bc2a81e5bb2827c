"""The Ray backend's gateway middleware counts a tenant's streamed requests as the local
serving app does: it asks the engine for the usage chunk and passes it on only to a client
that asked (no Ray needed: the middleware runs here in front of a fake replica's app)."""

from __future__ import annotations

import json

from openai import OpenAI
from prefixkit.engine_adapter import Tenants
from prefixkit.engine_adapter.ray.gateway import TenantGateway
from prefixkit.testing.fake_vllm import FakeVLLM
from starlette.testclient import TestClient

from ..metrics_samples import samples_of

TENANTS = Tenants({"key-acme": "acme"}, "ray-gateway-metrics-secret-0123", {"key-ops": "ops"})
ACME_LABEL = (("tenant", "acme"),)
PROMPT = "Nimbus Storage keeps your buckets in three regions and bills by the hour. " * 8


def _tokens(http: TestClient) -> dict[str, float]:
    text = http.get("/metrics", headers={"authorization": "Bearer key-ops"}).text
    return {name: v for (name, labels), v in samples_of(text).items() if labels == ACME_LABEL}


def test_a_streamed_request_through_the_ray_gateway_counts_and_hides_the_usage_chunk() -> None:
    fake = FakeVLLM()
    with TestClient(TenantGateway(fake.app(), lambda: TENANTS)) as http:
        client = OpenAI(base_url=str(http.base_url) + "/v1", api_key="key-acme", http_client=http)
        for _ in range(2):
            chunks = list(
                client.completions.create(
                    model="fake-model", prompt=PROMPT, max_tokens=2, stream=True
                )
            )
        counted = _tokens(http)
    assert chunks and all(chunk.usage is None for chunk in chunks)
    assert json.loads(fake.generations[-1].body)["stream_options"] == {"include_usage": True}
    assert counted["prefixkit_tenant_requests_total"] == 2
    assert counted["prefixkit_tenant_prompt_tokens_total"] == 2 * len(fake.tokenizer(PROMPT))
    assert 0 < counted["prefixkit_tenant_cached_tokens_total"] < len(fake.tokenizer(PROMPT))
