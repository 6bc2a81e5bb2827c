"""`CacheMiss` and `MissReason`: one provider-neutral explanation of a miss, on `CacheStats`."""

from __future__ import annotations

import dataclasses

import pytest
from prefixkit.sdk import CacheMiss, CacheStats, MissReason

MISS = CacheMiss(
    MissReason.TOOLS_ORDER,
    "local",
    "the tools came in another order: sort them",
    missed_tokens=4096,
    segment="tools",
)


def test_a_miss_reason_is_its_string() -> None:
    assert str(MissReason.TOOLS_ORDER) == "tools_order"
    assert f"{MissReason.SESSION}" == "session"
    assert MissReason("ttl_expired") is MissReason.TTL_EXPIRED


def test_a_cache_miss_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MISS.reason = MissReason.MODEL  # type: ignore[misc]


def test_only_inconclusive_is_not_conclusive() -> None:
    for reason in MissReason:
        miss = CacheMiss(reason, "provider", "x")
        assert miss.conclusive is (reason is not MissReason.INCONCLUSIVE)


def test_stats_carry_no_miss_unless_given_one() -> None:
    assert CacheStats.from_usage({"input_tokens": 10, "cache_read_input_tokens": 0}).miss is None


def test_a_sum_of_stats_has_no_single_reason() -> None:
    one = dataclasses.replace(CacheStats(cached_tokens=5, uncached_tokens=5), miss=MISS)
    assert (one + one).miss is None
    assert CacheStats.total([one]).miss is None


def test_the_summary_says_why_a_request_missed() -> None:
    stats = dataclasses.replace(CacheStats(uncached_tokens=4096), miss=MISS)
    assert stats.summary().endswith(
        "; cache miss (local: tools_order): the tools came in another order: sort them"
    )


def test_a_whole_anthropic_message_gives_its_diagnosed_miss() -> None:
    message = {
        "id": "msg_1",
        "usage": {
            "input_tokens": 20,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 4000,
        },
        "diagnostics": {
            "cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 3900}
        },
    }
    miss = CacheStats.from_usage(message).miss
    assert miss is not None
    assert (miss.reason, miss.missed_tokens, miss.source) == (MissReason.TOOLS, 3900, "provider")


def test_a_whole_responses_answer_gives_its_diagnosed_miss() -> None:
    response = {
        "id": "resp_1",
        "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 0}},
        "prompt_cache_diagnostics": {"type": "comparison_response_not_found"},
    }
    miss = CacheStats.from_usage(response).miss
    assert miss is not None and miss.reason is MissReason.PREVIOUS_NOT_FOUND


def test_a_reason_this_version_does_not_know_is_inconclusive() -> None:
    response = {
        "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 0}},
        "prompt_cache_diagnostics": {
            "type": "cache_miss",
            "reason": "moon_phase_changed",
            "cache_missed_tokens": 10,
        },
    }
    miss = CacheStats.from_usage(response).miss
    assert miss is not None and miss.reason is MissReason.INCONCLUSIVE
    assert miss.provider_reason == "moon_phase_changed"
