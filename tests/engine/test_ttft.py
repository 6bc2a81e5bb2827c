"""Streaming time to first token: a warm 2,000-token prefix is at least 5x faster than cold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.engine_calls import stream_ttft, token_count

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine


def test_warm_prefix_ttft_is_at_least_5x_lower_than_cold(
    engine: EmbeddedEngine, make_document: Callable[[int, str], str]
) -> None:
    prefix = make_document(1900, "ttft-prefix")
    tokens = token_count(engine.base_url, engine.model, prefix)
    assert 2000 <= tokens <= 2400, f"prefix has {tokens} tokens; adjust the word count"
    cold, cold_cached = stream_ttft(engine.base_url, engine.model, prefix + "\nSummarise it.")
    warm, warm_cached = stream_ttft(engine.base_url, engine.model, prefix + "\nList the places.")
    assert cold_cached == 0
    assert warm_cached >= tokens - 2 * engine.block_size
    assert cold / warm >= 5, f"cold {cold:.3f} s, warm {warm:.3f} s: ratio {cold / warm:.1f}"
