"""The trace simulator: caches, oracles, load model, policies and the analyze command."""

import argparse
import json
import math
import random
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.cli import analyze as analyze_command
from prefixkit.engine_adapter import TraceError
from prefixkit.engine_adapter.replay.cache_sim import ReplicaCaches, oracle_hits
from prefixkit.engine_adapter.replay.policies import SmgLike
from prefixkit.engine_adapter.replay.replay import LoadParams, analyze, replay
from prefixkit.engine_adapter.replay.replica_load import ReplicaLoad
from prefixkit.engine_adapter.replay.trace import (
    Trace,
    load_trace,
    trace_from_token_ids,
)
from prefixkit.engine_adapter.routing.policy import (
    PreciseParams,
    WorkShares,
    cached_runs,
    choose_replica,
)

LOAD = LoadParams(prefill_s_per_block=0.001, decode_s_per_token=0.0)

# prompts as chains: request = (conversation, turns so far) -> ids of its blocks
prompts = st.lists(st.tuples(st.integers(0, 5), st.integers(1, 6)), min_size=1, max_size=60).map(
    lambda reqs: [[c * 100 + k for k in range(n)] for c, n in reqs]
)


def _trace(blocks: list[list[int]], block_size: int = 4) -> Trace:
    trace = Trace(block_size)
    for i, b in enumerate(blocks):
        trace.append(float(i * 10), len(b) * block_size, 8, b)
    return trace


def test_hit_is_the_leading_run_only() -> None:
    caches = ReplicaCaches(1, None)
    caches.admit([1, 2, 3], 0)
    assert caches.admit([1, 9, 3], 0) == 1


def test_lru_evicts_a_prompts_tail_before_its_head() -> None:
    caches = ReplicaCaches(1, 3)
    caches.admit([1, 2, 3], 0)
    caches.admit([7], 0)  # evicts one block: the tail (3), not the head (1)
    assert caches.cached_run([1, 2, 3], 0) == 2


@given(prompts, st.integers(1, 4), st.one_of(st.none(), st.integers(1, 30)))
@settings(max_examples=60, deadline=None)
def test_holders_index_always_matches_the_lrus(
    blocks: list[list[int]], replicas: int, capacity: int | None
) -> None:
    caches = ReplicaCaches(replicas, capacity)
    for i, b in enumerate(blocks):
        caches.admit(b, i % replicas, i)
    for r in range(replicas):
        assert all((caches.holders[blk] >> r) & 1 for blk, _ in caches.oldest(r))
        if capacity is not None:
            assert caches.held(r) <= capacity
    assert sum(bin(m).count("1") for m in caches.holders.values()) == sum(
        caches.held(r) for r in range(replicas)
    )


def _reference_admit(
    lru: OrderedDict[int, int], blocks: list[int], capacity: int | None, stamp: int
) -> int:
    """The plain LRU the grouped caches must equal: touch the blocks tail to head, evict the oldest."""
    run = 0
    for block in blocks:
        if block not in lru:
            break
        run += 1
    for block in reversed(blocks):
        lru.pop(block, None)
        lru[block] = stamp
    while capacity is not None and len(lru) > capacity:
        lru.popitem(last=False)
    return run


def _reference_newest_evicted(
    lru: OrderedDict[int, int], capacity: int | None, length: int
) -> tuple[int, float]:
    if capacity is None:
        return 0, -math.inf
    stamps = list(lru.values())
    evicted = len(stamps) + length - capacity
    if evicted <= 0 or not stamps:
        return max(evicted, 0), min(evicted, 0) - 1.0
    return evicted, stamps[min(evicted, len(stamps)) - 1]


