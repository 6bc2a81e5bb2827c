"""The gateway's Prometheus exposition: per tenant its requests, prompt tokens and cached
prompt tokens, streamed answers included (the gateway asks the engine for the usage chunk
and passes it on only to a client that asked); for an operator also the routing stage's
decisions by outcome, its tokenizations and whether each replica answered; a tenant sees
its own numbers and nothing else."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from openai import OpenAI, omit
from openai.types.chat import ChatCompletionChunk, ChatCompletionStreamOptionsParam
from prefixkit.engine_adapter import Deployment, Tenants, Topology, deploy
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.engine_adapter.serving.router import PreciseRoute
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

from ..metrics_samples import Samples, by_label, samples_of, scraped

SECRET = "gateway-metrics-test-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET, {"key-ops": "ops"})
ACME = {"authorization": "Bearer key-acme"}
OPERATOR = {"authorization": "Bearer key-ops"}
SYSTEM = "You answer questions about Nimbus Storage's buckets and their regions. " * 12


@dataclass
class Served:
    deployment: Deployment
    replicas: list[FakeVLLM]

    @property
    def url(self) -> str:
        return self.deployment.url

    def client(self, key: str = "key-acme") -> OpenAI:
        return OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0)


@contextlib.contextmanager
def _serving(replicas: int) -> Iterator[Served]:
    fakes = [FakeVLLM(kv_events=True).start() for _ in range(replicas)]
    topology = Topology(replicas=replicas, router="precise", port=free_port())
    try:
        with deploy([f.endpoint for f in fakes], topology, tenants=TENANTS) as running:
            yield Served(running, fakes)
    finally:
        for fake in fakes:
            fake.__exit__(None, None, None)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """Two fake replicas behind the gateway and the precise router, shared by the module."""
    with _serving(2) as running:
        yield running


def _samples(served: Served, key: dict[str, str]) -> Samples:
    return scraped(served.url, key)


def _tenant(samples: Samples, tenant: str) -> dict[str, float]:
    return {
        name: samples[(f"prefixkit_tenant_{name}_total", (("tenant", tenant),))]
        for name in ("requests", "prompt_tokens", "cached_tokens")
    }


def _decisions(samples: Samples) -> dict[str, float]:
    return by_label(samples, "prefixkit_router_decisions_total", "outcome")


def _chat(
    served: Served, question: str, options: ChatCompletionStreamOptionsParam | None = None
) -> list[ChatCompletionChunk]:
    """The chunks of a streamed chat answer, through the official client."""
    stream = served.client().chat.completions.create(
        model="fake-model",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        max_tokens=4,
        stream=True,
        stream_options=omit if options is None else options,
    )
    return list(stream)


# streams


def test_a_streamed_chat_request_counts_its_prompt_and_cached_tokens(served: Served) -> None:
    _chat(served, "Where are my buckets?")
    before = _tenant(_samples(served, OPERATOR), "acme")
    chunks = _chat(served, "Where are my buckets kept?")
    after = _tenant(_samples(served, OPERATOR), "acme")
    sent = next(
        json.loads(r.generations[-1].body)
        for r in served.replicas
        if r.generations and b"kept?" in r.generations[-1].body
    )
    assert sent["stream_options"] == {"include_usage": True}
    assert chunks
    grew = {name: after[name] - before[name] for name in after}
    assert grew["requests"] == 1
    assert grew["prompt_tokens"] > grew["cached_tokens"] > 0


def test_a_client_that_did_not_ask_for_usage_gets_no_usage_chunk(served: Served) -> None:
    chunks = _chat(served, "How are buckets billed?")
    assert chunks and all(chunk.choices and chunk.usage is None for chunk in chunks)


def test_a_client_that_asked_for_usage_gets_the_usage_chunk_once(served: Served) -> None:
    chunks = _chat(served, "How are buckets billed?", {"include_usage": True})
    usages = [chunk.usage for chunk in chunks if chunk.usage is not None]
    assert len(usages) == 1 and chunks[-1].usage is usages[0]
    assert usages[0].prompt_tokens > 0


def test_a_streamed_completion_counts_its_tokens_and_hides_the_usage_chunk(
    served: Served,
) -> None:
    prompt = SYSTEM + "A completion about regions."
    before = _tenant(_samples(served, OPERATOR), "acme")
    stream = served.client().completions.create(
        model="fake-model", prompt=prompt, max_tokens=4, stream=True
    )
    chunks = list(stream)
    after = _tenant(_samples(served, OPERATOR), "acme")
    assert chunks and all(chunk.choices and chunk.usage is None for chunk in chunks)
    assert after["requests"] - before["requests"] == 1
    assert after["prompt_tokens"] - before["prompt_tokens"] == len(
        served.replicas[0].tokenizer(prompt)
    )


def test_a_clients_other_stream_options_are_kept_and_continuous_usage_stays_off(
    served: Served,
) -> None:
    """``continuous_usage_stats`` is vLLM's (usage in every chunk, with include_usage only)."""
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Options kept?"}],
        "stream": True,
        "stream_options": {"continuous_usage_stats": True},
    }
    with httpx.stream(
        "POST", served.url + "/v1/chat/completions", json=body, headers=ACME, timeout=10
    ) as answer:
        assert answer.status_code == 200
        assert b'"usage":{' not in answer.read()
    sent = next(
        json.loads(r.generations[-1].body)
        for r in served.replicas
        if r.generations and b"Options kept?" in r.generations[-1].body
    )
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": False}


