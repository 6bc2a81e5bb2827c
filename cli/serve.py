"""Serve vLLM with prefix caching: replicas, a router for N > 1, and the tenant gateway.

    prefixkit serve --embedded                      # CPU engine + SmolLM2, installed if missing
    prefixkit serve --model DIR --device gpu --replicas 4 --tenants tenants.toml
    prefixkit serve status                          # health, block size, KV usage, hit rate

Topology: replicas (engine ports --engine-port, --engine-port+1, ...) -> a router when
--replicas > 1 (SMG cache_aware by default, --router precise for prefixkit's KV-event
router) -> the tenant gateway on --host:--port, which authenticates API keys and sets each
tenant's cache_salt. --no-gateway serves the replicas (or router) directly. Logs, KV-event
sockets and state live in --run-dir (default PREFIXKIT_HOME/runs/default). With --embedded and
no tenant keys configured, a tenants file with two demo tenants and a random secret is created
in the run directory (and reused next time).

The router is started by `prefixkit.engine_adapter.serving.router_launch.launch_router(replicas,
policy, host, port, run_dir, report)`, a context manager yielding the router's base URL.
The router uses --router-port and the port after it (SMG's Prometheus metrics); ports that
collide or are taken are reported before anything starts. Ctrl-C or SIGTERM stops the gateway, the router, then the replicas (SIGTERM, SIGKILL after
the grace period).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import math
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prefixkit.engine_adapter.engine.config import EngineConfig
    from prefixkit.engine_adapter.engine.replicas import ReplicaSet
    from rich.console import Console
    from rich.status import Status

__all__ = ["ROUTER_MODULE", "configure", "run"]

ROUTER_MODULE = "prefixkit.engine_adapter.serving.router_launch"
SERVE_STATE = "serve.json"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add `serve` options and the `status` action."""
    actions = parser.add_subparsers(dest="serve_action", metavar="ACTION")
    status = actions.add_parser("status", help="show each replica's health and cache metrics")
    status.add_argument("--run-dir", type=Path, default=None, help="run directory to inspect")
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

    topology = parser.add_argument_group("replicas, router and gateway")
    topology.add_argument("--replicas", type=int, default=1, help="number of vLLM replicas")
    topology.add_argument("--engine-port", type=int, default=8100, help="first replica's port")
    topology.add_argument(
        "--router", choices=["cache_aware", "precise"], default="cache_aware", help="for N > 1"
    )
    topology.add_argument("--router-port", type=int, default=8090)
    topology.add_argument(
        "--decision-log",
        action="store_true",
        help="--router precise: append every routing decision to RUN_DIR/decisions.jsonl",
    )
    topology.add_argument(
        "--smg-chars-per-token",
        type=float,
        default=None,
        help="--router cache_aware: your traffic's characters per token, which sizes "
        "SMG's tree from the replicas' KV capacity (default 4)",
    )
    topology.add_argument("--host", default="127.0.0.1", help="gateway address")
    topology.add_argument("--port", type=int, default=8000, help="gateway port")
    topology.add_argument("--tenants", type=Path, help="TOML file with [tenants] and secret")
    topology.add_argument("--no-gateway", action="store_true", help="serve without the gateway")
    topology.add_argument("--run-dir", type=Path, default=None, help="logs, sockets and state")
    topology.add_argument("--start-timeout", type=float, default=600.0, help="seconds")
    topology.add_argument("--grace", type=float, default=10.0, help="SIGTERM -> SIGKILL seconds")


def run(args: argparse.Namespace) -> int:
    """`prefixkit serve` / `prefixkit serve status`; returns the exit code."""
    from prefixkit.engine_adapter.engine.home import runs_dir
    from prefixkit.sdk.errors import PrefixkitError
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    run_dir = (args.run_dir or runs_dir() / "default").expanduser().resolve()
    try:
        if args.serve_action == "status":
            return _status(run_dir, args.interval, Console())
        return _serve(args, run_dir, console)
    except PrefixkitError as error:
        console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("stopped")
        return 130