def _assert_same_as_reference(
    caches: ReplicaCaches, reference: list[OrderedDict[int, int]], capacity: int | None
) -> None:
    for replica, lru in enumerate(reference):
        assert list(caches.oldest(replica)) == list(lru.items())
        assert caches.held(replica) == len(lru)
        for length in range(12):
            assert caches.newest_evicted(replica, 0, length) == _reference_newest_evicted(
                lru, capacity, length
            )
    every_block = {block for lru in reference for block in lru}
    assert caches.holders == {
        block: sum(1 << r for r, lru in enumerate(reference) if block in lru)
        for block in every_block
    }


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.lists(st.integers(0, 12), max_size=8),
            st.integers(0, 9).map(lambda draw: draw == 0),  # a restart first, one in ten
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([None, 1, 3, 8]),
)
@settings(max_examples=150, deadline=None)
def test_caches_equal_a_plain_lru_touched_tail_to_head(
    requests: list[tuple[int, list[int], bool]], capacity: int | None
) -> None:
    # any block lists: repeated blocks within a request, shared ones across replicas, restarts
    caches = ReplicaCaches(3, capacity)
    reference: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(3)]
    for stamp, (replica, blocks, restart) in enumerate(requests):
        if restart:
            caches.clear(replica)
            reference[replica].clear()
        expected = _reference_admit(reference[replica], blocks, capacity, stamp)
        assert caches.admit(blocks, replica, stamp) == expected
        _assert_same_as_reference(caches, reference, capacity)


def test_caches_equal_a_plain_lru_over_thousands_of_admits() -> None:
    # long enough for the groups left behind to be dropped, several times
    rng = random.Random(7)
    caches = ReplicaCaches(2, 6)
    reference: list[OrderedDict[int, int]] = [OrderedDict(), OrderedDict()]
    for stamp in range(6000):
        replica = rng.randrange(2)
        blocks = [rng.randrange(40) for _ in range(rng.randrange(1, 5))]
        expected = _reference_admit(reference[replica], blocks, 6, stamp)
        assert caches.admit(blocks, replica, stamp) == expected
        if stamp % 97 == 0:
            _assert_same_as_reference(caches, reference, 6)
    _assert_same_as_reference(caches, reference, 6)


def test_newest_evicted_after_admits_that_evict_or_reuse_the_oldest_blocks() -> None:
    caches = ReplicaCaches(1, 4)
    caches.admit([1, 2], 0, 0)
    caches.admit([3, 4], 0, 1)  # LRU order 2, 1, 4, 3
    assert caches.newest_evicted(0, 0, 1) == (1, 0)  # block 2
    caches.admit([5], 0, 2)  # evicts block 2: 1, 4, 3, 5
    assert caches.newest_evicted(0, 0, 1) == (1, 0)  # block 1
    assert caches.newest_evicted(0, 0, 3) == (3, 1)  # blocks 1, 4, 3
    caches.admit([1], 0, 3)  # reuses block 1: 4, 3, 5, 1
    assert caches.newest_evicted(0, 0, 1) == (1, 1)  # block 4


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 90)), min_size=1, max_size=30),
    st.sampled_from([5, 70, 150]),
    st.integers(0, 100),
)
@settings(max_examples=60, deadline=None)
def test_newest_evicted_follows_the_lru_order_after_every_admit(
    requests: list[tuple[int, int]], capacity: int, ask: int
) -> None:
    caches = ReplicaCaches(2, capacity)
    for i, (conversation, length) in enumerate(requests):
        caches.admit([conversation * 1000 + k for k in range(length)], i % 2, i)
        for replica in (0, 1):
            stamps = [stamp for _, stamp in caches.oldest(replica)]
            for length in (ask, capacity - len(stamps) + 1):  # and exactly one block evicted
                evicted = len(stamps) + length - capacity
                if evicted > 0 and stamps:
                    expected = (evicted, stamps[min(evicted, len(stamps)) - 1])
                    assert caches.newest_evicted(replica, 0, length) == expected


