"""`RaySettings` and `app_args`: the Ray backend's options, validated before anything starts,
and the Serve app's arguments made from them and the replicas' `EngineConfig`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixkit.engine_adapter import DeploymentConfigError, EngineConfig, Limits
from prefixkit.engine_adapter.ray.settings import (
    KV_PORT_RANGE,
    RaySettings,
    app_args,
    serve_http_options,
)
from prefixkit.engine_adapter.serving.keepalive import SERVED_IDLE_S

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
        ({"kv_ports": (29000, 28000)}, "kv_ports=29000-28000: give a first port below the last"),
        ({"kv_ports": (28000, 28000)}, "give a first port below the last"),
        ({"kv_ports": (80, 1000)}, "both within 1024-65535"),
        ({"kv_ports": (7000, 9000), "http_port": 8000}, "holds http_port=8000"),
        ({"limits": {"max_body_bytes": 0}}, "limit max_body_bytes = 0: give a positive number"),
        ({"tier_savings": (1.0, 1.5, 1.0)}, "at most 1.0"),
        ({"router": "default", "tier_savings": (1.0, 0.5, 0.5)}, "router='prefixkit'"),
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


def test_the_app_arguments_are_plain_json() -> None:
    args = app_args(ENGINE, RaySettings(limits=Limits(max_body_bytes=4096)))
    assert json.loads(json.dumps(args)) == args


def test_the_limits_reach_the_gateway() -> None:
    limits = Limits(max_body_bytes=4096, max_json_depth=8, body_workers=1)
    assert Limits(**app_args(ENGINE, RaySettings(limits=limits))["limits"]) == limits
    assert Limits(**app_args(ENGINE, RaySettings())["limits"]) == Limits()


def test_the_kv_port_range_reaches_the_replicas() -> None:
    assert app_args(ENGINE, RaySettings())["kv_ports"] == list(KV_PORT_RANGE)
    assert app_args(ENGINE, RaySettings(kv_ports=(41000, 41009)))["kv_ports"] == [41000, 41009]


def test_serves_http_proxy_is_bounded_by_the_limits() -> None:
    limits = Limits(body_timeout_s=30, upstream_connect_timeout_s=5, upstream_read_timeout_s=100)
    settings = RaySettings(http_host="10.0.0.5", http_port=9000, limits=limits)
    assert serve_http_options(settings) == {
        "host": "10.0.0.5",
        "port": 9000,
        # a non-streamed request's longest wait on the local backend: body, connect, answer
        "request_timeout_s": 135,
        # an idle client connection lives as long as on prefixkit's own servers
        "keep_alive_timeout_s": SERVED_IDLE_S,
    }


def test_the_tier_savings_reach_the_router() -> None:
    args = app_args(ENGINE, RaySettings(tier_savings=(1.0, 0.8, 0.2)))
    assert args["tier_savings"] == [1.0, 0.8, 0.2]


def test_kv_tiers_reach_the_ray_replicas_engine_arguments() -> None:
    gpu = ENGINE.derive(device="gpu", kv_cache_space_gib=None, kv_tiers=["cpu:8GiB"])
    engine_kwargs = app_args(gpu, RaySettings())["llm_config"]["engine_kwargs"]
    assert engine_kwargs["kv_transfer_config"] == gpu.kv_transfer_config(kv_events=True)
    assert (
        "kv_transfer_config" not in app_args(ENGINE, RaySettings())["llm_config"]["engine_kwargs"]
    )
