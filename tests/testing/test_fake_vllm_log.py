"""The fake vLLM replica logs every request it receives, before routing, as it came over the
wire: what a test of a gateway checks reached "the engine"."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.testing import ReceivedRequest
from prefixkit.testing.fake_vllm import FakeVLLM


@pytest.fixture(scope="module")
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM() as started:
        yield started


@pytest.fixture(scope="module")
def client(replica: FakeVLLM) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=replica.url) as started:
        yield started


def _last(replica: FakeVLLM) -> ReceivedRequest:
    return replica.requests[-1]


def test_the_log_keeps_the_raw_path_the_routed_path_the_query_and_the_body(
    replica: FakeVLLM,
) -> None:
    body = b'{"model": "fake-model", "prompt": "hi", "cache_salt": "s1"}'
    headers = {"content-type": "application/json", "x-tenant": "acme"}
    response = httpx.post(
        f"{replica.url}/v1/comp%6Cetions?trace=%41", content=body, headers=headers
    )
    assert response.status_code == 200
    received = _last(replica)
    assert (received.method, received.path) == ("POST", "/v1/completions")
    assert (received.raw_path, received.query) == (b"/v1/comp%6Cetions", "trace=%41")
    assert received.body == body
    assert ("x-tenant", "acme") in received.headers
    assert received.cache_salt == "s1"


def test_unknown_paths_and_health_checks_are_logged_too(replica: FakeVLLM) -> None:
    before = len(replica.requests)
    httpx.get(f"{replica.url}/health")
    httpx.delete(f"{replica.url}/no/such/route")
    logged = [(r.method, r.path) for r in replica.requests[before:]]
    assert logged == [("GET", "/health"), ("DELETE", "/no/such/route")]


def test_a_body_that_is_no_json_object_has_no_salt(replica: FakeVLLM) -> None:
    httpx.post(f"{replica.url}/v1/completions", content=b'["cache_salt"]')
    assert _last(replica).cache_salt is None


def test_cache_salts_are_those_of_the_generation_requests_only(replica: FakeVLLM) -> None:
    before = len(replica.cache_salts)
    body = {"model": "fake-model", "prompt": "hi", "cache_salt": "gen"}
    httpx.post(f"{replica.url}/tokenize", json={**body, "cache_salt": "not-a-generation"})
    httpx.post(f"{replica.url}/v1/completions", json=body)
    assert replica.cache_salts[before:] == ["gen"]


def test_requests_from_many_threads_are_all_logged(replica: FakeVLLM, client: httpx.Client) -> None:
    before = len(replica.requests)

    def send(number: int) -> None:
        client.post("/tokenize", json={"prompt": str(number)})

    threads = [threading.Thread(target=send, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bodies = sorted(json.loads(r.body)["prompt"] for r in replica.requests[before:])
    assert bodies == sorted(str(n) for n in range(20))


@given(body=st.binary(max_size=4096))
def test_any_body_is_logged_byte_for_byte(
    replica: FakeVLLM, client: httpx.Client, body: bytes
) -> None:
    client.post("/v1/chat/completions", content=body)
    assert _last(replica).body == body
