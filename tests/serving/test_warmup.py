"""Prompt roll-out warm-up: the tokens warmed are the ones the application's requests start
with, each tenant's warm request carries the salt the gateway gives that tenant, and what
got cached is reported; a bad target, tenant or prompt is named. Fake vLLM replicas
(real HTTP servers with vLLM's block hashing and salting) stand in for the engine here;
tests/engine/test_warmup_engine.py checks the same on real vLLM."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from prefixkit.engine_adapter import GatewayConfigError, Tenants, Topology, WarmupError, deploy
from prefixkit.engine_adapter.serving.warmup import (
    WarmPrefix,
    WarmTarget,
    pinned_replica_targets,
    plan_warmup,
    registered_prompt,
    replica_targets,
    send_warmup,
    warm,
    warm_prefix,
)
from prefixkit.sdk import HFTokenizer, Prompt, Segment, render_vllm, tenant_salt
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

SECRET = "warm-up-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET, {"key-ops": "ops"})
SYSTEM = (
    "You answer questions about storage buckets, invoices and quotas. Quote the price list, "
    "show the arithmetic, and never invent a limit. "
) * 6
PREFIX = WarmPrefix("support@v4", tuple(range(1000, 1097)), prefix_tokens=96, block_size=32)


@pytest.fixture
def fake_replicas() -> Iterator[list[FakeVLLM]]:
    with FakeVLLM(kv_events=True) as first, FakeVLLM(kv_events=True) as second:
        yield [first, second]


def test_the_warmed_tokens_are_the_start_of_a_real_token_id_request(
    hf_tokenizer: HFTokenizer,
) -> None:
    prefix = warm_prefix("support@v4", registered_prompt(Segment.static(SYSTEM)), hf_tokenizer, 32)
    real = render_vllm(
        Prompt(system=[Segment.static(SYSTEM)], messages=[Segment.dynamic("How much is egress?")]),
        model="m",
        tokenizer=hf_tokenizer,
        block_size=32,
        token_ids=True,
    )
    assert prefix.prefix_tokens % 32 == 0
    assert len(prefix.token_ids) == prefix.prefix_tokens + 1
    assert real["prompt"][: prefix.prefix_tokens] == list(prefix.token_ids[: prefix.prefix_tokens])


def test_the_warmed_tokens_are_the_start_of_a_real_chat_request(
    hf_tokenizer: HFTokenizer,
) -> None:
    prefix = warm_prefix("support@v4", registered_prompt(Segment.static(SYSTEM)), hf_tokenizer, 32)
    real = render_vllm(
        Prompt(
            system=[Segment.static(SYSTEM)], messages=[Segment.dynamic("Can I restore an archive?")]
        ),
        model="m",
        tokenizer=hf_tokenizer,
        block_size=32,
    )
    sent = hf_tokenizer.chat_token_ids(real["messages"])  # what vLLM's chat endpoint computes
    assert sent[: prefix.prefix_tokens] == list(prefix.token_ids[: prefix.prefix_tokens])


def test_a_static_prefix_shorter_than_a_block_is_refused(hf_tokenizer: HFTokenizer) -> None:
    with pytest.raises(WarmupError, match=r"greeting@v1: its static prefix is \d+ tokens"):
        warm_prefix(
            "greeting@v1",
            registered_prompt(Segment.static("Hi.")),
            hf_tokenizer,
            256,
            max_pad_tokens=8,  # as an application rendering with render_vllm(max_pad_tokens=8)
        )


def test_a_replica_target_gets_each_tenants_salt_as_the_gateway_sets_it() -> None:
    plan = plan_warmup([PREFIX], [WarmTarget("replica 0", "http://r0")], model="m", tenants=TENANTS)
    salts = {r.tenant: json.loads(r.body)["cache_salt"] for r in plan}
    assert salts == {t: tenant_salt(t, SECRET) for t in ("acme", "globex")}
    assert all("authorization" not in r.headers for r in plan)


def test_a_gateway_target_gets_an_operators_key_naming_the_tenant_and_no_salt() -> None:
    target = WarmTarget("router", "http://gw", gateway=True)
    (request,) = plan_warmup([PREFIX], [target], model="m", tenants=TENANTS, tenant_ids=["acme"])
    assert request.headers["authorization"] == "Bearer key-ops"
    assert request.headers["x-prefixkit-tenant"] == "acme"
    assert "cache_salt" not in json.loads(request.body)


def test_a_pinned_ray_replica_target_carries_its_replica_index_and_an_operators_key() -> None:
    targets = pinned_replica_targets("http://ray:8000", 2)
    plan = plan_warmup([PREFIX], targets, model="m", tenants=TENANTS, tenant_ids=["acme"])
    assert [(r.headers["x-prefixkit-replica"], r.headers["authorization"]) for r in plan] == [
        ("0", "Bearer key-ops"),
        ("1", "Bearer key-ops"),
    ]


def test_a_gateway_target_without_an_operator_key_is_refused() -> None:
    tenants = Tenants({"key-acme": "acme"}, SECRET)
    with pytest.raises(GatewayConfigError, match=r"needs an operator's API key .*\[operators\]"):
        plan_warmup(
            [PREFIX], [WarmTarget("gateway", "http://gw", gateway=True)], model="m", tenants=tenants
        )


def test_the_warm_request_generates_one_token_from_the_prefix_tokens() -> None:
    (request,) = plan_warmup([PREFIX], [WarmTarget("replica 0", "http://r0")], model="m")
    body = json.loads(request.body)
    assert body == {
        "model": "m",
        "prompt": list(PREFIX.token_ids),
        "max_tokens": 1,
        "temperature": 0,
    }


def test_an_unknown_tenant_is_named_with_the_known_ones() -> None:
    with pytest.raises(GatewayConfigError, match=r"unknown tenant initech: .* has acme, globex"):
        plan_warmup(
            [PREFIX],
            replica_targets(["http://r0"]),
            model="m",
            tenants=TENANTS,
            tenant_ids=["initech"],
        )


def test_tenants_without_a_tenants_config_are_refused() -> None:
    with pytest.raises(GatewayConfigError, match="without a tenants config"):
        plan_warmup([PREFIX], replica_targets(["http://r0"]), model="m", tenant_ids=["acme"])


def test_a_gateway_target_without_a_tenants_config_is_refused() -> None:
    with pytest.raises(GatewayConfigError, match="needs an operator's API key"):
        plan_warmup([PREFIX], [WarmTarget("gateway", "http://gw", gateway=True)], model="m")


def test_every_replica_caches_the_prefix_under_each_tenants_salt(
    fake_replicas: list[FakeVLLM],
) -> None:
    targets = replica_targets([replica.url for replica in fake_replicas])
    report = warm([PREFIX], targets, model="fake-model", tenants=TENANTS)
    assert [(r.target, r.tenant, r.cached_before, r.cached_after) for r in report.results] == [
        ("replica 0", "acme", 0, 96),
        ("replica 0", "globex", 0, 96),
        ("replica 1", "acme", 0, 96),
        ("replica 1", "globex", 0, 96),
    ]
    assert report.all_warmed
    for replica in fake_replicas:
        assert set(replica.cache_salts) == {tenant_salt(t, SECRET) for t in ("acme", "globex")}


def test_warming_again_reports_the_prefix_already_cached(fake_replicas: list[FakeVLLM]) -> None:
    targets = replica_targets([fake_replicas[0].url])
    warm([PREFIX], targets, model="fake-model", tenants=TENANTS, tenant_ids=["acme"])
    again = warm([PREFIX], targets, model="fake-model", tenants=TENANTS, tenant_ids=["acme"])
    assert [r.cached_before for r in again.results] == [96]


def test_a_request_through_the_gateway_finds_what_was_warmed_on_the_replica_directly(
    fake_replicas: list[FakeVLLM],
) -> None:
    replica = fake_replicas[0]
    warm([PREFIX], replica_targets([replica.url]), model="fake-model", tenants=TENANTS)
    topology = Topology(replicas=1, port=free_port())
    with deploy([replica.endpoint], topology, tenants=TENANTS) as deployment:
        body = {"model": "fake-model", "prompt": [*PREFIX.token_ids, 7, 8, 9], "max_tokens": 1}
        for key, expected in (("key-acme", 96), ("key-globex", 96)):
            answer = httpx.post(
                f"{deployment.url}/v1/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
                timeout=30,
            ).json()
            assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == expected


def test_warming_through_the_router_caches_the_prefix_where_the_router_sends_it(
    fake_replicas: list[FakeVLLM],
) -> None:
    topology = Topology(replicas=2, router="precise", port=free_port())
    endpoints = [replica.endpoint for replica in fake_replicas]
    with deploy(endpoints, topology, tenants=TENANTS) as deployment:
        target = WarmTarget("router", deployment.url, gateway=True)
        report = warm([PREFIX], [target], model="fake-model", tenants=TENANTS)
    assert [(r.tenant, r.cached_after) for r in report.results] == [("acme", 96), ("globex", 96)]


def test_an_unreachable_replica_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(WarmupError, match=rf"replica 0 at {url} is unreachable .*serve status"):
        warm([PREFIX], replica_targets([url]), model="m")


def test_an_error_answer_is_reported_with_its_status(fake_replicas: list[FakeVLLM]) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"message": "The model `m` does not exist."}})

    plan = plan_warmup([PREFIX], replica_targets(["http://r0"]), model="m")
    with (
        httpx.Client(transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(WarmupError, match=r"support@v4 with HTTP 404: .*does not exist"),
    ):
        send_warmup(plan, client=client)


def test_an_error_answer_carries_the_targets_url_and_status() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"message": "loading"}})

    plan = plan_warmup([PREFIX], replica_targets(["http://r0"]), model="m")
    with (
        httpx.Client(transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(WarmupError) as caught,
    ):
        send_warmup(plan, client=client)
    assert (caught.value.url, caught.value.status, caught.value.prompt) == (
        "http://r0",
        503,
        "support@v4",
    )


def test_a_server_without_cached_token_details_leaves_the_result_unknown() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"usage": {"prompt_tokens": 97}})

    plan = plan_warmup([PREFIX], replica_targets(["http://r0"]), model="m")
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        (result,) = send_warmup(plan, client=client).results
    assert (result.cached_after, result.warmed) == (None, False)


def test_the_replicas_are_warmed_at_the_same_time() -> None:
    both_waiting = threading.Barrier(2, timeout=10)  # breaks if the replicas go one by one

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("cache_salt") == tenant_salt("acme", SECRET):
            both_waiting.wait()
        details = {"cached_tokens": 0}
        return httpx.Response(200, json={"usage": {"prompt_tokens_details": details}})

    plan = plan_warmup(
        [PREFIX], replica_targets(["http://r0", "http://r1"]), model="m", tenants=TENANTS
    )
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        report = send_warmup(plan, client=client)
    assert [(r.target, r.tenant) for r in report.results] == [
        ("replica 0", "acme"),
        ("replica 0", "globex"),
        ("replica 1", "acme"),
        ("replica 1", "globex"),
    ]