# the operator's view


def test_an_operator_sees_the_routers_decisions_by_outcome(served: Served) -> None:
    question = "A question asked twice for the router's decisions. " * 4
    before = _decisions(_samples(served, OPERATOR))
    for _ in range(2):
        served.client().completions.create(model="fake-model", prompt=SYSTEM + question)
    pinned = httpx.post(
        served.url + "/v1/completions",
        json={"model": "fake-model", "prompt": "pinned", "max_tokens": 2},
        headers={**OPERATOR, "x-prefixkit-replica": "1", "x-prefixkit-tenant": "acme"},
        timeout=10,
    )
    assert pinned.status_code == 200
    after = _decisions(_samples(served, OPERATOR))
    grew = {outcome: after[outcome] - before.get(outcome, 0) for outcome in after}
    assert set(after) == {"prefix", "load", "pinned", "replaced", "smg"}
    assert grew["pinned"] == 1 and grew["prefix"] >= 1
    assert sum(grew.values()) == 3


def test_an_operator_sees_each_request_the_router_asked_a_replica_to_tokenize(
    served: Served,
) -> None:
    """The fake replicas name no model folder: the router asks a replica for every prompt."""
    before = _samples(served, OPERATOR)
    served.client().completions.create(model="fake-model", prompt="tokenized by a replica")
    after = _samples(served, OPERATOR)
    fallbacks = ("prefixkit_router_tokenize_fallbacks_total", ())
    here = ("prefixkit_router_tokenized_here_total", ())
    assert after[fallbacks] - before[fallbacks] == 1
    assert after[here] == before[here] == 0


def test_a_replica_that_answers_is_up() -> None:
    with _serving(2) as running:
        samples = _samples(running, OPERATOR)
        assert samples[("prefixkit_replica_up", (("replica", "0"),))] == 1
        assert samples[("prefixkit_replica_up", (("replica", "1"),))] == 1
        running.replicas[1].stop()
        samples = _samples(running, OPERATOR)
    assert samples[("prefixkit_replica_up", (("replica", "0"),))] == 1
    assert samples[("prefixkit_replica_up", (("replica", "1"),))] == 0


# what a tenant sees


def test_a_tenant_sees_only_its_own_counters(served: Served) -> None:
    _chat(served, "Anything for acme?")
    httpx.post(
        served.url + "/v1/completions",
        json={"model": "fake-model", "prompt": "globex's request", "max_tokens": 2},
        headers={"authorization": "Bearer key-globex"},
        timeout=10,
    )
    samples = _samples(served, ACME)
    assert {name for name, _ in samples} == {
        "prefixkit_tenant_requests_total",
        "prefixkit_tenant_prompt_tokens_total",
        "prefixkit_tenant_cached_tokens_total",
    }
    assert {labels for _, labels in samples} == {(("tenant", "acme"),)}


def test_a_request_placed_again_after_its_replica_refused_counts_as_replaced() -> None:
    """The router polls health once a minute here: it still takes the stopped replica for
    healthy when a request is placed on it, and places the request again."""
    fakes = [FakeVLLM().start() for _ in range(2)]
    settings = RouterSettings(
        replica_urls=[fake.url for fake in fakes],
        kv_endpoints=[None, None],
        health_interval_s=60.0,
    )
    app = serving_app(PreciseRoute(RouterState(settings)), TENANTS)
    try:
        with served_in_thread(app, "127.0.0.1", free_port()) as url:
            fakes[1].stop()
            for number in range(2):  # equal loads: the two go to each replica in turn
                answer = httpx.post(
                    url + "/v1/completions",
                    json={"model": "fake-model", "prompt": f"question {number}", "max_tokens": 2},
                    headers=ACME,
                    timeout=10,
                )
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-prefixkit-replica"] == "0"
            text = httpx.get(url + "/metrics", headers=OPERATOR, timeout=10).text
    finally:
        for fake in fakes:
            fake.__exit__(None, None, None)
    decisions = _decisions(samples_of(text))
    assert decisions["replaced"] == 1
    assert decisions["load"] == 2