@given(prompts, st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_cached_runs_equal_per_replica_walks(blocks: list[list[int]], replicas: int) -> None:
    caches = ReplicaCaches(replicas, 12)
    for i, b in enumerate(blocks):
        caches.admit(b, i % replicas)
        probe = blocks[(i * 7) % len(blocks)]
        assert cached_runs(caches.holders, probe, replicas) == [
            caches.cached_run(probe, r) for r in range(replicas)
        ]


@given(prompts, st.sampled_from(["round_robin", "consistent_hash", "smg_like", "precise"]))
@settings(max_examples=30, deadline=None)
def test_no_policy_beats_the_infinite_oracle(blocks: list[list[int]], policy: str) -> None:
    trace = _trace(blocks)
    infinite = sum(oracle_hits(blocks, None))
    result = replay(trace, policy, 3, 10, LOAD)
    assert result.prefill_tokens_saved <= infinite * trace.block_size
    assert 0.0 <= result.hit_rate <= 1.0


@given(prompts)
@settings(max_examples=30, deadline=None)
def test_one_replica_with_room_hits_the_infinite_oracle(blocks: list[list[int]]) -> None:
    trace = _trace(blocks)
    result = replay(trace, "precise", 1, None, LOAD)
    assert result.prefill_tokens_saved == sum(oracle_hits(blocks, None)) * trace.block_size


def test_precise_ties_are_not_broken_toward_replica_zero() -> None:
    params = PreciseParams()
    picks = {choose_replica([0, 0, 0], [0.0] * 3, [0] * 3, params, turn) for turn in range(6)}
    assert picks == {0, 1, 2}


def test_precise_prefers_the_longest_cached_run() -> None:
    assert choose_replica([1, 9, 3], [0.0] * 3, [0, 0, 0], PreciseParams(), 0) == 1


def test_precise_spills_over_when_the_best_replica_is_overloaded() -> None:
    params = PreciseParams(load_factor=1.25, spill_slack=0)
    assert choose_replica([50, 0], [0.0, 0.0], [9, 0], params, 0) == 1


def _evictions(costs: list[float], stamps: list[float]) -> Callable[[int], tuple[float, float]]:
    return lambda replica: (costs[replica], stamps[replica])


def test_precise_prefers_evicting_older_blocks_among_equals() -> None:
    eviction = _evictions([0.0, 0.0], [50.0, 10.0])
    assert choose_replica([2, 2], [0.0, 0.0], [0, 0], PreciseParams(), 0, eviction) == 1


def test_precise_gives_up_a_longer_run_to_spare_soon_wanted_blocks() -> None:
    # replica 0 saves one more block but would evict 2 blocks' worth of likely reuse
    eviction = _evictions([2.0, 0.0], [0.0, 0.0])
    assert choose_replica([5, 4], [0.0, 0.0], [0, 0], PreciseParams(), 0, eviction) == 1


def test_precise_asks_the_eviction_cost_only_of_replicas_that_can_still_win() -> None:
    asked: list[int] = []

    def eviction(replica: int) -> tuple[float, float]:
        asked.append(replica)
        return 1.0, 0.0

    # costs are never negative: replica 1 (run 2) cannot beat replica 0 (run 9, cost 1)
    assert choose_replica([9, 2, 9], [0.0] * 3, [0] * 3, PreciseParams(), 0, eviction) == 0
    assert asked == [0, 2]


def test_precise_keeps_to_the_work_budget_when_a_replica_is_within_it() -> None:
    assert choose_replica([9, 0], [0.0] * 2, [0, 0], PreciseParams(), 0, None, [False, True]) == 1


def test_precise_ignores_the_work_budget_when_no_replica_is_within_it() -> None:
    assert choose_replica([9, 0], [0.0] * 2, [0, 0], PreciseParams(), 0, None, [False, False]) == 0


def test_precise_load_bound_outranks_the_work_budget() -> None:
    # replica 1 is the only one within budget but at its load bound: replica 0 it is
    params = PreciseParams(load_factor=1.0, spill_slack=0)
    assert choose_replica([0, 9], [0.0] * 2, [0, 4], params, 0, None, [False, True]) == 0


def test_precise_spreads_new_prefixes_over_replicas_with_room() -> None:
    # four tenants, each request sent twice in a row (nothing in flight), three fit in
    # a replica: a rotating tie-break alone sends new tenants to the same replica
    # until it is full (3 + 1); each goes where the most blocks are free instead
    tenants = [[t * 100 + k for k in range(10)] for t in range(4)]
    requests = [
        [*tenant, t * 100 + 50 + turn] for turn in range(2) for t, tenant in enumerate(tenants)
    ]
    result = replay(
        _trace([r for r in requests for _ in range(2)]), "precise", 2, 24, LoadParams(0.0, 0.0)
    )
    first = result.assignments[0:8:2]
    assert sorted(first.count(r) for r in (0, 1)) == [2, 2]
    assert result.assignments[8:16:2] == first


def test_smg_like_follows_the_first_tenant_of_the_matched_prefix() -> None:
    load = ReplicaLoad(2, 0.0, 0.0)
    smg = SmgLike(2, load)
    assert smg.choose([1, 2, 3], 0.0) == 0
    assert smg.choose([7, 8, 9], 0.0) == 1  # miss: least processed
    assert smg.choose([1, 2, 3, 4], 0.0) == 0  # 3/4 matched > 0.3: the owner


def test_smg_like_misses_below_the_cache_threshold() -> None:
    load = ReplicaLoad(2, 0.0, 0.0)
    smg = SmgLike(2, load)
    smg.choose([1, 2], 0.0)
    assert smg.choose([1, 5, 6, 7], 0.0) == 1  # 1/4 = 0.25 <= 0.3: least loaded


def test_smg_like_remembers_routes_the_engine_evicted() -> None:
    trace = _trace([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4, 9]])
    result = replay(trace, "smg_like", 2, 4, LOAD)
    assert result.assignments[2] == result.assignments[0]


