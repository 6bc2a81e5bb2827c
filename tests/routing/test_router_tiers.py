"""The live router weighs a replica's cached run by the tier holding each block."""

import pytest
from prefixkit.engine_adapter.errors import DeploymentConfigError
from prefixkit.engine_adapter.routing.kv_events import Stored, apply_events
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState

PROMPT = list(range(1, 21))  # 20 blocks
CPU_SAVES_LESS = (1.0, 0.4, 0.1)


def _router(savings: tuple[float, ...] = (1.0, 1.0, 1.0), replicas: int = 2) -> RouterState:
    return RouterState(
        RouterSettings(
            replica_urls=[f"http://127.0.0.1:{9000 + r}" for r in range(replicas)],
            kv_endpoints=[None] * replicas,
            savings=savings,
        )
    )


def test_a_prefix_on_gpu_wins_over_a_longer_one_on_cpu_when_cpu_saves_less() -> None:
    state = _router(CPU_SAVES_LESS)
    apply_events(state.index, 0, [Stored(tuple(PROMPT[:12]), None, "GPU")])
    apply_events(state.index, 1, [Stored(tuple(PROMPT[:16]), None, "CPU")])
    placement = state.route(PROMPT)
    assert (placement.replica, placement.run) == (0, 12)


def test_savings_are_tier_blind_by_default() -> None:
    assert tuple(RouterSettings(["http://r0"], [None]).savings) == (1.0, 1.0, 1.0)


def test_tier_blind_savings_take_the_longer_run_wherever_it_is_held() -> None:
    state = _router()
    apply_events(state.index, 0, [Stored(tuple(PROMPT[:12]), None, "GPU")])
    apply_events(state.index, 1, [Stored(tuple(PROMPT[:16]), None, "CPU")])
    placement = state.route(PROMPT)
    assert (placement.replica, placement.run) == (1, 16)


def test_a_prefix_held_on_cpu_wins_over_a_replica_holding_nothing() -> None:
    state = _router(CPU_SAVES_LESS)
    apply_events(state.index, 1, [Stored(tuple(PROMPT[:16]), None, "CPU")])
    placement = state.route(PROMPT)
    assert (placement.replica, placement.run) == (1, 16)


def test_the_decision_record_gives_each_run_and_its_value() -> None:
    state = _router(CPU_SAVES_LESS)
    records: list[dict[str, object]] = []
    state.decision_sink = records.append
    apply_events(state.index, 1, [Stored(tuple(PROMPT[:10]), None, "DISK")])
    state.route(PROMPT)
    (record,) = records
    candidates = record["candidates"]
    assert isinstance(candidates, list)
    offered = {c["replica"]: (c["run"], c["value"]) for c in candidates}
    assert offered == {0: (0, 0.0), 1: (10, pytest.approx(1.0))}


def test_tiers_left_out_save_what_the_slowest_given_saves() -> None:
    settings = RouterSettings(["http://r0"], [None], savings=[1.0, 0.5])
    assert settings.savings == (1.0, 0.5, 0.5)


def test_a_saving_below_zero_is_a_fetch_slower_than_computing() -> None:
    state = _router((1.0, -0.5, -1.0))
    apply_events(state.index, 1, [Stored(tuple(PROMPT[:16]), None, "CPU")])
    assert state.route(PROMPT).replica == 0


@pytest.mark.parametrize(
    "savings",
    [
        (),
        (1.0, 0.5, 0.2, 0.1),
        (1.0, 1.5, 0.2),
        (1.0, float("nan"), 0.2),
        (1.0, 0.5, float("-inf")),
    ],
)
def test_savings_give_one_finite_fraction_per_tier(savings: tuple[float, ...]) -> None:
    with pytest.raises(DeploymentConfigError, match="one fraction per tier") as raised:
        _router(savings)
    assert raised.value.parts == ("savings",)
