"""The live precise router's state: the blocks of requests in flight, and the same
decisions as the simulated precise policy `analyze` replays.

The router's state (`RouterState`: the block index fed by KV events, the reuse
model, the work budget) is driven here as the engines would drive it: each
engine is a per-replica LRU like vLLM's (`ReplicaCaches`: a request's blocks
leave tail first), and after each decision the chosen one reports the blocks
it stored and removed. The router's load terms are set from the same load
model the replay uses. Given the same requests, the two must pick the same
replica every time.
"""

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.replay.cache_sim import ReplicaCaches
from prefixkit.engine_adapter.replay.replay import LoadParams, replay
from prefixkit.engine_adapter.replay.replica_load import ReplicaLoad
from prefixkit.engine_adapter.replay.trace import Trace, load_trace
from prefixkit.engine_adapter.routing.router_state import (
    RouterSettings,
    RouterState,
    parse_server_timing,
    server_timing,
)
from prefixkit.engine_adapter.serving.app import serving_app
from prefixkit.engine_adapter.serving.router import PreciseRoute
from prefixkit.sdk import event_block_hashes
from starlette.testclient import TestClient

from tests.conftest import MOONCAKE_TRACE

REPLICAS = 8
LOAD = LoadParams(0.001, 0.0, 25.0)  # bench/route_replay.py's load model


def _router(replicas: int, capacity: int | None = None) -> RouterState:
    return RouterState(
        RouterSettings(
            replica_urls=[f"http://127.0.0.1:{9000 + r}" for r in range(replicas)],
            kv_endpoints=[f"tcp://127.0.0.1:{9100 + r}" for r in range(replicas)],
            capacity_blocks=[capacity] * replicas if capacity is not None else (),
        )
    )


def test_a_request_in_flight_counts_its_blocks_as_coming_to_its_replica() -> None:
    state = _router(2)
    prompt = list(range(1, 17))
    first = state.route(prompt)
    assert first.run == 0
    # no KV event yet: the engine has not computed the blocks
    second = state.route([*prompt, 99])
    assert (second.replica, second.run) == (first.replica, 16)


def test_a_finished_request_leaves_its_replica_what_the_kv_events_said() -> None:
    state = _router(2)
    prompt = list(range(1, 17))
    placement = state.route(prompt)
    state.index.stored(placement.replica, prompt[:8])  # the engine stored half, then it ended
    state.finished(placement)
    expected = [0, 0]
    expected[placement.replica] = 8
    assert state.index.runs(prompt) == expected


def test_a_request_its_replica_refused_is_placed_again_as_the_same_request() -> None:
    state = _router(2)
    prompt = list(range(1, 17))
    first = state.route(prompt)
    again = state.unreachable(first)
    assert again is not None
    assert (again.replica, again.request) == (1 - first.replica, first.request)
    assert state.healthy[first.replica] is False
    assert state.inflight[first.replica] == 0 and state.queued_blocks[first.replica] == 0.0
    assert state.index.runs(prompt)[first.replica] == 0  # nothing coming there any more
    assert state.unreachable(again) is None  # no healthy replica left


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True),
        st.integers(0, 10**9).map(lambda micro: micro / 1000),
        max_size=4,
    )
)
def test_server_timing_reads_back_the_durations_it_was_given(durations: dict[str, float]) -> None:
    assert parse_server_timing(server_timing(durations)) == durations


def test_router_state_shows_the_blocks_coming_to_each_replica() -> None:
    state = _router(2)
    app = serving_app(PreciseRoute(state))
    state.index.stored(0, range(1, 5))
    state.index.sent(0, list(range(1, 9)))  # in flight: 4 blocks held, 4 still coming
    body = TestClient(app).get("/router/state").json()  # no lifespan: no sockets opened
    assert (body["held_blocks"], body["coming_blocks"]) == ([4, 0], [4, 0])


def test_a_decision_record_shows_what_each_replica_offered() -> None:
    state = _router(2, capacity=20)
    state.index.stored(0, range(1, 17))  # replica 0 holds the prompt's 16 blocks ...
    state.index.stored(0, range(100, 104))  # ... and 4 others: it is full
    state.inflight[1] = 3
    records: list[dict[str, Any]] = []
    state.decision_sink = records.append
    replica = state.route([*range(1, 17), 50, 51, 52]).replica
    (record,) = records
    json.dumps(record, allow_nan=False)  # one JSON line as it is logged
    assert (record["replica"], record["blocks"], record["informed"]) == (replica, 19, False)
    offered = {c["replica"]: (c["run"], c["inflight"], c["evicts"]) for c in record["candidates"]}
    # the 3 new blocks evict 3 on the full replica 0; the empty replica 1 has room
    assert offered == {0: (16, 0, 3), 1: (0, 3, 0)}
    assert record["candidates"][0]["eviction_cost"] > 0 == record["candidates"][1]["eviction_cost"]


def _full_blocks_only(trace: Trace) -> Trace:
    """The trace with every block full: engines hash (and report) full blocks only."""
    return replace(trace, input_lengths=[len(b) * trace.block_size for b in trace.blocks])


