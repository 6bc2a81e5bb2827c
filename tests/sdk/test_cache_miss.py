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
