"""`prefixkit serve --backend ray`: the same replicas on a Ray cluster through Ray Serve LLM
(`prefixkit.engine_adapter.serve_on_ray`), and `--emit kuberay`, the KubeRay RayService of
the same options (`prefixkit.engine_adapter.ray.kuberay`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from .serve_foreground import serve_until_stopped
from .serve_options import engine_config, limits_of, tenants_file

if TYPE_CHECKING:
    from prefixkit.engine_adapter import EngineConfig, RayDeployment, RaySettings
    from rich.console import Console

__all__ = ["emit_kuberay", "serve_ray"]


def serve_ray(args: argparse.Namespace, run_dir: Path, console: Console) -> int:
    """Deploy on the cluster at --ray-address (or a local one of --ray-nodes nodes) and serve
    until stopped; returns the exit code."""
    from prefixkit.engine_adapter import DeploymentConfigError, EngineConfigError, serve_on_ray

    if args.embedded == (args.model is not None):
        raise EngineConfigError(
            "give exactly one of --model DIR and --embedded", field="--model", value=args.model
        )
    if args.no_gateway and args.ray_router != "kv-aware":
        raise DeploymentConfigError(
            "--backend ray always runs the tenant gateway as its ingress (only --ray-router "
            "kv-aware has none): drop --no-gateway",
            parts=("--no-gateway", "--ray-router"),
        )
    if args.router_workers != 1:
        raise DeploymentConfigError(
            f"--router-workers {args.router_workers} runs local router processes: on Ray, "
            "Serve runs the gateway and its router; drop --router-workers, or use "
            "--backend local",
            parts=("--router-workers", "--backend"),
        )
    _check_gpu(args)
    run_dir.mkdir(parents=True, exist_ok=True)
    tenants = None
    if args.ray_router != "kv-aware":
        tenants = tenants_file(args, run_dir, console)
    settings = _ray_settings(args, tenants)

    def start(
        base: EngineConfig, report: Callable[[str], None]
    ) -> AbstractContextManager[RayDeployment]:
        return serve_on_ray(
            base,
            settings,
            run_dir,
            address=args.ray_address,
            nodes=args.ray_nodes,
            report=report,
            start_timeout=args.start_timeout,
        )

    def announce(deployment: RayDeployment, base: EngineConfig) -> None:
        console.print(
            f"[bold green]serving[/] {base.name} at {deployment.url}/v1 on Ray "
            f"({deployment.address}, {len(deployment.replicas)} replicas, "
            f"{settings.router} router); Ray driver log {deployment.log_path}; Ctrl-C to stop"
        )

    return serve_until_stopped(
        args,
        console,
        start,
        announce,
        "stopped: the Ray app is deleted (and the local cluster stopped)",
    )


def _check_gpu(args: argparse.Namespace) -> None:
    """A GPU engine on Ray needs a GPU in each replica's bundle, and a cluster whose nodes
    run vLLM's GPU build: the local cluster runs the Ray engine, vLLM's CPU build."""
    from prefixkit.engine_adapter import DeploymentConfigError

    if args.device != "gpu":
        return
    if args.ray_address is None:
        raise DeploymentConfigError(
            "--device gpu on the local Ray cluster: it runs the Ray engine, vLLM's CPU "
            "build, which cannot run a GPU engine (nor its KV tiers); give --ray-address of "
            "a cluster whose nodes have GPUs and vLLM's GPU build, or drop --device gpu",
            parts=("device", "ray_address"),
        )
    if not args.gpus_per_replica:
        raise DeploymentConfigError(
            "--device gpu with no GPU per replica: Ray would place each replica without a "
            "GPU; give --gpus-per-replica N (at least the tensor parallel size)",
            parts=("device", "gpus_per_replica"),
        )


def emit_kuberay(args: argparse.Namespace) -> int:
    """Print the KubeRay RayService of these options and the NetworkPolicy that keeps its
    pods' ports (the KV-event sockets among them) inside the cluster; nothing is installed
    or started."""
    from prefixkit.engine_adapter.ray.kuberay import (
        KubeRayOptions,
        kuberay_manifests,
        kuberay_yaml,
    )
    from prefixkit.sdk import UsageError

    if args.embedded or args.model is None or not args.model.is_absolute():
        raise UsageError(
            "--emit kuberay needs --model with the model folder's absolute path inside the "
            "pods (baked into --image or on --model-claim); --embedded prepares a model on "
            "this machine only"
        )
    if args.image is None:
        raise UsageError(
            "--emit kuberay needs --image: a container image with Ray Serve 2.60, vLLM 0.29 "
            "and prefixkit (what the Ray engine's virtualenv holds)"
        )
    options = KubeRayOptions(
        image=args.image,
        name=args.k8s_name,
        namespace=args.k8s_namespace,
        tenants_secret=args.tenants_secret,
        model_claim=args.model_claim,
        memory_per_replica=args.memory_per_replica,
        operator_namespace=args.kuberay_operator_namespace,
    )
    settings = _ray_settings(args, None)
    manifests = kuberay_manifests(engine_config(args, None), settings, options)
    print(kuberay_yaml(manifests), end="")
    return 0


def _ray_settings(args: argparse.Namespace, tenants: Path | None) -> RaySettings:
    from prefixkit.engine_adapter import RaySettings

    return RaySettings(
        router=args.ray_router,
        replicas=args.replicas,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        cpus_per_replica=args.cpus_per_replica,
        gpus_per_replica=args.gpus_per_replica,
        placement_strategy=args.placement_strategy,
        http_host=args.host,
        http_port=args.port,
        tenants_file=None if tenants is None else str(tenants),
        limits=limits_of(args),
        tier_savings=args.tier_savings,
    )
