"""The tiered replay: hand-computed small cases, the single-tier replay it extends, and
its invariants."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.replay.replay import LoadParams, replay
from prefixkit.engine_adapter.replay.trace import Trace, load_trace
from prefixkit.engine_adapter.tiers.fetch import FetchRule, Tier
from prefixkit.engine_adapter.tiers.simulate import (
    TierSetup,
    read_salts,
    salted,
    simulate_tiers,
)
from prefixkit.sdk import UsageError

from tests.conftest import MOONCAKE_TRACE

# 4-token blocks, 1 byte per token, 4 tokens/s: a block takes 1 s to compute
BLOCK = 4
LOAD = LoadParams(prefill_s_per_block=1.0, decode_s_per_token=0.0)


def setup(
    gpu: int, cpu: int = 0, disk: int = 0, *, cpu_rate: float = 8.0, rule: FetchRule = "always_load"
) -> TierSetup:
    """Tiers of `gpu`, `cpu`, `disk` blocks; a CPU block loads in 4 / cpu_rate s, a disk
    block in 4 / 2 s more."""
    return TierSetup(
        (
            Tier("GPU", gpu * BLOCK),
            Tier("CPU", cpu * BLOCK, (cpu_rate,)),
            Tier("DISK", disk * BLOCK, (2.0, cpu_rate)),
        ),
        bytes_per_token=1.0,
        prefill_tokens_per_s=4.0,
        rule=rule,
    )


def trace_of(*requests: list[int], gap_ms: float = 10_000.0) -> Trace:
    trace = Trace(BLOCK)
    for index, blocks in enumerate(requests):
        trace.append(index * gap_ms, BLOCK * len(blocks), 0, blocks)
    return trace


def test_a_block_the_gpu_evicted_is_served_from_the_cpu() -> None:
    # the first request leaves blocks 1, 2 in the GPU (its tail, 3, leaves first) and
    # 1, 2, 3 in the CPU; the second finds 1, 2 in the GPU and 3 in the CPU
    result = simulate_tiers(
        trace_of([1, 2, 3], [1, 2, 3]), setup(2, 4), 1, LOAD, policy="round_robin"
    )
    assert result.hit_tokens == (8, 4, 0)
    assert result.capacity_blocks == (2, 4, 0)
    assert result.savings == (1.0, 0.5, -1.5)  # CPU: 0.5 s to fetch a 1 s block
    # 8 tokens x 0.25 s x 1.0 + 4 tokens x 0.25 s x 0.5
    assert result.prefill_seconds_saved == pytest.approx(2.5)
    # the first computes 3 blocks; the second only fetches one (0.5 s)
    assert result.ttft_s == pytest.approx([3.0, 0.5])


def test_a_block_only_the_disk_holds_is_promoted_and_served_from_it() -> None:
    # GPU and CPU keep one block each (the head); the disk keeps all three
    first = [1, 2, 3]
    result = simulate_tiers(
        trace_of(first, first, first), setup(1, 1, 3), 1, LOAD, policy="round_robin"
    )
    # the second: 1 from the GPU, 2 and 3 from the disk; the third the same (the
    # promoted blocks were stored in every tier, whose LRUs keep the head)
    assert result.hit_tokens == (8, 0, 16)


def test_a_partial_last_block_counts_its_own_tokens() -> None:
    trace = Trace(BLOCK)
    trace.append(0.0, 10, 0, [1, 2, 3])  # 4 + 4 + 2 tokens
    trace.append(10_000.0, 10, 0, [1, 2, 3])
    result = simulate_tiers(trace, setup(2, 4), 1, LOAD, policy="round_robin")
    assert result.hit_tokens == (8, 2, 0)
    assert result.prompt_tokens == 20


def test_a_tier_slower_than_recompute_costs_time_when_every_hit_is_loaded() -> None:
    # CPU at 2 bytes/s: 2 s to fetch a block that takes 1 s to compute
    result = simulate_tiers(
        trace_of([1, 2], [1, 2]), setup(1, 2, cpu_rate=2.0), 1, LOAD, policy="round_robin"
    )
    assert result.savings[1] == -1.0
    assert result.hit_tokens == (4, 4, 0)
    assert result.ttft_s == pytest.approx([2.0, 2.0])  # the second waits 2 s for block 2
    assert result.prefill_seconds_saved == pytest.approx(1.0 - 1.0)


def test_fetching_only_when_faster_recomputes_a_slow_tier_s_hits() -> None:
    result = simulate_tiers(
        trace_of([1, 2], [1, 2]),
        setup(1, 2, cpu_rate=2.0, rule="when_faster"),
        1,
        LOAD,
        policy="round_robin",
    )
    assert result.hit_tokens == (4, 0, 0)
    assert result.declined_tokens == 4
    assert result.ttft_s == pytest.approx([2.0, 1.0])  # block 2 computed again: 1 s


def test_a_request_waits_for_the_prefill_before_it_on_its_replica() -> None:
    result = simulate_tiers(
        trace_of([1, 2, 3], [4, 5], gap_ms=1_000.0), setup(8), 1, LOAD, policy="round_robin"
    )
    # the second arrives at 1 s, the first's prefill ends at 3 s: then 2 s of its own
    assert result.ttft_s == pytest.approx([3.0, 4.0])


def test_requests_of_different_salts_share_no_block() -> None:
    trace = salted(trace_of([1, 2], [1, 2], [1, 2]), ["a", "b", "a"])
    result = simulate_tiers(trace, setup(8, 8, 8), 1, LOAD, policy="round_robin")
    assert result.hit_tokens == (8, 0, 0)  # only the third, after the first


def test_salts_are_read_from_cache_salt_or_tenant(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"token_ids": [1], "cache_salt": "s"}\n\n{"token_ids": [1], "tenant": 7}\n'
        '{"token_ids": [1]}\n'
    )
    assert read_salts(path) == ["s", "7", None]
    assert read_salts(path, limit=1) == ["s"]


def test_a_trace_without_salts_has_none() -> None:
    assert read_salts(MOONCAKE_TRACE, limit=50) is None


@pytest.mark.parametrize("policy", ["round_robin", "consistent_hash", "smg_like", "precise"])
def test_with_the_lower_tiers_at_zero_it_is_the_single_tier_replay(policy: str) -> None:
    trace = load_trace(MOONCAKE_TRACE, limit=3000)
    load = LoadParams(512 / 10_000, 1 / 30)
    capacity = 200
    single = replay(trace, policy, 4, capacity, load, max_tree_blocks=2000)
    tiers = TierSetup(
        (Tier("GPU", capacity * 512 * 1000), Tier("CPU", 0, (1e9,)), Tier("DISK", 0, (1e8,))),
        bytes_per_token=1000.0,
        prefill_tokens_per_s=10_000.0,
    )
    result = simulate_tiers(trace, tiers, 4, load, policy=policy, max_tree_blocks=2000)
    assert result.assignments == single.assignments
    assert result.hit_rate == pytest.approx(single.hit_rate, abs=1e-12)
    assert result.prefill_tokens_saved == single.prefill_tokens_saved
    assert result.hit_tokens[1:] == (0, 0)


def test_tier_aware_routing_over_the_gpu_alone_is_precise_routing() -> None:
    trace = load_trace(MOONCAKE_TRACE, limit=1500)
    tiers = TierSetup((Tier("GPU", 100 * 512),), bytes_per_token=1.0, prefill_tokens_per_s=1e4)
    load = LoadParams(512 / 10_000, 1 / 30)
    blind = simulate_tiers(trace, tiers, 4, load, policy="precise")
    aware = simulate_tiers(trace, tiers, 4, load, policy="precise_tiered")
    assert aware.assignments == blind.assignments


def test_an_unknown_policy_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"choose from round_robin, .*precise_tiered"):
        simulate_tiers(trace_of([1]), setup(1), 1, LOAD, policy="best")


def test_a_gpu_tier_smaller_than_a_block_is_refused() -> None:
    with pytest.raises(ValueError, match="GPU tier holds no block"):
        simulate_tiers(trace_of([1]), setup(0), 1, LOAD)


requests = st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=40)


def random_trace(blocks: list[list[int]]) -> Trace:
    trace = Trace(BLOCK)
    for index, request in enumerate(blocks):
        trace.append(index * 500.0, BLOCK * len(request) - index % 3, 0, request)
    return trace


@settings(max_examples=60, deadline=None)
@given(
    blocks=requests,
    gpu=st.integers(1, 6),
    cpu=st.integers(0, 10),
    more=st.integers(1, 10),
    disk=st.integers(0, 10),
    replicas=st.integers(1, 3),
)
def test_a_bigger_lower_tier_never_lowers_the_hit_rate_under_the_same_routing(
    blocks: list[list[int]], gpu: int, cpu: int, more: int, disk: int, replicas: int
) -> None:
    trace = random_trace(blocks)
    small = simulate_tiers(trace, setup(gpu, cpu, disk), replicas, LOAD, policy="round_robin")
    larger_cpu = simulate_tiers(
        trace, setup(gpu, cpu + more, disk), replicas, LOAD, policy="round_robin"
    )
    larger_disk = simulate_tiers(
        trace, setup(gpu, cpu, disk + more), replicas, LOAD, policy="round_robin"
    )
    assert larger_cpu.prefill_tokens_saved >= small.prefill_tokens_saved
    assert larger_disk.prefill_tokens_saved >= small.prefill_tokens_saved


@settings(max_examples=60, deadline=None)
@given(
    blocks=requests,
    sizes=st.tuples(st.integers(1, 6), st.integers(0, 10), st.integers(0, 10)),
    policy=st.sampled_from(
        ["round_robin", "consistent_hash", "smg_like", "precise", "precise_tiered"]
    ),
    rule=st.sampled_from(["always_load", "when_faster"]),
    cpu_rate=st.sampled_from([2.0, 8.0]),
)
def test_tokens_saved_never_exceed_the_prompt_tokens(
    blocks: list[list[int]],
    sizes: tuple[int, int, int],
    policy: str,
    rule: FetchRule,
    cpu_rate: float,
) -> None:
    trace = random_trace(blocks)
    result = simulate_tiers(
        trace, setup(*sizes, cpu_rate=cpu_rate, rule=rule), 2, LOAD, policy=policy
    )
    assert all(h >= 0 for h in result.hit_tokens)
    assert result.prefill_tokens_saved + result.declined_tokens <= trace.total_input_tokens
    assert 0.0 <= result.hit_rate <= 1.0
    assert all(t >= 0.0 for t in result.ttft_s)


@settings(max_examples=60, deadline=None)
@given(
    blocks=requests,
    sizes=st.tuples(st.integers(1, 6), st.integers(0, 10), st.integers(0, 10)),
    cpu_rate=st.sampled_from([2.0, 8.0]),
)
def test_loading_only_when_faster_never_saves_less_under_the_same_routing(
    blocks: list[list[int]], sizes: tuple[int, int, int], cpu_rate: float
) -> None:
    trace = random_trace(blocks)
    always = simulate_tiers(trace, setup(*sizes, cpu_rate=cpu_rate), 2, LOAD, policy="round_robin")
    faster = simulate_tiers(
        trace, setup(*sizes, cpu_rate=cpu_rate, rule="when_faster"), 2, LOAD, policy="round_robin"
    )
    assert faster.prefill_seconds_saved >= always.prefill_seconds_saved - 1e-9


@settings(max_examples=60, deadline=None)
@given(
    blocks=requests,
    sizes=st.tuples(st.integers(1, 6), st.integers(0, 10), st.integers(0, 10)),
    policy=st.sampled_from(["round_robin", "precise", "precise_tiered"]),
)
def test_requests_of_distinct_salts_never_hit_each_other_s_blocks(
    blocks: list[list[int]], sizes: tuple[int, int, int], policy: str
) -> None:
    # one salt per request and no block repeated within a request: nothing is shared
    distinct = [list(dict.fromkeys(request)) for request in blocks]
    trace = salted(random_trace(distinct), [str(i) for i in range(len(distinct))])
    result = simulate_tiers(trace, setup(*sizes), 2, LOAD, policy=policy)
    assert result.prefill_tokens_saved == 0


def slow_disk_setup(scale: float = 1.0) -> TierSetup:
    """An 8B-like model at 60,000 tokens/s: a disk block (NVMe, then PCIe) takes longer
    to fetch than to compute; `scale` multiplies every link's bandwidth."""
    return TierSetup(
        (
            Tier("GPU", 40 * 512 * 131072),
            Tier("CPU", 0, (31.5e9 * scale,)),
            Tier("DISK", 2**40, (7e9 * scale, 31.5e9 * scale)),
        ),
        bytes_per_token=131072.0,
        prefill_tokens_per_s=60_000.0,
    )