def _serve(args: argparse.Namespace, run_dir: Path, console: Console) -> int:
    from prefixkit.engine_adapter.engine.replicas import ReplicaSet, replica_configs
    from prefixkit.engine_adapter.errors import DeploymentConfigError, EngineConfigError

    if args.replicas < 1:
        raise EngineConfigError(f"--replicas {args.replicas}: give at least 1")
    if args.decision_log and (args.replicas < 2 or args.router != "precise"):
        raise EngineConfigError(
            "--decision-log logs the precise router's decisions: "
            "give --replicas 2 or more and --router precise, or drop --decision-log"
        )
    if args.smg_chars_per_token is not None and (
        args.replicas < 2
        or args.router != "cache_aware"
        or not 0 < args.smg_chars_per_token < math.inf
    ):
        raise EngineConfigError(
            f"--smg-chars-per-token {args.smg_chars_per_token} sizes SMG's tree: give a "
            "positive ratio (len(text) / tokens of your traffic) with --replicas 2 or more "
            "and --router cache_aware, or drop it"
        )
    if args.replicas > 1 and importlib.util.find_spec(ROUTER_MODULE) is None:
        raise DeploymentConfigError(
            f"--replicas {args.replicas} needs a router between the gateway and the replicas, "
            f"and {ROUTER_MODULE} is not part of this installation: run with --replicas 1"
        )
    _check_ports(args)
    run_dir.mkdir(parents=True, exist_ok=True)
    report = _ConsoleReport(console)
    with report.live():
        base = _base_config(args, report)
    configs = replica_configs(
        base, args.replicas, run_dir, args.engine_port, kv_events=not args.no_kv_events
    )
    tenants, secret = (None, None) if args.no_gateway else _tenants(args, run_dir, console)
    replica_set = ReplicaSet(
        configs, run_dir, start_timeout=args.start_timeout, grace=args.grace, report=report
    )
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.ExitStack() as stack:
        with report.live():
            stack.enter_context(replica_set)
            upstream = replica_set.replicas[0].base_url
            if args.replicas > 1:
                router = importlib.import_module(ROUTER_MODULE)
                options: dict[str, Any] = {"decision_log": args.decision_log}
                if args.smg_chars_per_token is not None:
                    options["smg_chars_per_token"] = args.smg_chars_per_token
                upstream = stack.enter_context(
                    router.launch_router(
                        replica_set,
                        args.router,
                        "127.0.0.1",
                        args.router_port,
                        run_dir,
                        report,
                        **options,
                    )
                )
        endpoint = upstream if args.no_gateway else f"http://{args.host}:{args.port}"
        _write_serve_state(run_dir, replica_set, upstream, endpoint)
        _announce(console, replica_set, endpoint, configs[0], run_dir)
        if tenants is None or secret is None:
            while True:
                time.sleep(3600)
        _run_gateway(upstream, tenants, secret, args.host, args.port)
    return 0


def _check_ports(args: argparse.Namespace) -> None:
    """Fail before starting anything when the topology's ports collide or are taken."""
    from prefixkit.engine_adapter.engine.replicas import port_is_free
    from prefixkit.engine_adapter.errors import EngineConfigError

    ports = {f"replica {i}": args.engine_port + i for i in range(args.replicas)}
    if args.replicas > 1:
        # SMG also serves Prometheus metrics on the next port
        ports |= {"router": args.router_port, "router metrics": args.router_port + 1}
    if not args.no_gateway:
        ports["gateway"] = args.port
    owners: dict[int, str] = {}
    for role, port in ports.items():
        if port in owners:
            raise EngineConfigError(
                f"the {role} and the {owners[port]} would both use port {port}: "
                "change --port, --router-port or --engine-port"
            )
        owners[port] = role
    if not args.no_gateway and not port_is_free(args.host, args.port):
        raise EngineConfigError(
            f"gateway port {args.port} on {args.host} is already in use: choose another --port"
        )


def _base_config(args: argparse.Namespace, report: Any) -> EngineConfig:
    from prefixkit.engine_adapter.engine.config import EngineConfig
    from prefixkit.engine_adapter.engine.embedded import prepare_embedded
    from prefixkit.engine_adapter.errors import EngineConfigError

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
        }.items()
        if value is not None
    }
    if args.embedded:
        if args.model is not None:
            raise EngineConfigError("--embedded serves SmolLM2: drop --model, or drop --embedded")
        return prepare_embedded(report, **overrides)
    if args.model is None:
        raise EngineConfigError(
            "no model: give --model DIR (a local model directory) or --embedded "
            "(CPU engine with SmolLM2-135M-Instruct, installed if missing)"
        )
    return EngineConfig(model=args.model.expanduser().resolve(), **overrides)


