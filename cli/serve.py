"""Serve vLLM with prefix caching: replicas, a router for N > 1, and the tenant gateway.

    prefixkit serve --embedded                      # CPU engine + SmolLM2, installed if missing
    prefixkit serve --model DIR --device gpu --replicas 4 --tenants tenants.toml
    prefixkit serve status                          # health, block size, KV usage, hit rate
    prefixkit serve --embedded --backend ray --replicas 2 --ray-nodes 2   # on Ray Serve LLM
    prefixkit serve --backend ray --emit kuberay --model /models/m --image IMG > rayservice.yaml

Topology (`prefixkit.engine_adapter.serving.deployment.deploy`): replicas (engine ports
--engine-port, --engine-port+1, ...) -> a router when --replicas > 1 (real SMG
cache_aware by default on --router-port and the port after it; --router precise for
prefixkit's KV-event router) -> the serving app on --host:--port: the tenant gateway,
which authenticates API keys and sets each tenant's cache_salt, then the routing stage.
--no-gateway serves without the gateway (one replica without it: the replica itself).
Logs, KV-event sockets and state live in --run-dir (default PREFIXKIT_HOME/runs/default).
With --embedded and no tenant keys configured, a tenants file with two demo tenants and a
random secret is created in the run directory (and reused next time). Options that do not
fit together and ports that collide or are taken are reported before anything starts.
Ctrl-C or SIGTERM stops the serving app, the router, then the replicas (SIGTERM, SIGKILL
after the grace period).

--backend ray deploys the same replicas (same engine options) on a Ray cluster through Ray
Serve LLM (`prefixkit.engine_adapter.ray.launch.serve_on_ray`): the running cluster at
--ray-address, or a local one of --ray-nodes nodes started here and stopped on exit; the
tenant gateway is the Serve ingress and --ray-router picks the request router (prefixkit's
precise policy by default). The Ray engine (Ray, vLLM CPU) is installed on first use.

--emit kuberay prints the KubeRay RayService for the same options and starts nothing
(`prefixkit.engine_adapter.ray.kuberay`): --model is the model folder's path inside the pods,
--image an image with Ray Serve, vLLM and prefixkit; the tenants file comes from the
Kubernetes Secret --tenants-secret (key tenants.toml), never from the manifest.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from .serve_state import write_serve_state
from .serve_status import show_status

if TYPE_CHECKING:
    from prefixkit.engine_adapter import Deployment, EngineConfig, RaySettings, Tenants
    from rich.console import Console
    from rich.status import Status

__all__ = ["configure", "run"]


def _port(text: str) -> int:
    """A TCP port number, for argparse."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: give 1 to 65535")
    return port