def test_the_tier_aware_router_avoids_loading_from_a_tier_slower_than_recompute() -> None:
    trace = load_trace(MOONCAKE_TRACE, limit=2000)
    load = LoadParams(512 / 60_000, 1 / 30)
    setup = slow_disk_setup()
    assert setup.savings(512)[2] < 0
    blind = simulate_tiers(trace, setup, 4, load, policy="precise")
    aware = simulate_tiers(trace, setup, 4, load, policy="precise_tiered")
    assert aware.hit_tokens[2] < blind.hit_tokens[2] / 2
    assert aware.prefill_seconds_saved > blind.prefill_seconds_saved


def test_a_router_misestimating_the_bandwidths_weighs_blocks_by_what_it_believes() -> None:
    trace = load_trace(MOONCAKE_TRACE, limit=2000)
    load = LoadParams(512 / 60_000, 1 / 30)
    setup = slow_disk_setup()
    knows = simulate_tiers(trace, setup, 4, load, policy="precise_tiered")
    same = simulate_tiers(trace, setup, 4, load, policy="precise_tiered", router_setup=setup)
    # believing links 4x as fast, the disk looks faster than recompute: it loads from it
    hopeful = simulate_tiers(
        trace, setup, 4, load, policy="precise_tiered", router_setup=slow_disk_setup(4.0)
    )
    assert same.assignments == knows.assignments
    assert hopeful.hit_tokens[2] > 2 * knows.hit_tokens[2]
    # what the hits saved is timed with the true bandwidths
    assert hopeful.savings == knows.savings


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"bytes_per_token": float("nan")}, "bytes_per_token"),
        ({"bytes_per_token": -1.0}, "bytes_per_token"),
        ({"prefill_tokens_per_s": float("inf")}, "prefill_tokens_per_s"),
        ({"prefill_tokens_per_s": 0.0}, "prefill_tokens_per_s"),
        ({"rule": "sometimes"}, "rule"),
    ],
)
def test_a_setup_that_cannot_be_timed_is_refused_naming_the_field(
    change: dict[str, object], field: str
) -> None:
    args: dict[str, object] = {
        "tiers": setup(1).tiers,
        "bytes_per_token": 1.0,
        "prefill_tokens_per_s": 4.0,
        **change,
    }
    with pytest.raises(UsageError, match=field) as info:
        TierSetup(**args)  # type: ignore[arg-type]
    assert info.value.argument == field


def test_lower_tiers_not_fastest_first_are_refused() -> None:
    gpu, cpu, disk = setup(1, 1, 1).tiers
    with pytest.raises(UsageError, match="give the tiers fastest first") as info:
        TierSetup((gpu, disk, cpu), bytes_per_token=1.0, prefill_tokens_per_s=4.0)
    assert (info.value.argument, info.value.value) == ("tiers", "CPU")