def _held(engines: ReplicaCaches, replica: int) -> set[int]:
    return {block for block, _ in engines.oldest(replica)}


def _live_assignments(trace: Trace, capacity: int | None) -> list[int]:
    state = _router(REPLICAS, capacity)
    index = state.index
    engines = ReplicaCaches(REPLICAS, capacity)
    load = ReplicaLoad(REPLICAS, LOAD.prefill_s_per_block, LOAD.decode_s_per_token)
    assignments = []
    for arrival_ms, blocks, output in zip(
        trace.timestamps_ms, trace.blocks, trace.output_lengths, strict=True
    ):
        now = arrival_ms / 1000.0 / LOAD.time_scale
        load.advance(now)
        state.inflight[:] = load.inflight
        state.queued_blocks[:] = [load.queued_blocks(r, now) for r in range(REPLICAS)]
        placement = state.route(blocks)
        replica = placement.replica
        before = _held(engines, replica)
        engines.admit(blocks, replica, state.turn)
        after = _held(engines, replica)
        index.stored(replica, [b for b in blocks if b not in before])  # the engine's events
        index.removed(replica, (before | set(blocks)) - after)
        state.finished(placement)  # the replay's requests end before the next arrives
        load.dispatch(replica, now, len(blocks) - placement.run, output)
        assignments.append(replica)
    return assignments


@pytest.mark.parametrize("capacity", [None, 500, 100])
def test_the_live_router_picks_the_replica_the_replay_picks(capacity: int | None) -> None:
    trace = _full_blocks_only(load_trace(MOONCAKE_TRACE, limit=1500))
    simulated = replay(trace, "precise", REPLICAS, capacity, LOAD).assignments
    live = _live_assignments(trace, capacity)
    first_difference = next(
        (i for i, (s, lv) in enumerate(zip(simulated, live, strict=True)) if s != lv), None
    )
    assert first_difference is None, (
        f"request {first_difference}: replay chose {simulated[first_difference]}, "
        f"the live router {live[first_difference]}"
    )


def test_blocks_coming_to_a_replica_take_its_room() -> None:
    state = _router(2, capacity=64)
    state.index.stored(0, range(1000, 1008))  # replica 0 holds 8 blocks, replica 1 none
    first = state.route(list(range(1, 17)))  # the roomiest replica, in flight
    assert first.replica == 1
    # replica 1 will hold 16 once that request is computed: replica 0 has more room.
    # Load and work given alike (replica 0 was given 16 blocks before, 8 are left),
    # so room alone decides
    state.inflight[0] = state.inflight[1]
    state.queued_blocks[:] = [0.0, 0.0]
    state.shares.record(0, 16, 0)
    assert state.route(list(range(101, 117))).replica == 0


def _new_prefix(tenant: int) -> list[int]:
    """A tenant's first request: 11 blocks no replica holds."""
    return list(range(tenant * 100 + 1, tenant * 100 + 12))


def test_before_the_model_has_evidence_a_new_prefix_goes_to_a_replica_given_less_work() -> None:
    state = _router(2, capacity=64)
    for tenant in range(3):  # in flight: 22 blocks coming to one replica, 11 to the other
        state.started(state.route(_new_prefix(tenant)))  # prefilled, still running
    light = min(range(2), key=lambda r: state.shares.uncached[r])
    assert sorted(state.inflight) == [1, 2] and state.inflight[light] == 1
    # a moment's queue there (0.2) outweighs its one running request less (0.1):
    # its score is 0.1 below the other's, room left aside
    state.queued_blocks[light] = 20.0
    assert state.reuse is not None and not state.reuse.informed
    assert state.route(_new_prefix(3)).replica == light


def test_once_the_model_has_evidence_a_new_prefix_may_go_to_a_replica_given_more_work() -> None:
    state = _router(2, capacity=64)
    for tenant in range(13):  # 143 blocks: past one window, the fleet's 128 blocks
        state.finished(state.route(_new_prefix(tenant)))
    assert state.reuse is not None and state.reuse.informed
    light = min(range(2), key=lambda r: state.shares.uncached[r])
    state.queued_blocks[light] = 20.0
    assert state.route(_new_prefix(13)).replica == 1 - light


def test_the_router_hashes_like_the_engine_turn_after_turn() -> None:
    settings = RouterSettings(
        replica_urls=["http://127.0.0.1:9000"],
        kv_endpoints=["tcp://127.0.0.1:9100"],
        block_size=4,
        hash_algo="sha256_cbor",
        hash_seed="engine-seed",
    )
    state = RouterState(settings)
    turn = list(range(30))
    for salt in ("tenant-a", "tenant-a", None, "tenant-b"):
        turn = [*turn, *range(len(turn), len(turn) + 9)]
        assert state.hashes(turn, salt) == event_block_hashes(
            turn, 4, algo="sha256_cbor", cache_salt=salt, seed="engine-seed"
        )
