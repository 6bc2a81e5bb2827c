"""The gateway decides on the raw request target, and the relay sends the path it decided on:
a target an HTTP client would normalise into a generation route is refused before any
routing, and generation routes the gateway does not salt never reach the engine."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from .conftest import ACME, GLOBEX, PROMPT, SALTS, Served
from .raw_http import raw_request

BODY = json.dumps(
    {"model": "fake-model", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4}
).encode()
JSON = [("Content-Type", "application/json")]


@pytest.mark.parametrize(
    "target",
    [
        b"/x/../v1/chat/completions",
        b"/x/%2e%2e/v1/chat/completions",
        b"/x/%2E%2E/v1/chat/completions",
        b"//x/v1/chat/completions",
        b"///v1/chat/completions",
        b"/./v1/chat/completions",
        b"/v1/chat/completions/.",
        b"/v1/chat/completions/",
        b"/v1/chat%2Fcompletions",
        b"/v1/chat/completion%73",
        b"/v1//chat/completions",
        b"http://engine/v1/chat/completions",
    ],
)
def test_a_target_that_is_not_in_canonical_form_is_400_and_reaches_no_engine(
    served: Served, target: bytes
) -> None:
    mark = served.mark()
    answer = raw_request(served.url, "POST", target, [*ACME.items(), *JSON], BODY)
    assert answer.status == 400
    assert json.loads(answer.body)["error"]["type"] == "invalid_request_error"
    assert served.since(mark) == []


@pytest.mark.parametrize(
    "path", ["/v1/chat/completions/batch", "/invocations", "/generative_scoring", "/v1/systemone"]
)
def test_a_generation_route_the_gateway_does_not_salt_is_404_for_a_tenant(
    served: Served, path: str
) -> None:
    mark = served.mark()
    response = httpx.post(
        served.url + path, content=BODY, headers={**ACME, "content-type": "application/json"}
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert served.since(mark) == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_a_generation_route_under_another_method_is_404(served: Served, method: str) -> None:
    mark = served.mark()
    response = httpx.request(method, served.url + "/v1/chat/completions", headers=ACME)
    assert response.status_code == 404
    assert served.since(mark) == []


def test_a_query_string_never_reaches_the_engine(served: Served) -> None:
    mark = served.mark()
    response = httpx.post(
        served.url + "/v1/chat/completions?cache_salt=mine&x=1",
        content=BODY,
        headers={**ACME, "content-type": "application/json"},
    )
    assert response.status_code == 200
    (reached,) = served.since(mark)
    assert (reached.query, reached.cache_salt) == ("", SALTS["acme"])


def test_only_the_headers_an_engine_needs_are_forwarded(served: Served) -> None:
    mark = served.mark()
    headers = {
        **ACME,
        "content-type": "application/json",
        "x-data-parallel-rank": "1",
        "x-prefixkit-replica": "0",
        "x-prefixkit-tenant": "globex",
        "x-request-id": "req-7",
    }
    assert httpx.post(served.url + "/v1/chat/completions", content=BODY, headers=headers).is_success
    (reached,) = served.since(mark)
    names = {name for name, _ in reached.headers}
    # vLLM names a request after x-request-id and aborts every request of that name when
    # one's client hangs up: a tenant naming its request after another's could cancel it
    assert not names & {"x-request-id", "x-data-parallel-rank"}
    assert not names & {"x-prefixkit-replica", "x-prefixkit-tenant"}
    assert not names & {"authorization", "x-api-key"}
    assert reached.cache_salt == SALTS["acme"]


def test_anthropic_messages_run_under_the_tenants_salt_through_the_official_client(
    served: Served,
) -> None:
    def ask(key: str, question: str) -> anthropic.types.Message:
        client = anthropic.Anthropic(base_url=served.url, api_key=key, max_retries=0)
        return client.messages.create(
            model="fake-model",
            max_tokens=4,
            system=PROMPT,
            messages=[{"role": "user", "content": question}],
        )

    first = ask("key-acme", "Which regions?")
    again = ask("key-acme", "How is it billed?")
    other = ask("key-globex", "Which regions?")
    assert first.usage.cache_read_input_tokens == 0
    assert (again.usage.cache_read_input_tokens or 0) > 0
    assert other.usage.cache_read_input_tokens == 0
    salts = [r.cache_salt for r in served.replicas[0].generations if r.path == "/v1/messages"]
    assert salts[-3:] == [SALTS["acme"], SALTS["acme"], SALTS["globex"]]


def test_a_tenant_cannot_reach_another_tenants_blocks_by_any_target(served: Served) -> None:
    secret = {"role": "user", "content": "globex's own document. " * 40}
    body = json.dumps({"model": "fake-model", "messages": [secret], "max_tokens": 4}).encode()
    headers = {**GLOBEX, "content-type": "application/json"}
    httpx.post(served.url + "/v1/chat/completions", content=body, headers=headers)
    for target in (b"/x/../v1/chat/completions", b"/v1/chat/completions"):
        answer = raw_request(served.url, "POST", target, [*ACME.items(), *JSON], body)
        if answer.status == 200:
            usage = json.loads(answer.body)["usage"]
            assert (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0


def test_fields_that_steer_the_engine_beyond_the_request_are_removed(served: Served) -> None:
    steering = {
        "kv_transfer_params": {"remote_block_ids": [1, 2]},
        "ec_transfer_params": {"x": 1},
        "request_id": "another-tenants-request",
        "priority": -100,
        "prefixkit_replica": 0,
    }
    body = {"model": "fake-model", "prompt": "hello", "max_tokens": 1, **steering}
    mark = served.mark()
    assert httpx.post(served.url + "/v1/completions", json=body, headers=ACME).is_success
    (reached,) = served.since(mark)
    sent = json.loads(reached.body)
    assert not set(steering) & set(sent)
    assert sent["prompt"] == "hello"


def test_one_tenants_media_uuid_never_names_another_tenants_item(served: Served) -> None:
    # vLLM keys its multimodal processor and encoder caches by a part's uuid, not salted:
    # each tenant's uuid reaches the engine under its own salt
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {
        "model": "fake-model",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": [{**part, "uuid": "shared-id"}]}],
    }
    reached = {}
    for tenant, key in (("acme", ACME), ("globex", GLOBEX)):
        mark = served.mark()
        httpx.post(served.url + "/v1/chat/completions", json=body, headers=key)
        (request,) = served.since(mark)
        reached[tenant] = json.loads(request.body)["messages"][0]["content"][0]["uuid"]
    assert reached == {tenant: f"{SALTS[tenant]}:shared-id" for tenant in ("acme", "globex")}
