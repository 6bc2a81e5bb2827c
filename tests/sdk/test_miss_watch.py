"""What a client's miss watch sends and decides: the cache lifetime a request asks for (the
guard judges expiry by it), and which explanation a response gets when the provider's
diagnosis and the guard's comparison both speak."""

from __future__ import annotations

from typing import Any

import pytest
from prefixkit.sdk import (
    AnthropicClient,
    CacheStats,
    HitRateMonitor,
    HitRateWarning,
    MissReason,
    OpenAIClient,
    Prompt,
    Segment,
    StaticPrefixGuard,
)
from prefixkit.sdk.miss_watch import sent_ttl
from prefixkit.testing.providers import MockProvider

LONG = "You answer questions about Nimbus Storage's buckets, regions and bills. " * 200


@pytest.mark.parametrize(
    ("request_body", "ttl"),
    [
        ({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]}, "5m"),
        (
            {
                "tools": [{"name": "t", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            },
            "1h",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "s", "prompt_cache_breakpoint": {"ttl": "30m"}}
                        ],
                    }
                ]
            },
            "30m",
        ),
        ({"input": "q", "prompt_cache_options": {"mode": "implicit", "ttl": "12h"}}, "12h"),
        ({"input": "q", "prompt_cache_retention": "24h"}, "24h"),
        ({"input": "q", "prompt_cache_retention": "in_memory"}, None),
        ({"messages": [{"role": "user", "content": "q"}]}, None),
    ],
)
def test_the_longest_cache_lifetime_a_request_asks_for(
    request_body: dict[str, Any], ttl: str | None
) -> None:
    assert sent_ttl(request_body) == ttl


def support(day: str = "Monday", question: str = "How do I move a bucket?") -> Prompt:
    return Prompt(
        system=[
            Segment.static(LONG, name="rules"),
            Segment.static(f"Today is {day}.", name="date"),
        ],
        messages=[Segment.dynamic(question)],
        name="support",
    )


def test_a_new_question_is_no_miss_when_the_guard_saw_the_prefix_read() -> None:
    """Anthropic's diagnosis says the messages differ from the previous request's (the
    question is new), but the request read the whole static prefix: nothing was missed."""
    with MockProvider().anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True, guard=StaticPrefixGuard())
        client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = client.create(
            support(question="And a region?"), model="claude-opus-4-1", max_tokens=32
        )
    assert stats.cached_tokens > 0
    assert stats.miss is None


def test_a_changed_segment_is_named_rather_than_the_key_derived_from_it() -> None:
    """OpenAI says the prompt_cache_key changed; prefixkit derived that key from the static
    prefix, and the guard names the segment that changed it."""
    with MockProvider().openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True, guard=StaticPrefixGuard())
        client.responses(support(), model="gpt-5.6-sol")
        _, stats = client.responses(support("Tuesday"), model="gpt-5.6-sol")
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.segment) == (MissReason.STATIC_TEXT, "date")


def test_a_prompt_named_only_by_its_versioned_segment_is_monitored() -> None:
    monitor = HitRateMonitor(threshold=0.7, window=4, min_requests=1, on_alert=lambda _: None)
    system = Segment.versioned(LONG, version="v3", name="support")
    with MockProvider().anthropic_client() as sdk:
        client = AnthropicClient(sdk, monitor=monitor)
        for question in ("Hi", "Hello"):
            client.create(
                Prompt(system=[system], messages=[Segment.dynamic(question)]),
                model="claude-opus-4-1",
                max_tokens=32,
            )
    assert list(monitor) == [("support", "v3")]


def test_a_prompt_without_any_name_is_sent_without_diagnostics() -> None:
    """Nothing could ever be compared with it: the provider is not asked to remember it."""
    mock = MockProvider()
    unnamed = Prompt(system=[Segment.static(LONG)], messages=[Segment.dynamic("Hi")])
    with mock.anthropic_client() as sdk:
        AnthropicClient(sdk, diagnostics=True).create(
            unnamed, model="claude-opus-4-1", max_tokens=8
        )
    assert "diagnostics" not in mock.body


def test_a_hit_rate_warning_points_at_the_applications_call() -> None:
    monitor = HitRateMonitor(threshold=0.99, window=2, min_requests=1)
    with MockProvider().anthropic_client() as sdk:
        client = AnthropicClient(sdk, monitor=monitor)
        with pytest.warns(HitRateWarning) as warned:
            client.create(support(), model="claude-opus-4-1", max_tokens=8)  # writes, reads 0
    assert warned[0].filename == __file__


def test_a_whole_responses_diagnosis_is_priced_by_from_usage() -> None:
    """gpt-5.6-sol: $5 per million input tokens, a cache read 0.1 of it (as a local
    explanation's tokens are priced)."""
    usage = {"input_tokens": 5000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5}
    diagnosis = {"type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": 4096}
    response = {"id": "resp_1", "usage": usage, "prompt_cache_diagnostics": diagnosis}
    stats = CacheStats.from_usage(response, model="gpt-5.6-sol")
    assert stats.miss is not None
    assert stats.miss.missed_cost_usd == pytest.approx(4096 * 5.0 * 0.9 / 1e6)