def _tenants(
    args: argparse.Namespace, run_dir: Path, console: Console
) -> tuple[dict[str, str], str]:
    import os

    from prefixkit.engine_adapter.serving.gateway import load_secret, load_tenants

    path = args.tenants
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
    return load_tenants(path), load_secret(path)


def _run_gateway(upstream: str, tenants: dict[str, str], secret: str, host: str, port: int) -> None:
    from prefixkit.engine_adapter.serving.gateway import create_gateway
    from prefixkit.engine_adapter.serving.keepalive import served

    served(create_gateway(upstream, tenants, secret), host, port).run()


def _announce(
    console: Console, replicas: ReplicaSet, endpoint: str, config: EngineConfig, run_dir: Path
) -> None:
    for replica in replicas.replicas:
        console.print(
            f"replica {replica.index}: {replica.base_url} (pid {replica.pid}, "
            f"log {replica.log_path})"
        )
    console.print(
        f"[bold green]serving[/] {config.name} at {endpoint}/v1 "
        f"(block size {config.block_size}, hash {config.prefix_caching_hash_algo}); "
        f"`prefixkit serve status --run-dir {run_dir}` in another shell; Ctrl-C to stop"
    )


def _write_serve_state(run_dir: Path, replicas: ReplicaSet, upstream: str, endpoint: str) -> None:
    state = {"endpoint": endpoint, "upstream": upstream, "replicas": replicas.base_urls}
    (run_dir / SERVE_STATE).write_text(json.dumps(state, indent=2) + "\n")


def _status(run_dir: Path, interval: float, console: Console) -> int:
    import httpx
    from prefixkit.engine_adapter.engine.metrics import fetch_cache_metrics
    from prefixkit.engine_adapter.engine.replicas import STATE_FILE
    from rich.table import Table

    state_path = run_dir / STATE_FILE
    if not state_path.exists():
        console.print(
            f"nothing served from {run_dir} (no {STATE_FILE}): start `prefixkit serve`, "
            "or pass the --run-dir it used"
        )
        return 1
    replicas = json.loads(state_path.read_text())
    serve_state = run_dir / SERVE_STATE
    if serve_state.exists():
        console.print(f"endpoint: {json.loads(serve_state.read_text())['endpoint']}")

    def scrape(url: str) -> Any:
        try:
            return fetch_cache_metrics(url)
        except httpx.HTTPError:
            return None

    before = {r["url"]: scrape(r["url"]) for r in replicas}
    if interval > 0:
        time.sleep(interval)
    table = Table(title=f"replicas in {run_dir}")
    columns = (
        "#",
        "url",
        "pid",
        "state",
        "health",
        "restarts",
        "block",
        "KV use",
        "hit rate",
        "queried",
    )
    for column in columns:
        table.add_column(column)
    all_healthy = True
    for replica in replicas:
        url = replica["url"]
        try:
            healthy = httpx.get(f"{url}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            healthy = False
        all_healthy &= healthy
        metrics = scrape(url)
        earlier = before[url]
        if metrics is None:
            block = usage = rate = queried = "-"
        else:
            interval_stats = (
                metrics.since(earlier) if interval > 0 and earlier else metrics.lifetime
            )
            block = str(metrics.block_size)
            usage = f"{metrics.kv_usage:.1%}"
            rate = f"{interval_stats.hit_rate:.1%}"
            queried = f"{interval_stats.queried_tokens:,.0f}"
        table.add_row(
            str(replica["index"]),
            url,
            str(replica["pid"]),
            replica["state"],
            "[green]ok[/]" if healthy else "[red]down[/]",
            str(replica["restarts"]),
            block,
            usage,
            rate,
            queried,
        )
    console.print(table)
    span = f"over {interval:g} s" if interval > 0 else "since each replica started"
    console.print(f"hit rate = prefix-cache hit tokens / queried prompt tokens, {span}")
    return 0 if all_healthy else 1


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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