def test_load_model_counts_requests_until_decode_ends() -> None:
    model = ReplicaLoad(1, prefill_s_per_block=1.0, decode_s_per_token=0.5)
    model.dispatch(0, 0.0, uncached_blocks=2, output_tokens=4)
    model.advance(3.9)
    assert model.inflight == [1]
    assert model.queued_blocks(0, 1.0) == 1.0
    model.advance(4.0)
    assert model.inflight == [0]


def test_mooncake_trace_loads_hash_ids(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 5, "input_length": 700, "output_length": 3, "hash_ids": [0, 1]}\n'
    )
    trace = load_trace(path)
    assert (trace.block_size, trace.blocks, trace.timestamps_ms) == (512, [[0, 1]], [5.0])


def test_token_id_logs_share_blocks_only_within_a_salt() -> None:
    tokens = list(range(40))
    trace = trace_from_token_ids(
        [{"token_ids": tokens}, {"token_ids": tokens}, {"token_ids": tokens, "cache_salt": "t"}], 16
    )
    assert trace.blocks[0] == trace.blocks[1]
    assert not set(trace.blocks[0]) & set(trace.blocks[2])


def test_unknown_trace_format_names_the_expected_keys(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"foo": 1}\n')
    with pytest.raises(TraceError, match="hash_ids"):
        load_trace(path)


def test_a_line_that_is_not_json_carries_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"token_ids": [1, 2]}\n\n{"token_ids": [1,\n')
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert (caught.value.path, caught.value.line) == (path, 3)


def test_a_chat_log_is_tokenized_with_its_template_and_shares_its_system_prompt(
    tmp_path: Path, hf_tokenizer_dir: Path
) -> None:
    system = "Customers ask about buckets, volumes and invoices. " * 30
    records = [
        {"messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}
        for q in ("How much is egress?", "Where is my invoice?")
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    trace = load_trace(path, tokenizer=str(hf_tokenizer_dir), block_size=16)
    shared = next(i for i, (a, b) in enumerate(zip(*trace.blocks, strict=False)) if a != b)
    assert shared >= 10  # the system prompt's blocks, not a handful of field names


def test_prompt_logs_without_tokenizer_say_how_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"prompt": "hello"}\n')
    with pytest.raises(TraceError, match="--tokenizer"):
        load_trace(path)


def test_analyze_reports_oracles_and_every_policy() -> None:
    blocks = [[c * 100 + k for k in range(n)] for c, n in [(0, 2), (1, 3), (0, 4), (1, 5)] * 5]
    analysis = analyze(_trace(blocks), 2, 6, LOAD)
    assert [r.policy for r in analysis.results] == [
        "round_robin",
        "consistent_hash",
        "smg_like",
        "precise",
    ]
    assert analysis.oracle_capacity <= analysis.oracle_infinite


def test_analyze_command_json_lists_policy_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps(
            {
                "timestamp": i * 100,
                "input_length": 1024,
                "output_length": 10,
                "hash_ids": [0, i % 3 + 1],
            }
        )
        for i in range(30)
    ]
    path.write_text("\n".join(lines))
    parser = argparse.ArgumentParser()
    analyze_command.configure(parser)
    plot = tmp_path / "p.png"
    code = analyze_command.run(
        parser.parse_args([str(path), "--replicas", "2", "--format", "json", "--plot", str(plot)])
    )
    assert code == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in results] == [
        "round_robin",
        "consistent_hash",
        "smg_like",
        "precise",
    ]
    assert all({"policy", "hit_rate", "oracle_ratio", "imbalance"} <= r.keys() for r in results)
    assert plot.stat().st_size > 0


def test_analyze_command_table_ends_with_a_recommendation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {"timestamp": i, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}
            )
            for i in range(10)
        )
    )
    parser = argparse.ArgumentParser()
    analyze_command.configure(parser)
    assert analyze_command.run(parser.parse_args([str(path), "--replicas", "2"])) == 0
    out = capsys.readouterr().out
    assert "Caching pays" in out and "smg_like" in out


