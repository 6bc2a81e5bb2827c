"""The fake vLLM replica's development routes (vLLM's ``VLLM_SERVER_DEV_MODE=1``) act on its
prefix cache as vLLM's do, so a test sees the damage a caller of them could do."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prefixkit.testing.fake_vllm import FakeVLLM

from tests.testing.conftest import TOKENS, cached, complete, published


@pytest.fixture
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM(dev_mode=True, kv_events=True) as started:
        yield started


def test_reset_prefix_cache_drops_every_hit(replica: FakeVLLM) -> None:
    complete(replica, TOKENS, "tenant-a")
    assert cached(complete(replica, TOKENS, "tenant-a")) > 0
    reset = httpx.post(f"{replica.url}/reset_prefix_cache")
    assert (reset.status_code, reset.json()) == (200, {"success": True})
    assert cached(complete(replica, TOKENS, "tenant-a")) == 0


def test_a_reset_is_published_as_all_blocks_cleared(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    complete(replica, TOKENS, "tenant-a")
    events = published(
        replica.kv_events_endpoint, lambda: httpx.post(f"{replica.url}/reset_prefix_cache")
    )
    assert events == [{"type": "AllBlocksCleared"}]


@pytest.mark.parametrize("path", ["/sleep", "/pause", "/release_kv_cache_memory"])
def test_sleep_pause_and_releasing_the_kv_cache_empty_it_too(replica: FakeVLLM, path: str) -> None:
    complete(replica, TOKENS, "tenant-a")
    assert httpx.post(replica.url + path).status_code == 200
    assert cached(complete(replica, TOKENS, "tenant-a")) == 0


def test_a_pause_that_keeps_its_requests_keeps_the_cache(replica: FakeVLLM) -> None:
    complete(replica, TOKENS, "tenant-a")
    httpx.post(f"{replica.url}/pause", params={"mode": "keep"})
    assert httpx.get(f"{replica.url}/is_paused").json() == {"is_paused": True}
    assert cached(complete(replica, TOKENS, "tenant-a")) > 0
