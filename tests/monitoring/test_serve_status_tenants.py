"""`prefixkit serve status` shows each tenant's requests and hit rate, read from the
gateway's ``/metrics`` with an operator's key (over ``--interval`` seconds: a difference of
counters)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest
from prefixkit.cli.serve_status import TenantCounts, tenant_counts, tenants_table
from prefixkit.engine_adapter import Tenants, Topology, deploy
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from rich.console import Console

TENANTS = Tenants(
    {"key-acme": "acme", "key-globex": "globex"},
    "status-test-secret-0123456789",
    {"key-ops": "ops"},
)
PROMPT = "Nimbus Storage keeps your buckets in three regions and bills by the hour. " * 8


@contextlib.contextmanager
def _gateway() -> Iterator[tuple[str, FakeVLLM]]:
    with FakeVLLM() as fake:
        topology = Topology(replicas=1, port=free_port())
        with deploy([fake.endpoint], topology, tenants=TENANTS) as running:
            yield running.url, fake


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, FakeVLLM]]:
    """One fake replica behind the gateway; acme sent the same prompt twice."""
    with _gateway() as (url, fake):
        for _ in range(2):
            answer = httpx.post(
                url + "/v1/completions",
                json={"model": "fake-model", "prompt": PROMPT, "max_tokens": 2},
                headers={"authorization": "Bearer key-acme"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
        yield url, fake


def _render(table: object) -> str:
    console = Console(record=True, width=120)
    console.print(table)
    return console.export_text()


def test_an_operator_reads_every_tenants_counts(gateway: tuple[str, FakeVLLM]) -> None:
    url, fake = gateway
    prompt = len(fake.tokenizer(PROMPT))
    counts = tenant_counts(url, "key-ops")
    assert isinstance(counts, dict)
    assert counts["globex"] == TenantCounts(0, 0, 0)
    acme = counts["acme"]
    assert (acme.requests, acme.prompt_tokens) == (2, 2 * prompt)
    assert 0 < acme.cached_tokens < prompt


def test_the_table_gives_each_tenants_hit_rate(gateway: tuple[str, FakeVLLM]) -> None:
    url, _ = gateway
    counts = tenant_counts(url, "key-ops")
    assert isinstance(counts, dict)
    acme = counts["acme"]
    text = _render(tenants_table(counts, {}, "since the gateway started"))
    assert f"{acme.cached_tokens / acme.prompt_tokens:.1%}" in text
    assert "globex" in text and "tenants, since the gateway started" in text


def test_over_an_interval_the_table_shows_the_difference_of_counters() -> None:
    now = {"acme": TenantCounts(10, 1000, 900)}
    earlier = {"acme": TenantCounts(8, 800, 800)}
    text = _render(tenants_table(now, earlier, "over 10 s"))
    assert "50.0%" in text  # 100 cached of the 200 prompt tokens since


def test_without_an_operators_key_it_says_how_to_give_one(
    gateway: tuple[str, FakeVLLM],
) -> None:
    line = tenant_counts(gateway[0], None)
    assert isinstance(line, str) and "--tenants FILE" in line


def test_a_tenants_key_reads_only_its_own_counts(gateway: tuple[str, FakeVLLM]) -> None:
    counts = tenant_counts(gateway[0], "key-globex")
    assert isinstance(counts, dict) and set(counts) == {"globex"}
