"""`RaySettings`: how prefixkit deploys on a Ray cluster, and `app_args`, the Serve app's
arguments made from them and the replicas' `EngineConfig` (pure: no Ray import).

    settings = RaySettings(router="prefixkit", replicas=2, replica_resources={"replica_slot": 1})
    args = app_args(engine_config, settings)   # -> prefixkit.engine_adapter.ray.app:build_app(args)

The engine settings (model, block size, hash algorithm, KV cache size, dtype, context
length, eager mode) come from the same `EngineConfig` the local backend uses, validated the
same way; `RaySettings` adds what Ray Serve decides: the request router, the replica count
or autoscaling bounds, each replica's resources (CPUs, GPUs, custom resources such as a
``replica_slot`` per node) and their placement strategy. The replicas' KV events are turned
on by the app for prefixkit's router (each replica picks its own ports of `kv_ports` at
start and binds them on its node's address), so `EngineConfig.kv_events_endpoint` is not
used here. `limits` are the gateway's bounds, as on the local backend (`Limits`), and set
what Ray Serve's HTTP proxy bounds (`serve_http_options`).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..engine.config import EngineConfig
from ..engine.home import prefixkit_home
from ..errors import DeploymentConfigError
from ..problems import Problem, Problems, validation_problems
from ..serving.keepalive import SERVED_IDLE_S
from ..serving.limits import Limits

__all__ = [
    "KV_PORT_RANGE",
    "RAY_ROUTERS",
    "RayRouter",
    "RaySettings",
    "app_args",
    "serve_http_options",
]

RayRouter = Literal["prefixkit", "kv-aware", "prefix-affinity", "default"]
RAY_ROUTERS: tuple[RayRouter, ...] = ("prefixkit", "kv-aware", "prefix-affinity", "default")
# the replicas' KV-event ports (prefixkit router): below Linux's default ephemeral range
# (32768-60999), so no outgoing connection holds one, and above Ray's worker ports
# (10002-19999)
KV_PORT_RANGE = (28000, 28999)


class RaySettings(BaseModel):
    """What Ray Serve decides for the deployment (immutable, validated)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    router: RayRouter = Field(
        default="prefixkit",
        description="prefixkit (the precise policy on KV events), kv-aware (Ray's "
        "KVAwareRouter), prefix-affinity (Ray's PrefixCacheAffinityRouter) or default",
    )
    replicas: int = Field(default=2, ge=1, description="replicas at start")
    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=1)
    cpus_per_replica: float = Field(default=1.0, ge=0)
    gpus_per_replica: float = Field(default=0.0, ge=0)
    replica_resources: dict[str, float] = Field(
        default_factory=dict, description="custom Ray resources each replica needs"
    )
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    app_name: str = "prefixkit"
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8000, ge=1, le=65535)
    tenants_file: str | None = Field(
        default=None, description="tenants TOML readable where the ingress runs"
    )
    kv_ports: tuple[int, int] = Field(
        default=KV_PORT_RANGE,
        description="first and last port of the range each replica's KV-event sockets "
        "take two free ports of (prefixkit router)",
    )
    tier_savings: tuple[float, float, float] = Field(
        default=(1.0, 1.0, 1.0),
        description="router prefixkit: the share of a block's prefill a hit in each tier "
        "(GPU, CPU, DISK) saves; all 1.0: tier-blind",
    )
    limits: Limits = Field(
        default_factory=Limits, description="the gateway's bounds, and Serve's HTTP proxy's"
    )

    @model_validator(mode="after")
    def _check(self) -> RaySettings:
        problems = []
        if (self.min_replicas is None) != (self.max_replicas is None):
            problems.append(
                Problem(
                    ("min_replicas", "max_replicas"),
                    self.min_replicas,
                    "give both min_replicas and max_replicas for autoscaling, or neither",
                )
            )
        if (
            self.min_replicas is not None
            and self.max_replicas is not None
            and not self.min_replicas <= self.replicas <= self.max_replicas
        ):
            problems.append(
                Problem(
                    ("replicas", "min_replicas", "max_replicas"),
                    self.replicas,
                    f"replicas={self.replicas} must lie within min_replicas={self.min_replicas} "
                    f"and max_replicas={self.max_replicas}",
                )
            )
        if not all(math.isfinite(v) and v <= 1.0 for v in self.tier_savings):
            problems.append(
                Problem(
                    ("tier_savings",),
                    self.tier_savings,
                    "each tier's saving is a share of a block's prefill: at most 1.0, e.g. "
                    "(1.0, 0.9, 0.4)",
                )
            )
        if self.tier_savings != (1.0, 1.0, 1.0) and self.router != "prefixkit":
            problems.append(
                Problem(
                    ("tier_savings", "router"),
                    self.tier_savings,
                    "tier_savings weighs blocks in prefixkit's request router: give "
                    "router='prefixkit', or leave them at 1.0",
                )
            )
        first, last = self.kv_ports
        if not 1024 <= first < last <= 65535:
            problems.append(
                Problem(
                    ("kv_ports",),
                    self.kv_ports,
                    f"kv_ports={first}-{last}: give a first port below the last, both within "
                    "1024-65535 (each replica takes two)",
                )
            )
        elif first <= self.http_port <= last:
            problems.append(
                Problem(
                    ("kv_ports", "http_port"),
                    self.kv_ports,
                    f"kv_ports={first}-{last} holds http_port={self.http_port}: move one "
                    "out of the other",
                )
            )
        if self.router == "kv-aware" and self.tenants_file is not None:
            problems.append(
                Problem(
                    ("router", "tenants_file"),
                    self.router,
                    "router kv-aware makes Ray's LLM server the ingress (direct streaming), so "
                    "the tenant gateway cannot run in front of it: use router prefixkit or "
                    "prefix-affinity with tenants",
                )
            )
        if problems:
            raise Problems(problems)
        return self

    def __init__(self, **fields: Any) -> None:
        """Validate; raises `DeploymentConfigError` naming every problem and its fix (its
        `parts`: the first problem's settings)."""
        try:
            super().__init__(**fields)
        except ValidationError as error:
            problems = validation_problems(error)
            raise DeploymentConfigError(
                "invalid Ray settings: " + "; ".join(p.message for p in problems),
                parts=problems[0].settings,
            ) from None

    @property
    def most_replicas(self) -> int:
        """The most replicas the deployment can have at once."""
        return self.max_replicas if self.max_replicas is not None else self.replicas