def configure(parser: argparse.ArgumentParser) -> None:
    """Add `serve` options and the `status` action."""
    actions = parser.add_subparsers(dest="serve_action", metavar="ACTION")
    status = actions.add_parser("status", help="show each replica's health and cache metrics")
    status.add_argument(
        "--run-dir", type=Path, default=argparse.SUPPRESS, help="run directory to inspect"
    )
    status.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="measure the hit rate over this many seconds (default: since start)",
    )

    engine = parser.add_argument_group("engine")
    engine.add_argument(
        "--embedded",
        action="store_true",
        help="CPU engine + SmolLM2-135M-Instruct (installed and prepared if missing)",
    )
    engine.add_argument("--model", type=Path, help="local model directory (not with --embedded)")
    engine.add_argument("--served-model-name", help="name clients send as `model`")
    engine.add_argument("--python", type=Path, help="the engine's interpreter (a vLLM venv)")
    engine.add_argument("--device", choices=["cpu", "gpu"], default=None)
    engine.add_argument("--block-size", type=int, default=None)
    engine.add_argument(
        "--hash-algo",
        choices=["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"],
        default=None,
        help="prefix-cache block hash (default sha256_cbor: reproducible by clients)",
    )
    engine.add_argument("--max-model-len", type=int, default=None)
    engine.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"])
    engine.add_argument("--kv-cache-gib", type=int, default=None, help="CPU: KV cache size (GiB)")
    engine.add_argument("--enforce-eager", action="store_true", default=None)
    engine.add_argument("--gpu-memory-utilization", type=float, default=None, help="GPU only")
    engine.add_argument("--tensor-parallel-size", type=int, default=None, help="GPU only")
    engine.add_argument("--kv-offloading-size", type=float, default=None, help="GPU only (GiB)")
    engine.add_argument("--kv-offloading-backend", choices=["native", "lmcache"], default=None)
    engine.add_argument("--no-kv-events", action="store_true", help="do not publish KV events")
    engine.add_argument(
        "--tool-call-parser",
        default=None,
        help="vLLM tool-call parser (e.g. pythonic, hermes): tool calls and a named tool_choice",
    )

    topology = parser.add_argument_group("replicas, router and gateway")
    topology.add_argument("--replicas", type=int, default=1, help="number of vLLM replicas")
    topology.add_argument("--engine-port", type=_port, default=8100, help="first replica's port")
    topology.add_argument(
        "--router",
        choices=["smg", "precise"],
        default="smg",
        help="for N > 1: smg (SMG cache_aware, the default) or precise (prefixkit's)",
    )
    topology.add_argument("--router-port", type=_port, default=8090)
    topology.add_argument(
        "--decision-log",
        action="store_true",
        help="--router precise: append every routing decision to RUN_DIR/decisions.jsonl",
    )
    topology.add_argument(
        "--smg-chars-per-token",
        type=float,
        default=None,
        help="--router smg: your traffic's characters per token, which sizes "
        "SMG's tree from the replicas' KV capacity (default 4)",
    )
    topology.add_argument("--host", default="127.0.0.1", help="the serving app's address")
    topology.add_argument("--port", type=_port, default=8000, help="the serving app's port")
    topology.add_argument("--tenants", type=Path, help="TOML file with [tenants] and secret")
    topology.add_argument("--no-gateway", action="store_true", help="serve without the gateway")
    topology.add_argument("--run-dir", type=Path, default=None, help="logs, sockets and state")
    topology.add_argument("--start-timeout", type=float, default=600.0, help="seconds")
    ray = parser.add_argument_group("Ray backend (--backend ray)")
    ray.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local: processes on this machine; ray: Ray Serve LLM on a Ray cluster",
    )
    ray.add_argument(
        "--ray-router",
        choices=["prefixkit", "kv-aware", "prefix-affinity", "default"],
        default="prefixkit",
        help="prefixkit (precise policy on KV events), kv-aware (Ray's KVAwareRouter, no "
        "gateway), prefix-affinity (Ray's PrefixCacheAffinityRouter) or default",
    )
    ray.add_argument("--ray-address", help="a running Ray cluster (default: start a local one)")
    ray.add_argument(
        "--ray-nodes",
        type=int,
        default=1,
        help="Ray nodes of the local cluster (one replica slot each)",
    )
    ray.add_argument("--min-replicas", type=int, default=None, help="autoscaling lower bound")
    ray.add_argument("--max-replicas", type=int, default=None, help="autoscaling upper bound")
    ray.add_argument("--cpus-per-replica", type=float, default=1.0)
    ray.add_argument("--gpus-per-replica", type=float, default=0.0)
    ray.add_argument(
        "--placement-strategy",
        choices=["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"],
        default="PACK",
        help="how each replica's resource bundle is placed",
    )
    topology.add_argument("--grace", type=float, default=10.0, help="SIGTERM -> SIGKILL seconds")
    kubernetes = parser.add_argument_group("Kubernetes (--backend ray --emit kuberay)")
    kubernetes.add_argument(
        "--emit", choices=["kuberay"], help="print the KubeRay RayService; start nothing"
    )
    kubernetes.add_argument("--image", help="container image with Ray Serve, vLLM and prefixkit")
    kubernetes.add_argument("--k8s-name", default="prefixkit", help="the RayService's name")
    kubernetes.add_argument("--k8s-namespace", help="the RayService's namespace")
    kubernetes.add_argument(
        "--tenants-secret",
        default="prefixkit-tenants",
        help="Kubernetes Secret holding the tenants file under the key tenants.toml",
    )
    kubernetes.add_argument("--model-claim", help="PersistentVolumeClaim holding the model")
    kubernetes.add_argument(
        "--memory-per-replica", help="worker pod memory, e.g. 16Gi (default from the KV cache)"
    )


def run(args: argparse.Namespace) -> int:
    """`prefixkit serve` / `prefixkit serve status`; returns the exit code (errors are
    raised, for `prefixkit.cli.main` to report)."""
    from prefixkit.engine_adapter.engine.home import runs_dir
    from prefixkit.sdk import require_extra
    from rich.console import Console

    require_extra("serve", "prefixkit serve", "rich", "starlette", "uvicorn", "httpx", "pydantic")
    run_dir = (args.run_dir or runs_dir() / "default").expanduser().resolve()
    if args.serve_action == "status":
        return show_status(run_dir, args.interval, Console())
    if args.emit is not None and args.backend != "ray":
        from prefixkit.sdk import UsageError

        raise UsageError("--emit kuberay describes a Ray deployment: add --backend ray")
    if args.backend == "ray":
        return _serve_ray(args, run_dir, Console(stderr=True))
    return _serve(args, run_dir, Console(stderr=True))


def _serve_ray(args: argparse.Namespace, run_dir: Path, console: Console) -> int:
    from prefixkit.engine_adapter import DeploymentConfigError, EngineConfigError, serve_on_ray

    if args.emit == "kuberay":
        return _emit_kuberay(args)
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
    run_dir.mkdir(parents=True, exist_ok=True)
    tenants_file = None
    if args.ray_router != "kv-aware":
        tenants_file = _tenants_file(args, run_dir, console)
    settings = _ray_settings(args, tenants_file)
    report = _ConsoleReport(console)
    with report.live():
        base = _base_config(args, report)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with contextlib.ExitStack() as stack:
            with report.live():
                deployment = stack.enter_context(
                    serve_on_ray(
                        base,
                        settings,
                        run_dir,
                        address=args.ray_address,
                        nodes=args.ray_nodes,
                        report=report,
                        start_timeout=args.start_timeout,
                    )
                )
            console.print(
                f"[bold green]serving[/] {base.name} at {deployment.url}/v1 on Ray "
                f"({deployment.address}, {len(deployment.replicas)} replicas, "
                f"{settings.router} router); Ray driver log {deployment.log_path}; Ctrl-C to stop"
            )
            while True:
                time.sleep(3600)
    except _Stopped:
        console.print("stopped: the Ray app is deleted (and the local cluster stopped)")
        return 0


