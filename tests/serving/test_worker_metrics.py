"""With several router workers, the gateway's counters are the deployment's: each worker
adds to its own row of a shared file, and whichever worker answers ``GET /metrics`` shows
the sum; a restarted worker keeps its row, so no counter goes down."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
from prefixkit.engine_adapter import Tenants, Topology, deploy
from prefixkit.engine_adapter.serving.metrics import SharedCounters
from prefixkit.engine_adapter.serving.workers import WORKER_HEADER
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from prometheus_client.parser import text_string_to_metric_families

TENANTS = Tenants(
    {"key-a": "a", "key-b": "b"}, "worker-metrics-test-secret-0123456789", {"key-ops": "ops"}
)
KEY = ("tenant", "a", "requests")


def test_a_value_is_the_sum_of_every_workers_row(tmp_path: Path) -> None:
    path = tmp_path / "counters"
    SharedCounters.create(path, 2, ["a", "b"])
    first, second = (SharedCounters(path, 2, worker, ["a", "b"]) for worker in (0, 1))
    first.add(KEY, 3)
    second.add(KEY, 4)
    second.add(("decision", "prefix"))
    assert first.value(KEY) == second.value(KEY) == 7
    assert first.value(("decision", "prefix")) == 1
    assert first.value(("tenant", "b", "requests")) == 0
    first.close()
    second.close()


def test_a_restarted_worker_keeps_adding_to_its_row(tmp_path: Path) -> None:
    path = tmp_path / "counters"
    SharedCounters.create(path, 2, ["a"])
    dead = SharedCounters(path, 2, 1, ["a"])
    dead.add(KEY, 5)
    dead.close()
    restarted = SharedCounters(path, 2, 1, ["a"])
    restarted.add(KEY, 1)
    assert restarted.value(KEY) == 6
    restarted.close()


@contextlib.contextmanager
def _two_workers() -> Iterator[str]:
    fakes = [FakeVLLM(kv_events=True) for _ in range(2)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        topology = Topology(replicas=2, router="precise", port=free_port(), router_workers=2)
        running = stack.enter_context(
            deploy([fake.endpoint for fake in fakes], topology, tenants=TENANTS)
        )
        yield running.url


def _counted(text: str) -> tuple[float, float]:
    """Tenant a's requests and the router's decisions in an exposition."""
    requests = decisions = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "prefixkit_tenant_requests_total" and sample.labels == {
                "tenant": "a"
            }:
                requests = sample.value
            if sample.name == "prefixkit_router_decisions_total":
                decisions += sample.value
    return requests, decisions


def test_every_worker_shows_the_requests_of_both_workers() -> None:
    with _two_workers() as url:
        served_by = set()
        for number in range(24):  # a connection each: the kernel spreads them over workers
            answer = httpx.post(
                url + "/v1/completions",
                json={"model": "fake-model", "prompt": f"question {number}", "max_tokens": 2},
                headers={"authorization": "Bearer key-a"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            served_by.add(answer.headers[WORKER_HEADER])
        shown: dict[str, tuple[float, float]] = {}
        for _ in range(40):
            if len(shown) == 2:
                break
            metrics = httpx.get(
                url + "/metrics", headers={"authorization": "Bearer key-ops"}, timeout=30
            )
            assert metrics.status_code == 200
            shown[metrics.headers[WORKER_HEADER]] = _counted(metrics.text)
    assert served_by == {"0", "1"}
    assert shown == {"0": (24, 24), "1": (24, 24)}