def app_args(
    engine: EngineConfig, settings: RaySettings, home: Path | None = None
) -> dict[str, Any]:
    """The arguments of `prefixkit.engine_adapter.ray.app:build_app` (JSON-serialisable)."""
    if engine.tensor_parallel_size != 1:
        raise DeploymentConfigError(
            "tensor_parallel_size > 1 is not wired into the Ray backend: run more replicas",
            parts=("tensor_parallel_size",),
        )
    bundle: dict[str, float] = {"CPU": settings.cpus_per_replica, **settings.replica_resources}
    if settings.gpus_per_replica:
        bundle["GPU"] = settings.gpus_per_replica
    deployment: dict[str, Any] = {"ray_actor_options": {"num_cpus": 0}}
    if settings.min_replicas is not None:
        deployment["autoscaling_config"] = {
            "min_replicas": settings.min_replicas,
            "max_replicas": settings.max_replicas,
            "initial_replicas": settings.replicas,
        }
    else:
        deployment["num_replicas"] = settings.replicas
    engine_kwargs: dict[str, Any] = {
        "block_size": engine.block_size,
        "enable_prefix_caching": True,
        "prefix_caching_hash_algo": engine.prefix_caching_hash_algo,
        "enforce_eager": engine.enforce_eager,
        "dtype": engine.dtype,
        "enable_prompt_tokens_details": engine.enable_prompt_tokens_details,
    }
    if engine.max_model_len is not None:
        engine_kwargs["max_model_len"] = engine.max_model_len
    if engine.num_gpu_blocks_override is not None:
        engine_kwargs["num_gpu_blocks_override"] = engine.num_gpu_blocks_override
    if engine.gpu_memory_utilization is not None:
        engine_kwargs["gpu_memory_utilization"] = engine.gpu_memory_utilization
    if engine.kv_tiers:
        # the app turns the replicas' KV events on: the native tiers publish theirs too
        engine_kwargs["kv_transfer_config"] = engine.kv_transfer_config(kv_events=True)
    env = {
        **engine.env(),
        "VLLM_CACHE_ROOT": str((home or prefixkit_home()) / "ray-vllm-cache"),
    }
    if engine.device == "cpu":
        env["VLLM_TARGET_DEVICE"] = "cpu"
        # replicas share the node's cores: no pinning of one replica's threads
        env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        env.pop("VLLM_CPU_NUM_OF_RESERVED_CPU", None)
    llm_config: dict[str, Any] = {
        "model_loading_config": {"model_id": engine.name, "model_source": str(engine.model)},
        "placement_group_config": {"bundles": [bundle], "strategy": settings.placement_strategy},
        "deployment_config": deployment,
        "engine_kwargs": engine_kwargs,
        "runtime_env": {"env_vars": env},
    }
    if engine.device == "cpu":
        llm_config["accelerator_config"] = {"kind": "cpu"}
    return {
        "llm_config": llm_config,
        "router": settings.router,
        "tenants_file": settings.tenants_file,
        "hash_seed": engine.hash_seed,
        "most_replicas": settings.most_replicas,
        # each replica's KV capacity in blocks, when fixed: the policy's eviction cost and
        # work budget need it
        "capacity_blocks": engine.num_gpu_blocks_override,
        "kv_ports": list(settings.kv_ports),
        "limits": asdict(settings.limits),
        "tier_savings": list(settings.tier_savings),
    }


def serve_http_options(settings: RaySettings) -> dict[str, Any]:
    """Ray Serve's ``http_options`` (its HTTP proxy, in front of the gateway) for
    `settings`: where it listens, and the two bounds it offers, set from `settings.limits`.

    ``request_timeout_s`` is Serve's one bound on a request, from its head to the last
    byte of its answer (408 before the answer starts, the answer cut after): the longest a
    non-streamed request may wait on the local backend, its body (``body_timeout_s``), the
    connection to an engine and the engine's answer. ``keep_alive_timeout_s`` keeps an idle
    client connection as long as prefixkit's own servers do (`SERVED_IDLE_S`)."""
    limits = settings.limits
    return {
        "host": settings.http_host,
        "port": settings.http_port,
        "request_timeout_s": limits.body_timeout_s
        + limits.upstream_connect_timeout_s
        + limits.upstream_read_timeout_s,
        "keep_alive_timeout_s": SERVED_IDLE_S,
    }
