"""Cached runs by tier: a block held in a slower tier continues a run and counts what a hit
there saves."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.policy import cached_runs
from prefixkit.engine_adapter.routing.tiered import MEDIA, tiered_runs

REPLICAS = 3
_blocks = st.lists(st.integers(0, 7), max_size=12)
_index = st.dictionaries(st.integers(0, 7), st.integers(0, (1 << REPLICAS) - 1), max_size=8)
_savings = st.floats(0.0, 1.0, allow_nan=False)


def test_media_are_vllm_medium_names_fastest_first() -> None:
    assert MEDIA == ("GPU", "CPU", "DISK")


def test_a_block_counts_the_saving_of_the_fastest_tier_holding_it() -> None:
    gpu = {1: 0b01, 2: 0b01}
    cpu = {1: 0b11, 2: 0b10, 3: 0b11}
    runs, values = tiered_runs([gpu, cpu, {}], [1, 2, 3, 4], 2, [1.0, 0.5, 0.1])
    assert runs == [3, 3]
    assert values == [1.0 + 1.0 + 0.5, 0.5 + 0.5 + 0.5]


def test_a_block_held_in_no_tier_ends_the_run() -> None:
    gpu = {1: 0b1, 3: 0b1}
    disk = {2: 0b0}
    runs, values = tiered_runs([gpu, {}, disk], [1, 2, 3], 1, [1.0, 0.5, 0.25])
    assert (runs, values) == ([1], [1.0])


def test_a_replica_missing_the_first_block_has_no_run() -> None:
    runs, values = tiered_runs([{1: 0b01, 2: 0b11}, {2: 0b10}], [1, 2], 2, [1.0, 0.5])
    assert (runs, values) == ([2, 0], [2.0, 0.0])


def test_the_run_continues_from_gpu_into_disk() -> None:
    runs, values = tiered_runs([{1: 1}, {}, {2: 1, 3: 1}], [1, 2, 3], 1, [1.0, 0.6, 0.2])
    assert runs == [3]
    assert values == [pytest.approx(1.4)]


def test_savings_must_match_the_tiers() -> None:
    with pytest.raises(ValueError, match="2 savings for 3 tiers"):
        tiered_runs([{}, {}, {}], [1], 1, [1.0, 0.5])


def test_one_tier_accepts_any_mapping() -> None:
    class Index(dict[int, int]):
        pass

    assert tiered_runs([Index({5: 1})], [5, 6], 1, [0.5]) == ([1], [0.5])


@given(_index, _blocks)
def test_one_tier_saving_everything_is_cached_runs(gpu: dict[int, int], blocks: list[int]) -> None:
    runs, values = tiered_runs([gpu], blocks, REPLICAS, [1.0])
    assert runs == cached_runs(gpu, blocks, REPLICAS)
    assert values == runs


@given(_index, _blocks)
def test_one_tier_split_in_two_equal_tiers_changes_nothing(
    gpu: dict[int, int], blocks: list[int]
) -> None:
    # the same holders given as GPU and CPU at an equal saving: the multi-tier walk
    # agrees with the one-tier path
    assert tiered_runs([gpu, gpu], blocks, REPLICAS, [1.0, 1.0]) == tiered_runs(
        [gpu], blocks, REPLICAS, [1.0]
    )


@given(st.lists(_index, min_size=1, max_size=3), _blocks, st.data())
def test_values_never_exceed_runs(
    tiers: list[dict[int, int]], blocks: list[int], data: st.DataObject
) -> None:
    savings = [data.draw(_savings) for _ in tiers]
    runs, values = tiered_runs(tiers, blocks, REPLICAS, savings)
    for run, value in zip(runs, values, strict=True):
        assert 0.0 <= value <= run + 1e-9


@given(st.lists(_index, min_size=2, max_size=4), _blocks)
def test_runs_are_the_cached_runs_of_the_union_of_tiers(
    tiers: list[dict[int, int]], blocks: list[int]
) -> None:
    union: dict[int, int] = {}
    for tier in tiers:
        for block, mask in tier.items():
            union[block] = union.get(block, 0) | mask
    runs, _ = tiered_runs(tiers, blocks, REPLICAS, [1.0] * len(tiers))
    assert runs == cached_runs(union, blocks, REPLICAS)


@given(st.lists(_index, min_size=2, max_size=4), _blocks, st.data())
def test_values_sum_the_fastest_tier_per_block(
    tiers: list[dict[int, int]], blocks: list[int], data: st.DataObject
) -> None:
    savings = [data.draw(_savings) for _ in tiers]
    runs, values = tiered_runs(tiers, blocks, REPLICAS, savings)
    for replica in range(REPLICAS):
        bit = 1 << replica
        expected = 0.0
        for block in blocks[: runs[replica]]:
            fastest = next(t for t, tier in enumerate(tiers) if tier.get(block, 0) & bit)
            expected += savings[fastest]
        assert values[replica] == pytest.approx(expected)


@given(
    st.lists(_index, min_size=1, max_size=3),
    _blocks,
    st.integers(0, 2),
    st.integers(0, 7),
    st.integers(0, (1 << REPLICAS) - 1),
)
def test_more_tiers_holding_a_block_never_shorten_a_run(
    tiers: list[dict[int, int]], blocks: list[int], tier: int, block: int, mask: int
) -> None:
    savings = [1.0, 0.5, 0.25][: len(tiers)]
    before, _ = tiered_runs(tiers, blocks, REPLICAS, savings)
    more = [dict(t) for t in tiers]
    target = more[tier % len(more)]
    target[block] = target.get(block, 0) | mask
    after, _ = tiered_runs(more, blocks, REPLICAS, savings)
    assert all(a >= b for a, b in zip(after, before, strict=True))
