"""The Ray backend's ``GET /metrics``: per-tenant counts and the prefixkit router's
decisions, kept in the application's counts actor, so every ingress replica's counts are
in whichever replica answers."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from prefixkit.engine_adapter import RayDeployment
from prefixkit.engine_adapter.ray.counters import actor_name

from ..engine_calls import cached_tokens
from ..metrics_samples import Samples, by_label, scraped
from .conftest import KEYS, OPERATOR_KEY, ray_call
from .test_ray_backend import ask

pytestmark = pytest.mark.ray


def _samples(deployment: RayDeployment, key: str) -> Samples:
    return scraped(deployment.url, {"Authorization": f"Bearer {key}"})


def _grown(before: Samples, after: Samples) -> Samples:
    return {name: value - before.get(name, 0.0) for name, value in after.items()}


def _settled(deployment: RayDeployment, before: Samples, expected: Samples) -> Samples:
    """The growth of the operator's samples since `before`, once it includes `expected`
    (the gateway counts a request as its answer ends: a moment after the client has it)."""
    deadline = time.monotonic() + 20
    while True:
        grown = _grown(before, _samples(deployment, OPERATOR_KEY))
        if all(grown.get(name) == value for name, value in expected.items()):
            return grown
        assert time.monotonic() < deadline, (grown, expected)
        time.sleep(0.2)


def _tenant(name: str, tenant: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, (("tenant", tenant),))


def test_an_operator_sees_each_tenants_tokens_and_the_routers_decisions(
    ray_deployment: RayDeployment, make_document: Callable[[int, str], str]
) -> None:
    before = _samples(ray_deployment, OPERATOR_KEY)
    prompt = make_document(400, "ray-metrics")
    answers = [ask(ray_deployment, "acme", prompt + f"\nQuestion {i}?") for i in range(3)]
    prompt_tokens = sum(a["usage"]["prompt_tokens"] for a in answers)
    cached = sum(cached_tokens(a) for a in answers)
    assert cached > 0
    grown = _settled(
        ray_deployment,
        before,
        {
            _tenant("prefixkit_tenant_requests_total", "acme"): 3,
            _tenant("prefixkit_tenant_prompt_tokens_total", "acme"): prompt_tokens,
            _tenant("prefixkit_tenant_cached_tokens_total", "acme"): cached,
            _tenant("prefixkit_tenant_requests_total", "globex"): 0,
            ("prefixkit_router_tokenized_here_total", ()): 3,
            ("prefixkit_router_tokenize_fallbacks_total", ()): 0,
        },
    )
    decisions = by_label(grown, "prefixkit_router_decisions_total", "outcome")
    assert sum(decisions.values()) == 3
    assert {o for o, n in decisions.items() if n} <= {"load", "prefix"}
    assert decisions["prefix"] >= 1  # a repeat, placed by its prefix


def test_a_tenant_sees_its_own_counts_only(ray_deployment: RayDeployment) -> None:
    names = {name for name, _ in _samples(ray_deployment, KEYS["globex"])}
    labels = {labels for _, labels in _samples(ray_deployment, KEYS["globex"])}
    assert labels == {(("tenant", "globex"),)}
    assert not any(name.startswith("prefixkit_router_") for name in names)


def test_counts_another_ingress_replica_adds_are_in_the_metrics(
    ray_deployment: RayDeployment,
) -> None:
    """A process other than the ingress replica that answers ``/metrics`` (standing in for
    a second ingress replica) adds to the application's counts actor."""
    before = _samples(ray_deployment, OPERATOR_KEY)
    name = actor_name(ray_deployment.settings.app_name)
    ray_call(
        ray_deployment,
        f"counts = ray.get_actor({name!r}, namespace='prefixkit')\n"
        "ray.get(counts.add.remote(('tenant', 'globex', 'requests'), 5))\n"
        "ray.get(counts.add.remote(('decision', 'pinned'), 2))\n",
    )
    _settled(
        ray_deployment,
        before,
        {
            _tenant("prefixkit_tenant_requests_total", "globex"): 5,
            ("prefixkit_router_decisions_total", (("outcome", "pinned"),)): 2,
        },
    )
