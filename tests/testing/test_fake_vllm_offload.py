"""The fake vLLM replica with a host-memory tier, as vLLM's CPU offloading keeps one: the
blocks its GPU cache evicts move there and are published with medium ``CPU``, and a
prompt's cached run continues over them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prefixkit.sdk import event_block_hashes
from prefixkit.testing.fake_vllm import FakeVLLM

from tests.testing.conftest import TOKENS, cached, complete, published


@pytest.fixture
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM(kv_events=True, capacity_blocks=8, offload_blocks=6) as started:
        yield started


def _hashes(salt: str) -> list[int]:
    return event_block_hashes(TOKENS, 32, algo="sha256_cbor", cache_salt=salt)


def test_its_own_cache_publishes_medium_gpu(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    events = published(replica.kv_events_endpoint, lambda: complete(replica, TOKENS, "a"))
    assert [(e["type"], e["medium"]) for e in events] == [("BlockStored", "GPU")]


def test_blocks_evicted_from_gpu_are_published_stored_on_cpu(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    complete(replica, TOKENS, "first")  # 5 of 8 blocks
    events = published(replica.kv_events_endpoint, lambda: complete(replica, TOKENS, "second"))
    evicted = _hashes("first")[::-1][:2]
    removed_from_gpu = [
        h
        for e in events
        if e["type"] == "BlockRemoved" and e["medium"] == "GPU"
        for h in e["block_hashes"]
    ]
    stored_on_cpu = [
        h
        for e in events
        if e["type"] == "BlockStored" and e["medium"] == "CPU"
        for h in e["block_hashes"]
    ]
    assert removed_from_gpu == evicted
    assert sorted(stored_on_cpu) == sorted(evicted)


def test_the_offloaded_tier_publishes_what_it_evicts_in_turn(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    complete(replica, TOKENS, "first")
    complete(replica, TOKENS, "second")  # 2 of "first" offloaded
    complete(replica, TOKENS, "third")  # 3 more of "first", then 2 of "second": 7 > 6
    events = published(replica.kv_events_endpoint, lambda: complete(replica, TOKENS, "fourth"))
    dropped = [
        h
        for e in events
        if e["type"] == "BlockRemoved" and e["medium"] == "CPU"
        for h in e["block_hashes"]
    ]
    assert dropped and set(dropped) <= set(_hashes("first")) | set(_hashes("second"))


def test_a_prompt_offloaded_to_cpu_is_still_a_cache_hit() -> None:
    with FakeVLLM(capacity_blocks=8, offload_blocks=16) as replica:
        complete(replica, TOKENS, "first")
        complete(replica, TOKENS, "second")
        complete(replica, TOKENS, "third")  # "first" has left the GPU cache entirely
        assert replica.cache.cached_run(_hashes("first")) == 0
        assert cached(complete(replica, TOKENS, "first")) == 5 * 32


def test_without_offloading_an_evicted_prompt_misses() -> None:
    with FakeVLLM(capacity_blocks=8) as replica:
        complete(replica, TOKENS, "first")
        complete(replica, TOKENS, "second")
        complete(replica, TOKENS, "third")
        assert cached(complete(replica, TOKENS, "first")) == 0
