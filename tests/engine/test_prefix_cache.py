"""Prefix caching on the real engine: a repeated shared prefix is served from cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from prefixkit.engine_adapter.engine.metrics import fetch_cache_metrics

from tests.engine_calls import cached_tokens, complete

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine


def test_repeated_shared_prefix_reports_cached_tokens(
    engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prefix = make_document(500, "repeated-prefix")
    first = complete(engine.base_url, engine.model, prefix + "\nQuestion: what is in the garden?")
    second = complete(engine.base_url, engine.model, prefix + "\nQuestion: who crossed the bridge?")
    assert cached_tokens(first) == 0
    assert cached_tokens(second) >= 10 * engine.block_size
    assert cached_tokens(second) % engine.block_size == 0


def test_repeated_shared_prefix_raises_the_hit_counter(
    engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prefix = make_document(500, "rising-counter")
    complete(engine.base_url, engine.model, prefix + "\nFirst question?")
    before = fetch_cache_metrics(engine.base_url)
    second = complete(engine.base_url, engine.model, prefix + "\nSecond question?")
    interval = fetch_cache_metrics(engine.base_url).since(before)
    assert interval.hit_tokens >= cached_tokens(second) > 0
    assert interval.hit_rate > 0.5


def test_session_engine_reports_its_cache_configuration(engine: EmbeddedEngine) -> None:
    metrics = fetch_cache_metrics(engine.base_url)
    assert metrics.block_size == 32
    assert metrics.hash_algo == "sha256_cbor"
    assert metrics.prefix_caching is True
    assert metrics.num_blocks is not None and metrics.num_blocks > 0
