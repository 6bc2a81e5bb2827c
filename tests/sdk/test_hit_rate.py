"""The hit-rate monitor: a rolling hit rate per prompt name and version, and an alert, with
the latest explanation, when it falls below the threshold."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import (
    AnthropicClient,
    CacheMiss,
    CacheStats,
    HitRateAlert,
    HitRateMonitor,
    HitRateWarning,
    MissReason,
    Prompt,
    Segment,
    StaticPrefixGuard,
    UsageError,
)
from prefixkit.testing.providers import MockProvider


def stats(cached: int, total: int = 100) -> CacheStats:
    return CacheStats(cached_tokens=cached, uncached_tokens=total - cached)


def test_the_hit_rate_is_token_weighted_over_the_window() -> None:
    monitor = HitRateMonitor(window=2, on_alert=lambda alert: None)
    for cached in (0, 90, 70):
        monitor.record("support", stats(cached))
    assert monitor.hit_rate("support") == pytest.approx(0.8)


def test_unreported_requests_are_not_misses() -> None:
    monitor = HitRateMonitor(min_requests=1)
    monitor.record("vllm", CacheStats.from_usage({"prompt_tokens": 100}))
    assert monitor.hit_rate("vllm") is None
    monitor.record("vllm", stats(100))
    assert monitor.hit_rate("vllm") == 1.0


def test_falling_below_the_threshold_warns_once_with_the_latest_explanation() -> None:
    miss = CacheMiss(MissReason.TOOLS_ORDER, "local", "the tools came in another order")
    monitor = HitRateMonitor(threshold=0.7, window=4, min_requests=2)
    monitor.record("support", stats(100), version="v3")
    with pytest.warns(HitRateWarning, match=r"'support@v3' read 50\.0%.*tools_order"):
        monitor.record("support", dataclasses.replace(stats(0), miss=miss), version="v3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor.record("support", stats(0), version="v3")  # still below: no second alert


def test_an_alert_fires_again_after_the_rate_recovered() -> None:
    alerts: list[HitRateAlert] = []
    monitor = HitRateMonitor(threshold=0.5, window=1, min_requests=1, on_alert=alerts.append)
    for cached in (0, 0, 100, 0):
        monitor.record("support", stats(cached))
    assert len(alerts) == 2
    assert alerts[0].miss is None and "no miss explained" in alerts[0].message


def test_the_threshold_must_be_a_rate() -> None:
    with pytest.raises(UsageError, match="between 0 and 1"):
        HitRateMonitor(threshold=70)


def test_a_registry_prompt_is_tracked_by_its_name_and_version() -> None:
    prompt = Prompt(system=[Segment.static("rules", name="support", version="v3")])
    monitor = HitRateMonitor()
    monitor.record(prompt, stats(80))
    assert monitor.rates() == {("support", "v3"): 0.8}


def test_the_clients_record_named_prompts_with_the_explanation() -> None:
    alerts: list[HitRateAlert] = []
    monitor = HitRateMonitor(min_requests=2, on_alert=alerts.append)
    mock = MockProvider()
    rules = "Answer from the price list only and show the arithmetic. " * 200
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, guard=StaticPrefixGuard(), monitor=monitor)
        for day in ("Monday", "Tuesday", "Wednesday"):
            prompt = Prompt(
                system=[Segment.static(rules), Segment.static(f"Today is {day}.", name="date")],
                messages=[Segment.dynamic("Hi")],
                name="support",
            )
            client.create(prompt, model="claude-opus-4-1", max_tokens=16)
    assert len(alerts) == 1
    assert alerts[0].miss is not None and alerts[0].miss.segment == "date"


@given(
    cached=st.lists(st.integers(0, 100), min_size=1, max_size=40),
    window=st.integers(1, 10),
)
def test_the_rate_is_that_of_the_last_window_requests(cached: list[int], window: int) -> None:
    monitor = HitRateMonitor(window=window, on_alert=lambda alert: None)
    for value in cached:
        monitor.record("p", stats(value))
    last = cached[-window:]
    assert monitor.hit_rate("p") == pytest.approx(sum(last) / (100 * len(last)))
