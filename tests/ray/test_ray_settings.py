"""`RaySettings` and `app_args`: the Ray backend's options, validated before anything starts,
and the Serve app's arguments made from them and the replicas' `EngineConfig`."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.engine_adapter import DeploymentConfigError, EngineConfig
from prefixkit.engine_adapter.ray.settings import RaySettings, app_args

ENGINE = EngineConfig(
    model=Path("/models/tiny"),
    served_model_name="tiny",
    block_size=64,
    prefix_caching_hash_algo="sha256",
    kv_cache_space_gib=2,
    dtype="float32",
    enforce_eager=True,
    max_model_len=2048,
)


def test_engine_settings_become_the_replicas_engine_arguments() -> None:
    args = app_args(ENGINE, RaySettings(), home=Path("/home/pk"))
    llm = args["llm_config"]
    assert llm["model_loading_config"] == {"model_id": "tiny", "model_source": "/models/tiny"}
    assert llm["engine_kwargs"] == {
        "block_size": 64,
        "enable_prefix_caching": True,
        "prefix_caching_hash_algo": "sha256",
        "enforce_eager": True,
        "dtype": "float32",
        "enable_prompt_tokens_details": True,
        "max_model_len": 2048,
    }
    env = llm["runtime_env"]["env_vars"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["VLLM_CACHE_ROOT"] == "/home/pk/ray-vllm-cache"
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    assert "PYTHONHASHSEED" not in env


def test_replica_resources_make_each_replicas_bundle() -> None:
    settings = RaySettings(
        cpus_per_replica=4,
        gpus_per_replica=1,
        replica_resources={"replica_slot": 1},
        placement_strategy="STRICT_SPREAD",
    )
    group = app_args(ENGINE, settings)["llm_config"]["placement_group_config"]
    assert group == {
        "bundles": [{"CPU": 4, "replica_slot": 1, "GPU": 1}],
        "strategy": "STRICT_SPREAD",
    }


def test_autoscaling_bounds_pass_through_to_serve() -> None:
    settings = RaySettings(replicas=2, min_replicas=1, max_replicas=4)
    deployment = app_args(ENGINE, settings)["llm_config"]["deployment_config"]
    assert deployment["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 4,
        "initial_replicas": 2,
    }
    assert "num_replicas" not in deployment
    assert app_args(ENGINE, settings)["most_replicas"] == 4


def test_a_fixed_replica_count_is_the_deployments() -> None:
    deployment = app_args(ENGINE, RaySettings(replicas=3))["llm_config"]["deployment_config"]
    assert deployment["num_replicas"] == 3


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"min_replicas": 1}, "give both min_replicas and max_replicas"),
        ({"replicas": 5, "min_replicas": 1, "max_replicas": 4}, "must lie within"),
        ({"router": "kv-aware", "tenants_file": "t.toml"}, "gateway cannot run in front"),
        ({"router": "round-robin"}, "router"),
        ({"replicas": 0}, "replicas"),
    ],
)
def test_settings_that_cannot_work_are_refused(fields: dict[str, object], says: str) -> None:
    with pytest.raises(DeploymentConfigError, match=says):
        RaySettings(**fields)


def test_a_fixed_kv_capacity_reaches_the_router() -> None:
    assert app_args(ENGINE, RaySettings())["capacity_blocks"] is None
    small = ENGINE.derive(num_gpu_blocks_override=64)
    args = app_args(small, RaySettings())
    assert args["capacity_blocks"] == 64
    assert args["llm_config"]["engine_kwargs"]["num_gpu_blocks_override"] == 64
