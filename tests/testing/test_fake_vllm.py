"""The fake vLLM replica behaves as vLLM does where prefixkit relies on it: cache hits in
whole blocks under a salt, KV events with vLLM's block hashes and fields, the metrics
prefixkit reads, and answers the official client parses; against the real engine, the
same prompt gives the same block hashes and event fields."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prefixkit.engine_adapter.engine.metrics import parse_cache_metrics
from prefixkit.sdk import event_block_hashes
from prefixkit.testing.fake_vllm import FakeVLLM, PrefixCache

from tests.testing.conftest import TOKENS, cached, complete, published

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine


@pytest.fixture
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM(kv_events=True, capacity_blocks=8) as started:
        yield started


def test_a_repeated_prompt_hits_every_full_block_but_the_last(replica: FakeVLLM) -> None:
    assert cached(complete(replica, TOKENS, "tenant-a")) == 0
    assert cached(complete(replica, TOKENS, "tenant-a")) == 5 * 32
    exact = TOKENS[: 4 * 32]  # a prompt of whole blocks: its last block is recomputed
    assert cached(complete(replica, exact, "tenant-a")) == 3 * 32


def test_another_salt_never_hits(replica: FakeVLLM) -> None:
    complete(replica, TOKENS, "tenant-a")
    assert cached(complete(replica, TOKENS, "tenant-b")) == 0
    assert cached(complete(replica, TOKENS)) == 0


def test_a_request_sent_during_anothers_prefill_reads_the_blocks_that_one_allocated() -> None:
    # two requests at once: the second finds the first's blocks cached, as vLLM's
    # scheduler caches the blocks it allocates before computing them
    with FakeVLLM(prefill_s_per_block=0.05) as slow, ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: cached(complete(slow, TOKENS, "a")), range(2)))
    assert sorted(answers) == [0, 5 * 32]


def test_stored_blocks_are_published_with_vllms_hashes(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    events = published(replica.kv_events_endpoint, lambda: complete(replica, TOKENS, "salt"))
    (stored,) = [e for e in events if e["type"] == "BlockStored"]
    assert stored["block_hashes"] == event_block_hashes(
        TOKENS, 32, algo="sha256_cbor", cache_salt="salt"
    )
    assert stored["token_ids"] == TOKENS[: 5 * 32]


def test_evicted_blocks_are_published_tail_first(replica: FakeVLLM) -> None:
    assert replica.kv_events_endpoint is not None
    complete(replica, TOKENS, "first")  # 5 of 8 blocks
    events = published(replica.kv_events_endpoint, lambda: complete(replica, TOKENS, "second"))
    (removed,) = [e for e in events if e["type"] == "BlockRemoved"]
    first = event_block_hashes(TOKENS, 32, algo="sha256_cbor", cache_salt="first")
    assert removed["block_hashes"] == first[::-1][:2]


def test_the_cache_evicts_a_requests_tail_before_its_head() -> None:
    cache = PrefixCache(3)
    assert cache.admit([1, 2, 3]) == ([1, 2, 3], [])
    assert cache.admit([4]) == ([4], [3])
    assert cache.cached_run([1, 2, 3]) == 2


def test_metrics_give_the_capacity_and_counters_prefixkit_reads(replica: FakeVLLM) -> None:
    complete(replica, TOKENS)
    complete(replica, TOKENS)
    metrics = parse_cache_metrics(httpx.get(f"{replica.url}/metrics").text)
    assert (metrics.block_size, metrics.num_blocks, metrics.hash_algo) == (32, 8, "sha256_cbor")
    assert (metrics.queried_tokens, metrics.hit_tokens) == (2 * len(TOKENS), 5 * 32)


def test_the_official_client_reads_its_streams_and_usage(replica: FakeVLLM) -> None:
    client = openai.OpenAI(base_url=f"{replica.url}/v1", api_key="none", max_retries=0)
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello there " * 40}]
    chunks = list(
        client.chat.completions.create(
            model="fake-model",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok" * 8
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
    events = list(client.responses.create(model="fake-model", input="Hello " * 40, stream=True))
    assert events[-1].type == "response.completed"
    with client.responses.stream(model="fake-model", input="Hello " * 40) as stream:
        assert stream.get_final_response().output_text == "ok" * 8
    response = client.responses.create(model="fake-model", input="Hello " * 40)
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens > 0


def test_a_model_it_does_not_serve_is_a_404(replica: FakeVLLM) -> None:
    body = {"model": "other", "prompt": "hi"}
    assert httpx.post(f"{replica.url}/v1/completions", json=body).status_code == 404


@pytest.mark.engine
def test_the_same_prompt_gives_the_real_engines_block_hashes_and_event_fields(
    engine: EmbeddedEngine, replica: FakeVLLM
) -> None:
    tokens = [200 + (i * 11) % 3000 for i in range(3 * 32 + 5)]  # new to the engine

    def send(url: str) -> None:
        body = {"model": engine.model, "prompt": tokens, "max_tokens": 1, "cache_salt": "s"}
        httpx.post(f"{url}/v1/completions", json=body, timeout=120).raise_for_status()

    real = published(engine.kv_events_endpoint, lambda: send(engine.base_url))
    replica.model = engine.model
    fake = published(replica.kv_events_endpoint or "", lambda: send(replica.url))
    real_stored = [e for e in real if e["type"] == "BlockStored"]
    fake_stored = [e for e in fake if e["type"] == "BlockStored"]
    assert [h for e in real_stored for h in e["block_hashes"]] == fake_stored[0]["block_hashes"]
    required = {"type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "medium"}
    assert required <= set(real_stored[0]) and required <= set(fake_stored[0])
