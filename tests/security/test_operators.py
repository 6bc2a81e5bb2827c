"""Operators and tenants: what each key may see and steer. A tenant sees its own numbers and
nothing of the engines or of other tenants; what it says about placement or identity (the
gateway's own headers, the router's body field) changes nothing. An operator sees everything,
pins a request to a replica and runs a request under a tenant's salt. A tenant's requests in
flight are bounded without holding back another tenant's."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
from prefixkit.engine_adapter import Limits
from prometheus_client.parser import text_string_to_metric_families

from .conftest import ACME, GLOBEX, OPERATOR, SALTS, Served, serving
from .openai_errors import openai_error
from .raw_http import raw_request

TENANT_METRICS = ("requests", "prompt_tokens", "cached_tokens")


def _send(
    served: Served,
    key: dict[str, str],
    prompt: str,
    headers: dict[str, str] | None = None,
    **fields: object,
) -> httpx.Response:
    body = {"model": "fake-model", "prompt": prompt, "max_tokens": 2, **fields}
    response = httpx.post(
        served.url + "/v1/completions", json=body, headers={**key, **(headers or {})}, timeout=10
    )
    return response


def _metrics(served: Served, key: dict[str, str]) -> str:
    response = httpx.get(served.url + "/metrics", headers=key, timeout=10)
    assert response.status_code == 200, response.text
    return response.text


def _tenant_numbers(text: str) -> dict[str, dict[str, float]]:
    """tenant -> {requests, prompt_tokens, cached_tokens} from a /metrics exposition."""
    numbers: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removeprefix("prefixkit_tenant_").removesuffix("_total")
            if sample.name.startswith("prefixkit_tenant_") and name in TENANT_METRICS:
                numbers.setdefault(sample.labels["tenant"], {})[name] = sample.value
    return numbers


def _usage(response: httpx.Response) -> tuple[int, int]:
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


# what a tenant's /metrics shows


def test_a_tenants_metrics_count_its_requests_prompt_tokens_and_cached_tokens(
    served: Served,
) -> None:
    prompt = "acme's onboarding guide, counted in its own metrics. " * 20
    before = _tenant_numbers(_metrics(served, ACME))["acme"]
    first = _usage(_send(served, ACME, prompt))
    again = _usage(_send(served, ACME, prompt))
    after = _tenant_numbers(_metrics(served, ACME))["acme"]
    assert again[1] > 0 and first[1] == 0
    assert {name: after[name] - before[name] for name in TENANT_METRICS} == {
        "requests": 2,
        "prompt_tokens": first[0] + again[0],
        "cached_tokens": again[1],
    }


def test_a_tenants_metrics_show_no_engine_metric_and_no_other_tenant(served: Served) -> None:
    _send(served, GLOBEX, "globex's own request, never in acme's metrics. " * 10)
    mark = served.mark()
    text = _metrics(served, ACME)
    assert "vllm:" not in text and "replica" not in text
    assert "globex" not in text
    assert set(_tenant_numbers(text)) == {"acme"}
    assert served.since(mark) == []  # answered by the gateway, not scraped


def test_a_tenant_naming_another_tenant_still_sees_only_its_own_metrics(served: Served) -> None:
    text = _metrics(served, {**ACME, "x-prefixkit-tenant": "globex"})
    assert set(_tenant_numbers(text)) == {"acme"}
    assert "globex" not in text


def test_a_tenants_streamed_request_without_usage_counts_as_a_request(served: Served) -> None:
    before = _tenant_numbers(_metrics(served, ACME))["acme"]["requests"]
    body = {"model": "fake-model", "prompt": "a streamed answer. " * 10, "stream": True}
    with httpx.stream(
        "POST", served.url + "/v1/completions", json=body, headers=ACME, timeout=10
    ) as response:
        assert response.status_code == 200
        assert b"[DONE]" in response.read()
    after = _tenant_numbers(_metrics(served, ACME))["acme"]["requests"]
    assert after - before == 1


def test_an_operators_metrics_show_the_engines_and_every_tenant(served: Served) -> None:
    _send(served, ACME, "acme's request, seen by the operator. " * 10)
    _send(served, GLOBEX, "globex's request, seen by the operator. " * 10)
    text = _metrics(served, OPERATOR)
    assert "vllm:prefix_cache_queries_total" in text
    numbers = _tenant_numbers(text)
    assert set(numbers) == {"acme", "globex"}
    assert numbers["acme"]["requests"] > 0 and numbers["globex"]["requests"] > 0


# the router's state


def test_the_router_state_is_404_for_a_tenant(routed: Served) -> None:
    response = httpx.get(routed.url + "/router/state", headers=ACME)
    assert response.status_code == 404
    assert openai_error(response.content)["code"] == "not_found"


def test_the_router_state_is_served_to_an_operator(routed: Served) -> None:
    response = httpx.get(routed.url + "/router/state", headers=OPERATOR)
    assert response.status_code == 200
    assert len(response.json()["healthy"]) == 2


# placement and identity


def test_a_tenants_pins_and_tenant_header_change_nothing(routed: Served) -> None:
    prompt = "acme's contract, placed by the router alone. " * 20
    placed = _send(routed, ACME, prompt)
    replica = int(placed.headers["x-prefixkit-replica"])
    other = 1 - replica
    mark = routed.mark()
    response = _send(
        routed,
        ACME,
        prompt,
        headers={"x-prefixkit-replica": str(other), "x-prefixkit-tenant": "globex"},
        prefixkit_replica=other,
    )
    assert response.headers["x-prefixkit-replica"] == str(replica)
    assert _usage(response)[1] > 0  # its own cache, on the replica the router chose
    (generated,) = [r for r in routed.since(mark) if r.path == "/v1/completions"]
    assert generated in routed.replicas[replica].requests
    assert generated.cache_salt == SALTS["acme"]
    assert "prefixkit_replica" not in json.loads(generated.body)


@pytest.mark.parametrize("pin", [0, 1])
def test_an_operators_pin_is_honoured(routed: Served, pin: int) -> None:
    prompt = f"an operator's warm-up, pinned to replica {pin}. " * 20
    first = _send(routed, OPERATOR, prompt)
    elsewhere = 1 - int(first.headers["x-prefixkit-replica"])
    target = elsewhere if pin == 1 else pin
    mark = routed.mark()
    response = _send(routed, OPERATOR, prompt, headers={"x-prefixkit-replica": str(target)})
    assert response.status_code == 200
    assert response.headers["x-prefixkit-replica"] == str(target)
    (generated,) = [r for r in routed.since(mark) if r.path == "/v1/completions"]
    assert generated in routed.replicas[target].requests


def test_an_operators_pin_reaches_one_replicas_admin_route(routed: Served) -> None:
    mark = routed.mark()
    response = httpx.post(
        routed.url + "/reset_prefix_cache", headers={**OPERATOR, "x-prefixkit-replica": "1"}
    )
    assert response.status_code == 200
    assert [r.path for r in routed.since(mark)] == ["/reset_prefix_cache"]
    assert routed.replicas[1].requests[-1].path == "/reset_prefix_cache"


@pytest.mark.parametrize("deployment", ["served", "routed"])
def test_an_operators_pin_to_a_replica_that_does_not_exist_is_400(
    request: pytest.FixtureRequest, deployment: str
) -> None:
    running: Served = request.getfixturevalue(deployment)
    mark = running.mark()
    pin = str(len(running.replicas))
    response = _send(running, OPERATOR, "pinned nowhere", headers={"x-prefixkit-replica": pin})
    assert response.status_code == 400
    assert openai_error(response.content)["param"] == "x-prefixkit-replica"
    assert [r.path for r in running.since(mark) if r.path == "/v1/completions"] == []


@pytest.mark.parametrize("pin", ["one", "-1", "+1", "1.0", "0x1", "\uff11", "\u0661", ""])
def test_an_operators_pin_that_is_not_a_replica_index_is_400(routed: Served, pin: str) -> None:
    mark = routed.mark()
    body = json.dumps({"model": "fake-model", "prompt": "pinned oddly"}).encode()
    headers = [*OPERATOR.items(), ("Content-Type", "application/json")]
    # as sent on the wire (UTF-8 for the non-ASCII digits), which an HTTP client would refuse
    answer = raw_request(
        routed.url, "POST", b"/v1/completions", [*headers, ("x-prefixkit-replica", pin)], body
    )
    assert answer.status == 400
    assert openai_error(answer.body)["param"] == "x-prefixkit-replica"
    assert routed.since(mark) == []


def test_an_operator_naming_a_tenant_warms_that_tenants_cache(served: Served) -> None:
    prompt = "acme's product catalogue, warmed by an operator. " * 20
    mark = served.mark()
    warmed = _send(served, OPERATOR, prompt, headers={"x-prefixkit-tenant": "acme"})
    assert warmed.status_code == 200
    (generated,) = served.since(mark)
    assert generated.cache_salt == SALTS["acme"]
    assert _usage(_send(served, ACME, prompt))[1] > 0
    assert _usage(_send(served, GLOBEX, prompt))[1] == 0


def test_an_operator_naming_an_unknown_tenant_is_400(served: Served) -> None:
    mark = served.mark()
    response = _send(served, OPERATOR, "for nobody", headers={"x-prefixkit-tenant": "initech"})
    assert response.status_code == 400
    assert openai_error(response.content)["param"] == "x-prefixkit-tenant"
    assert served.since(mark) == []


def test_an_operators_own_request_runs_unsalted_whatever_salt_its_body_carries(
    served: Served,
) -> None:
    mark = served.mark()
    assert _send(served, OPERATOR, "unsalted", cache_salt=SALTS["acme"]).status_code == 200
    (generated,) = served.since(mark)
    assert generated.cache_salt is None


# requests in flight per tenant


@pytest.fixture(scope="module")
def limited() -> Iterator[Served]:
    """One slow replica; a tenant may have two requests in flight."""
    with serving(limits=Limits(max_inflight_per_tenant=2)) as running:
        yield running


@contextlib.contextmanager
def _acme_at_its_limit(limited: Served) -> Iterator[ThreadPoolExecutor]:
    """Two requests of acme held at the replica for a second (checked to succeed)."""
    replica = limited.replicas[0]
    before = len(replica.generations)
    replica.delay_headers_s = 1.0
    try:
        with ThreadPoolExecutor(4) as pool:
            held: list[Future[httpx.Response]] = [
                pool.submit(_send, limited, ACME, f"acme's held request {i}") for i in range(2)
            ]
            deadline = time.monotonic() + 5
            while len(replica.generations) < before + 2:
                assert time.monotonic() < deadline, "acme's requests never reached the replica"
                time.sleep(0.01)
            yield pool
            assert [f.result().status_code for f in held] == [200, 200]
    finally:
        replica.delay_headers_s = 0.0


def test_a_tenant_over_its_inflight_limit_is_429_and_reaches_no_replica(limited: Served) -> None:
    with _acme_at_its_limit(limited):
        mark = limited.mark()
        response = _send(limited, ACME, "one too many")
        assert response.status_code == 429
        assert openai_error(response.content)["code"] == "rate_limit_exceeded"
        assert limited.since(mark) == []


def test_another_tenant_is_served_while_a_tenant_is_at_its_limit(limited: Served) -> None:
    with _acme_at_its_limit(limited) as pool:
        other = pool.submit(_send, limited, GLOBEX, "globex, unaffected")
        assert other.result().status_code == 200


def test_a_tenant_is_served_again_once_its_requests_end(limited: Served) -> None:
    with _acme_at_its_limit(limited):
        assert _send(limited, ACME, "too early").status_code == 429
    assert _send(limited, ACME, "after the others ended").status_code == 200


def _leave_after(served: Served, seconds: float, prompt: str) -> str:
    body = {"model": "fake-model", "prompt": prompt, "max_tokens": 2}
    try:
        httpx.post(served.url + "/v1/completions", json=body, headers=ACME, timeout=seconds)
    except httpx.ReadTimeout:
        return "left"
    return "answered"


def test_a_tenants_requests_whose_clients_left_no_longer_count_against_its_limit(
    limited: Served,
) -> None:
    replica = limited.replicas[0]
    aborted = replica.requests_aborted
    replica.delay_headers_s = 3.0
    try:
        with ThreadPoolExecutor(2) as pool:
            gone = [pool.submit(_leave_after, limited, 0.3, f"left early {i}") for i in range(2)]
            assert [f.result() for f in gone] == ["left", "left"]
        deadline = time.monotonic() + 2
        while replica.requests_aborted < aborted + 2:
            assert time.monotonic() < deadline, "the replica kept the requests of clients gone"
            time.sleep(0.01)
    finally:
        replica.delay_headers_s = 0.0
    assert _send(limited, ACME, "after two clients left").status_code == 200
