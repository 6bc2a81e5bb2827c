"""CacheStats: every provider's usage shape, costs from the price table, aggregation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic.types
import openai.types
import openai.types.responses
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import CacheStats, Pricing, model_info
from prefixkit.testing.providers import (
    ANTHROPIC_USAGE,
    CHAT_USAGE,
    RESPONSES_USAGE,
    MockProvider,
)


def test_anthropic_usage_counts_reads_writes_and_uncached_separately() -> None:
    usage = {
        "input_tokens": 50,
        "output_tokens": 10,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 1200,
        "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 1000},
    }
    stats = CacheStats.from_usage(usage)
    assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (3000, 1200, 50)
    assert stats.input_tokens == 4250
    assert stats.written_by_ttl == {"5m": 200, "1h": 1000}
    assert stats.hit_ratio == pytest.approx(3000 / 4250)


def test_anthropic_sdk_object_parses_like_its_dict() -> None:
    usage = anthropic.types.Usage.model_validate(ANTHROPIC_USAGE)
    assert CacheStats.from_usage(usage) == CacheStats.from_usage(ANTHROPIC_USAGE)


def test_anthropic_writes_without_ttl_breakdown_count_as_5m() -> None:
    stats = CacheStats.from_usage(
        {"input_tokens": 5, "output_tokens": 1, "cache_creation_input_tokens": 900}
    )
    assert stats.written_by_ttl == {"5m": 900}


def test_openai_chat_prompt_tokens_include_cached_ones() -> None:
    stats = CacheStats.from_usage(CHAT_USAGE)
    assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (1920, 0, 86)
    assert stats.output_tokens == 300


def test_openai_chat_cache_write_tokens_are_written_not_uncached() -> None:
    usage = {
        "prompt_tokens": 3000,
        "completion_tokens": 5,
        "total_tokens": 3005,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 1500},
    }
    stats = CacheStats.from_usage(openai.types.CompletionUsage.model_validate(usage))
    assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (1000, 1500, 500)
    assert stats.written_by_ttl == {"30m": 1500}


def test_openai_responses_usage_with_ttl_details() -> None:
    usage = openai.types.responses.ResponseUsage.model_validate(RESPONSES_USAGE)
    stats = CacheStats.from_usage(usage)
    assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (1792, 128, 86)
    assert stats.written_by_ttl == {"30m": 128}


def test_vllm_usage_without_prompt_tokens_details_is_not_reported_not_a_miss() -> None:
    stats = CacheStats.from_usage(
        {
            "prompt_tokens": 1630,
            "completion_tokens": 8,
            "total_tokens": 1638,
            "prompt_tokens_details": None,
        }
    )
    assert (stats.cached_tokens, stats.uncached_tokens) == (0, 1630)
    assert stats.hit_ratio is None and not stats.reported
    assert stats.not_reported is not None
    assert "--enable-prompt-tokens-details" in stats.not_reported
    assert "hit ratio not reported" in stats.summary()
    assert stats.cost_usd is None and stats.prompt_cost_units is None


def test_a_reported_zero_is_a_miss_not_unknown() -> None:
    usage = {**CHAT_USAGE, "prompt_tokens_details": {"cached_tokens": 0}}
    stats = CacheStats.from_usage(usage)
    assert stats.reported and stats.hit_ratio == 0.0 and stats.not_reported is None


def test_vllm_usage_with_prompt_tokens_details_reports_hits() -> None:
    usage = {
        "prompt_tokens": 1630,
        "completion_tokens": 8,
        "total_tokens": 1638,
        "prompt_tokens_details": {"cached_tokens": 1616},
    }
    stats = CacheStats.from_usage(usage)
    assert stats.reported and stats.hit_ratio == pytest.approx(1616 / 1630)


def test_anthropic_usage_with_a_gateway_total_is_still_anthropic() -> None:
    usage = {
        "input_tokens": 21,
        "output_tokens": 393,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 188_086,
        "total_tokens": 188_500,
    }
    stats = CacheStats.from_usage(usage)
    assert (stats.cached_tokens, stats.uncached_tokens) == (188_086, 21)
    assert stats.hit_ratio == pytest.approx(188_086 / 188_107)


def test_anthropic_sdk_usage_with_a_gateway_total_is_still_anthropic() -> None:
    usage = anthropic.types.Usage.model_validate({**ANTHROPIC_USAGE, "total_tokens": 3669})
    assert CacheStats.from_usage(usage) == CacheStats.from_usage(ANTHROPIC_USAGE)


def test_gateway_converted_anthropic_usage_counts_prompt_tokens_with_cache_tokens() -> None:
    # LiteLLM-style: OpenAI fields, prompt_tokens including the cache tokens, Anthropic's kept.
    usage = {
        "prompt_tokens": 188_107,
        "completion_tokens": 393,
        "total_tokens": 188_500,
        "prompt_tokens_details": {"cached_tokens": 188_086},
        "cache_read_input_tokens": 188_086,
        "cache_creation_input_tokens": 0,
    }
    stats = CacheStats.from_usage(usage, model="claude-sonnet-4-5")
    assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (188_086, 0, 21)
    assert stats.output_tokens == 393
    assert stats.savings_usd is not None and stats.savings_usd > 0


def test_anthropic_compatible_server_without_cache_fields_is_not_reported() -> None:
    stats = CacheStats.from_usage({"input_tokens": 900, "output_tokens": 5})
    assert stats.uncached_tokens == 900 and stats.hit_ratio is None
    assert stats.not_reported is not None and "cache_read_input_tokens" in stats.not_reported


def test_usage_without_cache_fields_is_priced_by_the_model_it_names() -> None:
    stats = CacheStats.from_usage({"input_tokens": 1000, "output_tokens": 0}, model="gpt-5")
    assert stats.cost_usd == pytest.approx(1000 * 1.25 / 1e6)


def test_a_streaming_delta_usage_names_the_final_message() -> None:
    delta = anthropic.types.MessageDeltaUsage.model_validate({"output_tokens": 12})
    with pytest.raises(ValueError, match="get_final_message"):
        CacheStats.from_usage(delta)


def test_hit_ratio_of_a_total_leaves_out_requests_that_did_not_report() -> None:
    reported = CacheStats.from_usage(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": 500},
        }
    )
    unreported = CacheStats.from_usage({"prompt_tokens": 4000, "completion_tokens": 0})
    total = reported + unreported
    assert total.unreported_requests == 1 and total.unreported_tokens == 4000
    assert total.hit_ratio == pytest.approx(0.5)
    assert not total.reported and "1 request(s) without cache counters" in total.summary()


def test_new_models_have_usd_savings() -> None:
    usage = {"input_tokens": 50, "output_tokens": 10, "cache_read_input_tokens": 10_000}
    for model in ("claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5", "claude-fable-5-1"):
        stats = CacheStats.from_usage(usage, model=model)
        assert stats.savings_usd is not None and stats.savings_usd > 0, model


def test_a_long_prompt_is_billed_at_the_long_prompt_rates() -> None:
    short = CacheStats.from_usage(
        {"input_tokens": 100_000, "output_tokens": 0}, model="claude-haiku-5-5"
    )
    long = CacheStats.from_usage(
        {"input_tokens": 100_001, "output_tokens": 0}, model="claude-haiku-5-5"
    )
    assert short.cost_usd == pytest.approx(100_000 * 0.10 / 1e6)
    assert long.cost_usd == pytest.approx(100_001 * 0.50 / 1e6)


def test_unrecognised_usage_raises_naming_the_keys() -> None:
    with pytest.raises(ValueError, match=r"unrecognised usage with keys \['foo'\]"):
        CacheStats.from_usage({"foo": 1})


def test_cost_uses_the_model_price_table_with_write_premium_and_read_discount() -> None:
    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "cache_read_input_tokens": 1_000_000,
        "cache_creation_input_tokens": 2_000_000,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 1_000_000,
            "ephemeral_1h_input_tokens": 1_000_000,
        },
    }
    stats = CacheStats.from_usage(usage, model="claude-opus-4-5")  # $5 / Mtok input
    # uncached 1 + read 0.1 + write 5m 1.25 + write 1h 2.0 = 4.35 Mtok-equivalents
    assert stats.cost_usd == pytest.approx(4.35 * 5)
    assert stats.cost_without_cache_usd == pytest.approx(4 * 5)
    assert stats.savings_usd == pytest.approx(-1.75)


def test_openai_read_discount_comes_from_the_model_entry() -> None:
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 0,
        "total_tokens": 2000,
        "prompt_tokens_details": {"cached_tokens": 1000},
    }
    assert CacheStats.from_usage(usage, model="gpt-4o").prompt_cost_units == 1500
    assert CacheStats.from_usage(usage, model="gpt-4.1-2025-04-14").prompt_cost_units == 1250


def test_explicit_pricing_overrides_the_table() -> None:
    pricing = Pricing(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0, cache_read_multiplier=0.5)
    stats = CacheStats.from_usage(CHAT_USAGE, model="gpt-4o", pricing=pricing)
    assert stats.cost_usd == pytest.approx((86 + 1920 * 0.5) / 1e6 + 300 * 2 / 1e6)


def test_unknown_model_has_no_cost_but_keeps_token_counts() -> None:
    stats = CacheStats.from_usage(CHAT_USAGE, model="gpt-imaginary")
    assert stats.cost_usd is None and stats.savings_usd is None
    assert stats.cached_tokens == 1920


def test_totals_add_tokens_requests_and_savings() -> None:
    first = CacheStats.from_usage(
        {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 4000},
        model="claude-opus-4-5",
    )
    second = CacheStats.from_usage(
        {"input_tokens": 12, "output_tokens": 5, "cache_read_input_tokens": 4000},
        model="claude-opus-4-5",
    )
    total = CacheStats.total([first, second])
    assert total.requests == 2
    assert total.cached_tokens == 4000 and total.written_tokens == 4000
    assert total.hit_ratio == pytest.approx(4000 / 8022)
    assert first.savings_usd is not None and second.savings_usd is not None
    assert total.savings_usd == pytest.approx(first.savings_usd + second.savings_usd)
    assert (
        total.savings_usd is not None and total.savings_usd > 0
    )  # one write at 1.25x is repaid by one read at 0.1x
    assert "2 request(s)" in total.summary()


def test_total_of_nothing_is_empty() -> None:
    total = CacheStats.total([])
    assert total.requests == 0 and total.hit_ratio == 0.0


counts = st.integers(min_value=0, max_value=10**7)


@given(cached=counts, written=counts, uncached=counts, output=counts)
def test_anthropic_and_openai_shapes_agree_on_the_same_split(
    cached: int, written: int, uncached: int, output: int
) -> None:
    anthropic_stats = CacheStats.from_usage(
        {
            "input_tokens": uncached,
            "output_tokens": output,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
        }
    )
    chat_stats = CacheStats.from_usage(
        {
            "prompt_tokens": cached + written + uncached,
            "completion_tokens": output,
            "total_tokens": 0,
            "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        }
    )
    for stats in (anthropic_stats, chat_stats):
        assert (stats.cached_tokens, stats.written_tokens, stats.uncached_tokens) == (
            cached,
            written,
            uncached,
        )
        ratio = stats.hit_ratio
        assert ratio is not None and 0.0 <= ratio <= 1.0


@given(st.lists(st.tuples(counts, counts, counts), max_size=8))
def test_total_is_the_sum_of_its_parts(splits: list[tuple[int, int, int]]) -> None:
    parts = [
        CacheStats.from_usage(
            {
                "input_tokens": u,
                "output_tokens": 0,
                "cache_read_input_tokens": c,
                "cache_creation_input_tokens": w,
            },
            model="claude-opus-4-5",
        )
        for c, w, u in splits
    ]
    total = CacheStats.total(parts)
    assert total.requests == len(parts)
    assert total.input_tokens == sum(c + w + u for c, w, u in splits)
    assert total.cost_usd == pytest.approx(sum(p.cost_usd or 0.0 for p in parts))


def _anthropic_shape(c: int, w: int, u: int, o: int) -> dict[str, Any]:
    return {
        "input_tokens": u,
        "output_tokens": o,
        "cache_read_input_tokens": c,
        "cache_creation_input_tokens": w,
        "cache_creation": {"ephemeral_5m_input_tokens": w, "ephemeral_1h_input_tokens": 0},
    }


def _gateway_anthropic_shape(c: int, w: int, u: int, o: int) -> dict[str, Any]:
    # A gateway that converts to OpenAI's shape and keeps Anthropic's cache fields.
    return {
        "prompt_tokens": c + w + u,
        "completion_tokens": o,
        "prompt_tokens_details": {"cached_tokens": c},
        "cache_read_input_tokens": c,
        "cache_creation_input_tokens": w,
    }


def _chat_shape(c: int, w: int, u: int, o: int) -> dict[str, Any]:
    return {
        "prompt_tokens": c + w + u,
        "completion_tokens": o,
        "total_tokens": c + w + u + o,
        "prompt_tokens_details": {"cached_tokens": c, "cache_write_tokens": w},
    }


def _vllm_shape(c: int, w: int, u: int, o: int) -> dict[str, Any]:
    # vLLM --enable-prompt-tokens-details: cached tokens only (w is generated as 0).
    return {
        "prompt_tokens": c + u,
        "completion_tokens": o,
        "total_tokens": c + u + o,
        "prompt_tokens_details": {"cached_tokens": c},
    }


def _responses_shape(c: int, w: int, u: int, o: int) -> dict[str, Any]:
    return {
        "input_tokens": c + w + u,
        "input_tokens_details": {
            "cached_tokens": c,
            "cache_write_tokens": w,
            "cache_write_tokens_details": {"ttl_30m_tokens": w, "ttl_12h_tokens": 0},
        },
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": c + w + u + o,
    }


SHAPES: dict[str, tuple[Callable[[int, int, int, int], dict[str, Any]], type[Any] | None]] = {
    "anthropic": (_anthropic_shape, anthropic.types.Usage),
    "anthropic via gateway": (_gateway_anthropic_shape, None),
    "openai chat": (_chat_shape, openai.types.CompletionUsage),
    "vllm": (_vllm_shape, openai.types.CompletionUsage),
    "openai responses": (_responses_shape, openai.types.responses.ResponseUsage),
}

# Fields gateways and providers add that say nothing about the cache.
DECORATIONS: dict[str, Any] = {
    "total_tokens": 123_456,
    "cost": 0.0123,
    "is_byok": False,
    "cost_details": {"upstream_inference_cost": None},
    "provider": "Anthropic",
    "service_tier": "standard",
    "inference_geo": "us",
    "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}


@given(
    shape=st.sampled_from(sorted(SHAPES)),
    cached=counts,
    written=counts,
    uncached=counts,
    output=counts,
    decorations=st.dictionaries(st.sampled_from(sorted(DECORATIONS)), st.just(None)),
    as_sdk_object=st.booleans(),
)
def test_every_usage_shape_reads_the_same_split_whatever_a_gateway_adds(
    shape: str,
    cached: int,
    written: int,
    uncached: int,
    output: int,
    decorations: dict[str, None],
    as_sdk_object: bool,
) -> None:
    build, sdk_type = SHAPES[shape]
    written = 0 if shape == "vllm" else written
    usage = build(cached, written, uncached, output)
    decorated = {**{key: DECORATIONS[key] for key in decorations}, **usage}
    if as_sdk_object and sdk_type is not None:
        parsed = CacheStats.from_usage(sdk_type.model_validate(decorated))
    else:
        parsed = CacheStats.from_usage(decorated)
    assert parsed == CacheStats.from_usage(usage)
    assert (parsed.cached_tokens, parsed.written_tokens, parsed.uncached_tokens) == (
        cached,
        written,
        uncached,
    )
    assert parsed.output_tokens == output
    assert parsed.input_tokens == cached + written + uncached
    assert parsed.reported and sum(parsed.written_by_ttl.values()) == written
    ratio = parsed.hit_ratio
    assert ratio is not None and 0.0 <= ratio <= 1.0


LONG_SYSTEM = "You answer billing questions for Example Cloud. " * 300


def test_a_streamed_anthropic_reply_s_final_usage_is_read_as_anthropic() -> None:
    api = MockProvider()
    request: dict[str, Any] = {
        "model": "claude-sonnet-5",
        "max_tokens": 32,
        "system": [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Why is my bill higher?"}],
    }
    client = api.anthropic_client()
    for _ in range(2):
        with client.messages.stream(**request) as stream:
            usage = stream.get_final_message().usage
    stats = CacheStats.from_usage(usage)
    assert stats.reported and stats.cached_tokens > 0
    assert stats.cached_tokens == usage.cache_read_input_tokens


def test_a_streamed_chat_reply_s_last_chunk_usage_is_read_as_chat() -> None:
    api = MockProvider()
    client = api.openai_client()
    messages: list[Any] = [
        {"role": "system", "content": LONG_SYSTEM},
        {"role": "user", "content": "Why is my bill higher?"},
    ]
    for _ in range(2):
        chunks = list(
            client.chat.completions.create(
                model="gpt-5",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    usage = chunks[-1].usage
    assert usage is not None
    stats = CacheStats.from_usage(usage)
    assert stats.reported and stats.cached_tokens > 0
    assert stats.input_tokens == usage.prompt_tokens


# --- service tiers, Bedrock and Vertex AI ids -----------------------------------------

TIER_CLAUDE = "claude-sonnet-5"
TIER_GPT = "gpt-5"
counts = st.integers(min_value=0, max_value=2_000_000)


def anthropic_usage(read: int, written: int, uncached: int, output: int) -> dict[str, Any]:
    return {
        "input_tokens": uncached,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }


def chat_usage(read: int, written: int, uncached: int, output: int) -> dict[str, Any]:
    return {
        "prompt_tokens": read + written + uncached,
        "completion_tokens": output,
        "total_tokens": read + written + uncached + output,
        "prompt_tokens_details": {"cached_tokens": read},
    }


def costs(stats: CacheStats) -> tuple[float | None, float | None]:
    return stats.cost_usd, stats.cost_without_cache_usd


@given(counts, counts, counts, counts)
def test_an_anthropic_batch_request_costs_half_the_standard_price(
    read: int, written: int, uncached: int, output: int
) -> None:
    usage = anthropic_usage(read, written, uncached, output)
    standard = CacheStats.from_usage({**usage, "service_tier": "standard"}, model=TIER_CLAUDE)
    batch = CacheStats.from_usage({**usage, "service_tier": "batch"}, model=TIER_CLAUDE)
    assert standard.cost_usd is not None and standard.cost_without_cache_usd is not None
    assert batch.cost_usd == pytest.approx(standard.cost_usd * 0.5)
    assert batch.cost_without_cache_usd == pytest.approx(standard.cost_without_cache_usd * 0.5)
    assert batch.prompt_cost_units == standard.prompt_cost_units


@pytest.mark.parametrize(("tier", "factor"), [("flex", 0.5), ("batch", 0.5), ("priority", 2.0)])
@given(read=counts, uncached=counts, output=counts)
def test_an_openai_tier_scales_the_standard_price(
    tier: str, factor: float, read: int, uncached: int, output: int
) -> None:
    usage = chat_usage(read, 0, uncached, output)
    standard = CacheStats.from_usage(usage, model=TIER_GPT, service_tier="default")
    tiered = CacheStats.from_usage(usage, model=TIER_GPT, service_tier=tier)
    assert standard.cost_usd is not None and standard.cost_without_cache_usd is not None
    assert tiered.cost_usd == pytest.approx(standard.cost_usd * factor)
    assert tiered.cost_without_cache_usd == pytest.approx(standard.cost_without_cache_usd * factor)


@pytest.mark.parametrize(("model", "tier"), [(TIER_CLAUDE, "priority"), (TIER_GPT, "scale")])
def test_a_tier_priced_by_commitment_has_no_usd_cost_but_its_savings_units(
    model: str, tier: str
) -> None:
    usage = (
        anthropic_usage(3000, 0, 50, 10) if model == TIER_CLAUDE else chat_usage(3000, 0, 50, 10)
    )
    stats = CacheStats.from_usage(usage, model=model, service_tier=tier)
    assert costs(stats) == (None, None)
    assert stats.prompt_cost_units is not None


def test_the_tier_of_a_whole_openai_completion_prices_it() -> None:
    mock = MockProvider()
    completion = mock.openai_client().chat.completions.create(
        model=TIER_GPT, messages=[{"role": "user", "content": "Hello"}]
    )
    flex = completion.model_copy(update={"service_tier": "flex"})
    assert completion.usage is not None
    standard = CacheStats.from_usage(completion.usage, model=TIER_GPT)
    assert standard.cost_usd is not None
    assert CacheStats.from_usage(flex, model=TIER_GPT).cost_usd == pytest.approx(
        standard.cost_usd * 0.5
    )


def test_the_usage_tier_of_an_anthropic_message_prices_it() -> None:
    mock = MockProvider()
    message = mock.anthropic_client().messages.create(
        model=TIER_CLAUDE, max_tokens=16, messages=[{"role": "user", "content": "Hello"}]
    )
    usage = message.usage.model_copy(update={"service_tier": "batch"})
    standard = CacheStats.from_usage(message.usage, model=TIER_CLAUDE)
    assert standard.cost_usd is not None
    assert CacheStats.from_usage(usage, model=TIER_CLAUDE).cost_usd == pytest.approx(
        standard.cost_usd * 0.5
    )


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("eu.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
            "claude-sonnet-4",
        ),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        ("claude-haiku-4-5@latest", "claude-haiku-4-5"),
    ],
)
def test_bedrock_and_vertex_ids_name_the_model_in_the_table(model_id: str, name: str) -> None:
    info = model_info("anthropic", model_id)
    assert info is not None and info.name == name
    assert CacheStats.from_usage(
        anthropic_usage(3000, 0, 50, 10), model=model_id
    ) == CacheStats.from_usage(anthropic_usage(3000, 0, 50, 10), model=name)


@pytest.mark.parametrize(
    "model_id", ["anthropic.titan-text-v1", "mistral.claude-sonnet-4-5-v1:0", "claude-nova@x"]
)
def test_other_bedrock_and_vertex_ids_stay_unknown(model_id: str) -> None:
    assert model_info("anthropic", model_id) is None


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_client_prices_an_answer_at_the_tier_it_was_served_on(api: str) -> None:
    from prefixkit.sdk import OpenAIClient, Prompt, Segment

    prompt = Prompt(
        system=[Segment.static("You answer billing questions. " * 300)],
        messages=[Segment.dynamic("Why was I charged twice?")],
    )
    client = OpenAIClient(MockProvider().openai_client())
    create = client.chat if api == "chat" else client.responses
    _, standard = create(prompt, model=TIER_GPT)
    _, flex = create(prompt, model=TIER_GPT, service_tier="flex")
    assert standard.cost_without_cache_usd is not None
    assert flex.cost_without_cache_usd == pytest.approx(standard.cost_without_cache_usd * 0.5)
