"""The continuation model behind the precise policy's eviction cost, and what it buys on the
real Mooncake trace."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter import load_trace
from prefixkit.engine_adapter.replay.replay import LoadParams, replay
from prefixkit.engine_adapter.routing.reuse import ReuseModel, ReuseSettings

from tests.conftest import MOONCAKE_TRACE

# window of 10 blocks of clock, ages in steps of 5, no gap classes, no prior pull
SMALL = ReuseSettings(window=10.0, age_step=5.0, age_steps=4, prior_hits=0.0, prior_count=1.0)


def _conversation(model: ReuseModel, first: int, turns: int, clock: float, gap: float) -> float:
    """Turns of one conversation (prompt ids from `first`), each one block longer."""
    for turn in range(turns):
        model.observe(first + turn, [first * 1000 + k for k in range(turn + 2)], clock)
        clock += gap
    return clock


def test_a_continued_prompt_is_worth_nothing() -> None:
    model = ReuseModel(SMALL)
    _conversation(model, 1, 2, 0.0, 1.0)
    assert model.value(1, 2.0) == 0.0  # prompt 2 continued it: the conversation moved on


def test_a_prompt_branching_from_a_shared_prefix_continues_nothing() -> None:
    model = ReuseModel(ReuseSettings(window=10.0, age_step=5.0))  # the prior: 1 in 10
    model.observe(1, [7, 8, 9], 0.0)
    model.observe(2, [7, 8, 10], 1.0)  # shares blocks 7, 8 but 9 came after them: a branch
    assert model.value(1, 1.0) > 0.0


def test_value_learns_how_often_prompts_come_back() -> None:
    returning = ReuseModel(SMALL)
    one_shot = ReuseModel(SMALL)
    clock = 0.0
    for conversation in range(1, 40):
        start = conversation * 10
        clock = _conversation(returning, start, 2, clock, 1.0)
        one_shot.observe(start, [start * 1000, start * 1000 + 1], clock)
    probe = 10_000
    returning.observe(probe, [1, 2], clock)
    one_shot.observe(probe, [1, 2], clock)
    assert returning.value(probe, clock) > 0.5 > one_shot.value(probe, clock)


def test_the_model_is_informed_once_the_first_prompts_window_has_passed() -> None:
    model = ReuseModel(SMALL)  # a window of 10
    model.observe(1, [1, 2], 0.0)
    model.observe(2, [3, 4], 9.0)
    assert not model.informed
    model.observe(3, [5, 6], 10.0)
    assert model.informed


def test_eviction_cost_is_the_evicted_blocks_times_their_prompts_value() -> None:
    model = ReuseModel(ReuseSettings(window=10.0, age_step=5.0, prior_hits=1.0, prior_count=4.0))
    model.observe(1, [1, 2], 0.0)
    assert model.eviction_cost(3, 1.0, 0.0) == 3 * 0.25
    assert model.eviction_cost(0, 1.0, 0.0) == 0.0


@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(1, 5), st.floats(0.0, 4.0)),
        min_size=1,
        max_size=80,
    )
)
@settings(max_examples=60, deadline=None)
def test_every_value_is_a_probability(requests: list[tuple[int, int, float]]) -> None:
    model = ReuseModel(ReuseSettings.for_capacity(12))
    clock = 0.0
    for prompt, (conversation, turns, step) in enumerate(requests, start=1):
        clock += step
        model.observe(prompt, [conversation * 100 + k for k in range(turns)], clock)
        assert all(0.0 <= model.value(p, clock) <= 1.0 for p in range(prompt + 1))


def test_settings_refuse_an_empty_fleet() -> None:
    with pytest.raises(ValueError, match="at least one block"):
        ReuseSettings.for_capacity(0)


def test_precise_beats_smg_like_by_a_tenth_on_the_mooncake_trace_at_small_caches() -> None:
    # small caches: 8 replicas x 500 blocks, first 3,000 requests, the load
    # model of bench/route_replay.py, SMG-like as that bench checks it against real SMG
    trace = load_trace(MOONCAKE_TRACE, limit=3000)
    load = LoadParams(0.001, 0.0, 25.0)
    smg = replay(trace, "smg_like", 8, 500, load)
    precise = replay(trace, "precise", 8, 500, load)
    assert precise.hit_rate >= 1.10 * smg.hit_rate
    assert precise.imbalance <= smg.imbalance
    assert precise.uncached_imbalance <= smg.uncached_imbalance
