"""The sweep over a tier's sizes, and where more memory stops paying."""

from __future__ import annotations

import pytest
from prefixkit.engine_adapter.replay.replay import LoadParams
from prefixkit.engine_adapter.replay.trace import Trace
from prefixkit.engine_adapter.tiers.fetch import Tier
from prefixkit.engine_adapter.tiers.simulate import TieredResult, TierSetup
from prefixkit.engine_adapter.tiers.sweep import SweepPoint, default_sizes, stops_paying, sweep_tier
from prefixkit.sdk import UsageError


def point(size: int, saved_share: float) -> SweepPoint:
    result = TieredResult(
        policy="round_robin",
        rule="always_load",
        tier_names=("GPU", "CPU"),
        capacity_blocks=(1, 1),
        savings=(1.0, 1.0),
        prompt_tokens=100,
        hit_tokens=(0, 0),
        declined_tokens=0,
        prefill_seconds_saved=saved_share * 10.0,
        prefill_seconds=10.0,
        ttft_s=[],
        assignments=[],
    )
    return SweepPoint(size, result)


def test_a_tier_stops_paying_after_its_last_step_that_gains_enough() -> None:
    points = [point(0, 0.10), point(8, 0.10), point(16, 0.20), point(32, 0.201), point(64, 0.30)]
    # 16 -> 32 gains 0.001, but 32 -> 64 gains 0.099: the last paying step ends at 64
    assert stops_paying(points, 0.01) is None
    assert stops_paying(points[:4], 0.01) == 16


def test_a_gain_is_judged_per_doubling() -> None:
    # 0.03 over four doublings is 0.0075 per doubling
    assert stops_paying([point(4, 0.1), point(64, 0.13)], 0.01) == 4
    assert stops_paying([point(4, 0.1), point(64, 0.13)], 0.005) is None


def test_a_tier_that_never_pays_stops_at_its_smallest_size() -> None:
    assert stops_paying([point(0, 0.2), point(8, 0.2), point(16, 0.2)], 0.01) == 0


def test_the_default_sizes_go_from_none_to_four_times() -> None:
    assert default_sizes(64) == [0, 8, 16, 32, 64, 128, 256]


def test_a_sweep_replays_each_size_once_smallest_first() -> None:
    trace = Trace(4)
    for index in range(6):
        trace.append(index * 1000.0, 12, 0, [1, 2, 3] if index % 2 else [4, 5, 6])
    setup = TierSetup(
        (Tier("GPU", 12), Tier("CPU", 0, (1e9,))), bytes_per_token=1.0, prefill_tokens_per_s=4.0
    )
    points = sweep_tier(
        trace, setup, 1, LoadParams(1.0, 0.0), "CPU", [24, 0, 12, 24], policy="round_robin"
    )
    assert [p.capacity_bytes for p in points] == [0, 12, 24]
    # the GPU holds one request's 3 blocks; a CPU of 6 blocks holds both requests
    assert [p.result.hit_tokens[1] for p in points] == [0, 0, 4 * 12]


def test_points_of_one_size_count_once() -> None:
    assert stops_paying([point(10, 0.1), point(10, 0.2), point(20, 0.3)], 0.005) is None
    assert stops_paying([point(10, 0.3), point(10, 0.1), point(20, 0.3)], 0.005) == 10


def test_a_sweep_of_fewer_than_two_sizes_compares_nothing_and_is_refused() -> None:
    for points in ([], [point(10, 0.1)], [point(10, 0.1), point(10, 0.2)]):
        with pytest.raises(UsageError, match="compares nothing") as info:
            stops_paying(points, 0.005)
        assert info.value.argument == "points"


def test_a_negative_size_is_refused() -> None:
    setup = TierSetup(
        (Tier("GPU", 12), Tier("CPU", 0, (1e9,))), bytes_per_token=1.0, prefill_tokens_per_s=4.0
    )
    with pytest.raises(UsageError, match=r"sweep sizes \[-10\]") as info:
        sweep_tier(Trace(4), setup, 1, LoadParams(1.0, 0.0), "CPU", [-10, 10])
    assert info.value.argument == "sizes"
