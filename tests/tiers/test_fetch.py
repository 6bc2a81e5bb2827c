"""Fetch or recompute: what a hit in each tier saves of a block's prefill."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.tiers.fetch import Tier, fetch_seconds, tier_savings
from prefixkit.sdk import UsageError

GPU = Tier("GPU", 10)
CPU = Tier("CPU", 10, (8.0,))  # 8 bytes/s
DISK = Tier("DISK", 10, (2.0, 8.0))  # through a 2 bytes/s disk, then the CPU link


def test_a_disk_block_crosses_both_links_one_after_the_other() -> None:
    assert fetch_seconds(DISK, 8.0) == 8.0 / 2.0 + 8.0 / 8.0
    assert fetch_seconds(GPU, 8.0) == 0.0


def test_a_hit_saves_the_prefill_minus_the_fetch() -> None:
    # a block of 4 tokens at 4 tokens/s: 1 s to compute; 4 bytes: 0.5 s from CPU, 2.5 s from disk
    savings = tier_savings(
        (GPU, CPU, DISK),
        block_tokens=4,
        block_bytes=4.0,
        prefill_tokens_per_s=4.0,
        rule="always_load",
    )
    assert savings == (1.0, 0.5, -1.5)


def test_fetching_only_when_faster_makes_a_slow_tier_save_nothing() -> None:
    savings = tier_savings(
        (GPU, CPU, DISK),
        block_tokens=4,
        block_bytes=4.0,
        prefill_tokens_per_s=4.0,
        rule="when_faster",
    )
    assert savings == (1.0, 0.5, 0.0)


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="choose from always_load, when_faster"):
        tier_savings((GPU,), block_tokens=1, block_bytes=1, prefill_tokens_per_s=1, rule="x")  # type: ignore[arg-type]


@given(
    rates=st.lists(st.floats(1e6, 1e12), min_size=1, max_size=3),
    block_bytes=st.floats(1e3, 1e9),
    prefill=st.floats(100, 1e6),
)
def test_when_faster_saves_at_least_what_always_loading_saves_and_at_most_the_block(
    rates: list[float], block_bytes: float, prefill: float
) -> None:
    tiers = (GPU, Tier("LOWER", 1, tuple(rates)))
    args = {"block_tokens": 16, "block_bytes": block_bytes, "prefill_tokens_per_s": prefill}
    always = tier_savings(tiers, rule="always_load", **args)  # type: ignore[arg-type]
    faster = tier_savings(tiers, rule="when_faster", **args)  # type: ignore[arg-type]
    assert always[0] == faster[0] == 1.0
    assert always[1] <= faster[1] <= 1.0 and faster[1] >= 0.0


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Tier("CPU", 100, (0.0,)), "read_bytes_per_s"),
        (lambda: Tier("CPU", 100, (-1.0,)), "read_bytes_per_s"),
        (lambda: Tier("CPU", 100, (float("nan"),)), "read_bytes_per_s"),
        (lambda: Tier("GPU", -100), "capacity_bytes"),
        (lambda: Tier("GPU", float("nan")), "capacity_bytes"),  # type: ignore[arg-type]
    ],
)
def test_a_tier_that_cannot_be_timed_is_refused_naming_the_field(
    make: Callable[[], Tier], field: str
) -> None:
    with pytest.raises(UsageError, match=field) as info:
        make()
    assert info.value.argument == field
    assert isinstance(info.value, ValueError)