def test_smg_like_eviction_is_per_replica_and_leaf_first() -> None:
    load = ReplicaLoad(2, 0.0, 0.0)
    smg = SmgLike(2, load, max_tree_blocks=3, eviction_interval_s=1.0)
    smg.choose([1, 2, 3], 0.0)  # replica 0
    smg.choose([7, 8], 0.0)  # replica 1: its own budget, never trimmed
    smg.choose([1, 2, 3, 4, 5], 2.0)  # replica 0 holds 5 > 3: evict its oldest leaves
    assert smg.stamps[0].keys() == {1, 2, 3}  # the deepest blocks went, the head stayed
    assert smg.stamps[1].keys() == {7, 8}


def test_smg_like_evicts_the_least_recently_used_leaf() -> None:
    load = ReplicaLoad(1, 0.0, 0.0)
    smg = SmgLike(1, load, max_tree_blocks=4, eviction_interval_s=1.0)
    smg.choose([1, 2, 3], 0.0)
    smg.choose([1, 5, 6], 0.0)
    smg.choose([1, 2, 3, 9], 2.0)  # the branch 5-6 is older than 2-3-9: it goes
    assert smg.stamps[0].keys() == {1, 2, 3, 9}


@given(prompts, st.integers(1, 3), st.integers(1, 8))
@settings(max_examples=60, deadline=None)
def test_smg_like_eviction_keeps_every_replicas_paths_whole(
    blocks: list[list[int]], replicas: int, limit: int
) -> None:
    smg = SmgLike(replicas, ReplicaLoad(replicas, 0.0, 0.0), max_tree_blocks=limit)
    for i, b in enumerate(blocks):
        smg.choose(b, 30.0 * i)  # an eviction round every other request
    smg._evict()
    for r, stamps in enumerate(smg.stamps):
        # leaf-first: a replica never keeps a block without the blocks before it
        assert all(smg.parent[b] in stamps for b in stamps if smg.parent[b] >= 0)
        assert all((smg.tree[b] >> r) & 1 for b in stamps)
        assert len(stamps) <= limit
    assert sum(bin(m).count("1") for m in smg.tree.values()) == sum(map(len, smg.stamps))


def test_work_shares_allow_a_replica_one_cache_ahead_of_its_share() -> None:
    shares = WorkShares(2, 1.0, 10)
    shares.record(0, 10, 0)
    # replica 0 holds 10 of 10 blocks; with 10 more: share 10 + slack 10 = 20
    assert shares.within([0, 0], 10) == [True, True]
    shares.record(0, 10, 0)
    assert shares.within([0, 0], 10) == [False, True]
    assert shares.clock == 20  # blocks newly cached: the reuse model's clock


def test_work_shares_evenly_keep_a_prefix_held_nowhere_off_replicas_above_the_mean() -> None:
    shares = WorkShares(2, 1.06, 64)
    shares.record(0, 11, 0)
    # the budget's slack of one cache allows either replica
    assert shares.within([0, 0], 11) == [True, True]
    assert shares.within([0, 0], 11, evenly=True) == [False, True]


def test_work_shares_evenly_leave_a_request_with_a_longer_run_somewhere_to_the_budget() -> None:
    shares = WorkShares(2, 1.06, 64)
    shares.record(0, 11, 0)
    assert shares.within([5, 0], 11, evenly=True) == [True, True]


def test_work_shares_refuse_a_balance_below_one() -> None:
    with pytest.raises(ValueError, match=r"at least 1\.0"):
        WorkShares(2, 0.9, 0)


def test_without_a_work_budget_the_load_terms_weigh_ten_times_more() -> None:
    # 4 running requests: 0.4 blocks against a 3-block run with a budget, 4 without
    runs, queued, inflight = [3, 0], [0.0, 0.0], [4, 0]
    assert choose_replica(runs, queued, inflight, PreciseParams(), 0, None, [True, True]) == 0
    assert choose_replica(runs, queued, inflight, PreciseParams(), 0) == 1
