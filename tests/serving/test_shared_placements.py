"""Router workers share their placements (`serving.placements`): each worker decides as a
single router would on the same sequence of requests, a placement's blocks count as coming
on every worker until it ends, and a worker that dies, or a ring a reader fell a whole
ring behind on, ends the placements the others knew of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.router_state import Placement, RouterSettings, RouterState
from prefixkit.engine_adapter.serving.placements import RING_CELLS, PlacementLog
from prefixkit.engine_adapter.serving.workers import WorkerTable, join_peers

REPLICAS = 3
SETTINGS = RouterSettings(
    [f"http://127.0.0.1:{n}" for n in range(1, REPLICAS + 1)],
    [None] * REPLICAS,
    capacity_blocks=[12] * REPLICAS,
)


class _Fleet:
    """`workers` router states sharing a load table and a placement log in `folder`."""

    def __init__(self, folder: Path, workers: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.table = WorkerTable.create(folder / "load", workers, REPLICAS, tenants=[])
        self.log = PlacementLog.create(folder / "placements", workers)
        self.states = [RouterState(SETTINGS) for _ in range(workers)]
        for worker, state in enumerate(self.states):
            join_peers(state, self.table, self.log, worker)

    def close(self) -> None:
        self.table.close()
        self.log.close()


def _catch_up(state: RouterState) -> None:
    assert state.peers is not None
    state.peers.catch_up(state)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[_Fleet]:
    two = _Fleet(tmp_path / "two", 2)
    yield two
    two.close()


def test_requests_are_numbered_across_workers(fleet: _Fleet) -> None:
    first, second = fleet.states
    numbers = [state.route([n]).request for n, state in enumerate([first, second, second, first])]
    assert numbers == [1, 2, 3, 4]


def test_a_placement_on_one_worker_is_coming_on_the_others_until_it_ends(fleet: _Fleet) -> None:
    first, second = fleet.states
    placed = first.route([11, 12, 13])
    _catch_up(second)
    assert second.index.runs([11, 12, 13, 14])[placed.replica] == 3
    first.finished(placed)
    _catch_up(second)
    assert second.index.runs([11, 12, 13, 14])[placed.replica] == 0


def test_a_restarted_workers_placements_end_on_the_others(fleet: _Fleet) -> None:
    first, second = fleet.states
    placed = first.route([21, 22])
    _catch_up(second)
    fleet.log.restarted(0)
    _catch_up(second)
    assert second.index.runs([21, 22])[placed.replica] == 0


def test_a_ring_caught_while_it_is_reset_is_read_once_the_reset_is_done(fleet: _Fleet) -> None:
    first, second = fleet.states
    placed = first.route([51, 52])
    at = fleet.log.header(0)
    fleet.log.cells[at] += 1  # the parent's reset, caught half-way: odd epoch, cells left
    _catch_up(second)
    assert second.index.runs([51, 52])[placed.replica] == 0
    fleet.log.cells[at + 1] = 0
    fleet.log.cells[at] += 1
    again = first.route([53])  # the restarted worker's first placement
    _catch_up(second)
    assert second.index.runs([53])[again.replica] == 1
    assert second.index.runs([51, 52])[placed.replica] == 0


def test_a_reader_a_whole_ring_behind_ends_what_it_knew_and_goes_on(fleet: _Fleet) -> None:
    first, second = fleet.states
    kept = first.route([31, 32])
    _catch_up(second)
    blocks = list(range(1000, 1000 + RING_CELLS // 8))
    for _ in range(10):  # more cells than the ring holds, unread
        first.finished(first.route(blocks))
    _catch_up(second)
    assert second.index.runs([31, 32])[kept.replica] == 0
    later = first.route([41])
    _catch_up(second)
    assert second.index.runs([41])[later.replica] == 1


def test_a_prompt_longer_than_half_a_ring_is_shared_by_its_first_blocks(fleet: _Fleet) -> None:
    first, second = fleet.states
    blocks = list(range(RING_CELLS))
    placed = first.route(blocks)
    _catch_up(second)
    run = second.index.runs(blocks)[placed.replica]
    assert 0 < run < RING_CELLS // 2


# one step of a request sequence: (worker, kind, value) where kind "route" sends the
# prompt `value` (a prefix of a conversation), "end" ends the oldest placement in flight of
# that worker and "store" makes its replica's engine report the blocks of the placement
# in flight with that index (KV events reach every worker)
_STEP = st.tuples(
    st.integers(0, 1),
    st.sampled_from(["route", "route", "end", "store"]),
    st.integers(0, 40),
)


def _prompt(value: int) -> list[int]:
    """A prompt of conversation value % 5, at turn value // 5 (a longer prefix each turn)."""
    conversation, turn = value % 5, value // 5
    return [conversation * 1000 + block for block in range(2 + turn)]


def _replay(
    states: list[RouterState], steps: list[tuple[int, str, int]], worker_of: list[int]
) -> list[int]:
    """The replicas `states` place the routed requests of `steps` on; `worker_of[w]` says
    which state serves the steps of worker w (all 0: one router)."""
    inflight: list[list[tuple[RouterState, Placement]]] = [[], []]
    everything: list[Placement] = []
    chosen = []
    for worker, kind, value in steps:
        state = states[worker_of[worker]]
        if kind == "route":
            placement = state.route(_prompt(value))
            inflight[worker].append((state, placement))
            everything.append(placement)
            chosen.append(placement.replica)
        elif kind == "end" and inflight[worker]:
            owner, placement = inflight[worker].pop(0)
            owner.finished(placement)
        elif kind == "store" and everything:
            placement = everything[value % len(everything)]
            for each in states:
                if each.follower.before_batch is not None:
                    each.follower.before_batch()
                each.index.stored(placement.replica, placement.hashes)
    return chosen


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_STEP, max_size=60))
def test_two_workers_place_a_request_sequence_as_one_router_does(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, str, int]]
) -> None:
    """Whichever worker each request reaches, when each decision comes after the ones
    before it, the workers choose the replicas one router would."""
    two = _Fleet(tmp_path_factory.mktemp("fleet"), 2)
    try:
        together = _replay(two.states, steps, worker_of=[0, 1])
    finally:
        two.close()
    assert together == _replay([RouterState(SETTINGS)], steps, worker_of=[0, 0])