def _ray_settings(args: argparse.Namespace, tenants_file: Path | None) -> RaySettings:
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
        tenants_file=None if tenants_file is None else str(tenants_file),
    )


def _emit_kuberay(args: argparse.Namespace) -> int:
    """Print the KubeRay RayService of these options; nothing is installed or started."""
    from prefixkit.engine_adapter.ray.kuberay import (
        KubeRayOptions,
        rayservice_manifest,
        rayservice_yaml,
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
    )
    manifest = rayservice_manifest(_base_config(args, None), _ray_settings(args, None), options)
    print(rayservice_yaml(manifest), end="")
    return 0


def _serve(args: argparse.Namespace, run_dir: Path, console: Console) -> int:
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
    report = _ConsoleReport(console)
    with report.live():
        base = _base_config(args, report)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with contextlib.ExitStack() as stack:
            with report.live():
                deployment = stack.enter_context(
                    deploy(
                        base,
                        topology,
                        tenants=tenants,
                        run_dir=run_dir,
                        kv_events=not args.no_kv_events,
                        start_timeout=args.start_timeout,
                        grace=args.grace,
                        report=report,
                    )
                )
            write_serve_state(run_dir, deployment)
            _announce(console, deployment, base, run_dir)
            while True:
                time.sleep(3600)
    except _Stopped:
        console.print("stopped: every process it started is stopped")
        return 0


def _base_config(args: argparse.Namespace, report: Any) -> EngineConfig:
    from prefixkit.engine_adapter import EngineConfig, prepare_embedded

    overrides = {
        key: value
        for key, value in {
            "served_model_name": args.served_model_name,
            "python": args.python,
            "device": args.device,
            "block_size": args.block_size,
            "prefix_caching_hash_algo": args.hash_algo,
            "max_model_len": args.max_model_len,
            "dtype": args.dtype,
            "kv_cache_space_gib": args.kv_cache_gib,
            "enforce_eager": args.enforce_eager,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "tensor_parallel_size": args.tensor_parallel_size,
            "kv_offloading_size": args.kv_offloading_size,
            "kv_offloading_backend": args.kv_offloading_backend,
            "tool_call_parser": args.tool_call_parser,
        }.items()
        if value is not None
    }
    if args.embedded:
        return prepare_embedded(report, **overrides)
    return EngineConfig(model=args.model.expanduser().resolve(), **overrides)


def _tenants(args: argparse.Namespace, run_dir: Path, console: Console) -> Tenants:
    from prefixkit.engine_adapter import Tenants

    return Tenants.load(_tenants_file(args, run_dir, console))


def _tenants_file(args: argparse.Namespace, run_dir: Path, console: Console) -> Path | None:
    """--tenants, or with --embedded and no keys in the environment, the demo tenants file
    of the run directory (created with two demo tenants and a random secret if missing)."""
    import os

    path: Path | None = args.tenants
    if path is None and args.embedded and not os.environ.get("PREFIXKIT_TENANT_KEYS"):
        path = run_dir / "tenants.toml"
        if not path.exists():
            path.write_text(
                f'secret = "{secrets.token_hex(32)}"\n\n[tenants]\n'
                f'demo-a = "pk-demo-a-{secrets.token_hex(12)}"\n'
                f'demo-b = "pk-demo-b-{secrets.token_hex(12)}"\n'
            )
            path.chmod(0o600)
            console.print(f"created demo tenants and a salt secret in {path}")
    return path


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
    console.print(
        f"[bold green]serving[/] {config.name} at {deployment.url}/v1 "
        f"(block size {config.block_size}, hash {config.prefix_caching_hash_algo}); "
        f"`prefixkit serve status --run-dir {run_dir}` in another shell; Ctrl-C to stop"
    )


class _ConsoleReport:
    """`report(message)`: a live status line during long steps, plain lines otherwise."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.last_step = ""

    def __call__(self, message: str) -> None:
        if self.status is None:
            self.console.print(message, highlight=False, markup=False)
            return
        step = message.split(" (")[0]  # "(12 s)" suffixes update the line, not the log
        if step != self.last_step:
            self.console.print(step, style="dim", highlight=False, markup=False)
            self.last_step = step
        self.status.update(message)

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        with self.console.status("starting") as status:
            self.status = status
            try:
                yield
            finally:
                self.status = None


class _Stopped(Exception):
    """SIGTERM arrived: a service manager's normal way to stop `prefixkit serve` (exit 0;
    Ctrl-C is an interruption, exit 130)."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped
