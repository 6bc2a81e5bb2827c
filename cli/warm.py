"""Warm a new prompt version: send its static prefix once to every replica that will serve
it (max_tokens 1, once per tenant salt), and report what got cached.

    prefixkit lock                               # pin the new version (prompts/support@v4.md)
    prefixkit warm support@v4                    # every replica of `prefixkit serve`'s run dir
    prefixkit warm support@v4 --tenant acme      # only acme's salt
    prefixkit warm support@v4 --via router       # through the gateway and router instead
    prefixkit warm support@v4 --url http://HOST:8000   # a Ray Serve ingress (or any gateway)

Each KEY is a registered prompt (`name@version`, or `name` without a version), loaded from
--root and verified against the lock like `PromptRegistry.load`; it is rendered as the
application's system prompt, the way `render_vllm` renders it (padded to a block boundary
with the model's own tokenizer and chat template), and only its static prefix is sent.

Targets: by default each replica listed in RUN_DIR/serve.json (written by `prefixkit
serve`), directly, each warm request carrying the tenant's cache salt; `--via router`
sends them to the deployment's endpoint instead, with an operator's API key naming the
tenant (the tenants file's [operators]): the gateway salts them with that tenant's salt and
the router places them where it will place the real requests. A run
directory of `prefixkit serve --backend ray` is warmed through its gateway: each replica
(pinned with the x-prefixkit-replica header) with prefixkit's router, or through the router
(--via router) with Ray's routers. `--url` sends them through that gateway (a KubeRay
service, a remote deployment).

Tenants: the deployment's tenants file (--tenants, else PREFIXKIT_TENANT_KEYS and
PREFIXKIT_SALT_SECRET, else RUN_DIR/tenants.toml); every tenant unless --tenant is given.
--unsalted warms a deployment served without the gateway (--no-gateway), whose requests
carry no salt.

The tokenizer is the replicas' own model folder (from /v1/models) unless --tokenizer is
given; the block size comes from the replicas' metrics unless --block-size is given.
Exit codes: 0 every prefix cached, 1 some probe found less than the whole prefix cached
(a KV cache too small for it?), 2 configuration error (unknown prompt or tenant, no
tenants config), 3 a replica or gateway unreachable or answering an error.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .serve_state import SERVE_STATE  # what `prefixkit serve` writes in its run directory

if TYPE_CHECKING:
    from prefixkit.engine_adapter import Tenants, WarmReport, WarmTarget

__all__ = ["configure", "run"]

RAY_SPEC = "ray-spec.json"  # what `prefixkit serve --backend ray` deploys, in the same folder


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit warm` arguments."""
    parser.add_argument("keys", nargs="+", metavar="KEY", help="prompt keys, e.g. support@v4")
    parser.add_argument("--root", type=Path, default=Path("prompts"), help="prompt folder")
    parser.add_argument(
        "--lock", type=Path, default=None, help="lock file (default: beside the prompt folder)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--run-dir", type=Path, default=None, help="`prefixkit serve`'s run directory"
    )
    where.add_argument("--url", help="warm through this gateway (e.g. a Ray Serve ingress)")
    parser.add_argument(
        "--via",
        choices=["replicas", "router"],
        default=None,
        help="each replica directly (the default), or through the gateway and router",
    )
    tenants = parser.add_mutually_exclusive_group()
    tenants.add_argument("--tenants", type=Path, help="the deployment's tenants TOML file")
    tenants.add_argument(
        "--unsalted", action="store_true", help="the deployment has no gateway: no salts"
    )
    parser.add_argument(
        "--tenant", action="append", default=None, help="warm for this tenant (repeatable)"
    )
    parser.add_argument("--tokenizer", type=Path, help="the model's tokenizer folder")
    parser.add_argument("--block-size", type=int, default=None, help="the replicas' block size")
    parser.add_argument("--model", default=None, help="the served model name")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """Warm the prompts; 0 when every probe found its whole prefix cached, else 1."""
    from prefixkit.engine_adapter import registered_prompt, warm, warm_prefix
    from prefixkit.engine_adapter.engine.home import runs_dir
    from prefixkit.engine_adapter.serving.warmup import check_gateway_access
    from prefixkit.sdk import HFTokenizer, PromptRegistry, UsageError, require_extra

    require_extra("serve", "prefixkit warm", "httpx", "pydantic")
    require_extra("hf", "prefixkit warm", "transformers", "tokenizers", "jinja2")
    if args.block_size is not None and args.block_size < 1:
        raise UsageError(f"--block-size {args.block_size}: give a positive number of tokens")
    registry = PromptRegistry(args.root, lock_path=args.lock)
    segments = {key: registry.load(*_name_and_version(key)) for key in args.keys}
    run_dir = (args.run_dir or runs_dir() / "default").expanduser().resolve()
    tenants = None if args.unsalted else _tenants(args.tenants, run_dir)
    served = _served(args, run_dir)
    if not args.unsalted:
        check_gateway_access(served.targets, tenants)
    # the engines' metrics and model list through the gateway: an operator's view
    key = None if tenants is None else tenants.operator_key() or min(tenants.keys)
    headers = {} if key is None else {"authorization": f"Bearer {key}"}
    model, root = args.model or served.model, served.model_dir
    if model is None or (root is None and args.tokenizer is None):
        model, root = _served_model(served.discovery, headers)
    tokenizer = HFTokenizer(args.tokenizer or _tokenizer_folder(root))
    block_size = args.block_size or served.block_size or _block_size(served.discovery, headers)
    prefixes = [
        warm_prefix(key, registered_prompt(segment), tokenizer, block_size)
        for key, segment in segments.items()
    ]
    report = warm(
        prefixes, served.targets, model=args.model or model, tenants=tenants, tenant_ids=args.tenant
    )
    print(_render(report, args.json))
    return 0 if report.all_warmed else 1


@dataclass(frozen=True)
class _Served:
    """Where to warm, and what is known there without asking the server."""

    targets: list[WarmTarget]
    discovery: str  # a URL answering /v1/models and /metrics
    model: str | None = None
    model_dir: str | None = None
    block_size: int | None = None


def _served(args: argparse.Namespace, run_dir: Path) -> _Served:
    """The targets of --url, or of the local or Ray deployment in the run directory."""
    from prefixkit.engine_adapter.ray.launch import STATE_FILE as RAY_STATE
    from prefixkit.engine_adapter.serving.warmup import (
        WarmTarget,
        pinned_replica_targets,
        replica_targets,
    )
    from prefixkit.sdk import UsageError

    gateway = not args.unsalted
    if args.url is not None:
        if args.via == "replicas":
            raise UsageError(
                "--url warms through a gateway, which reaches no replica directly: drop "
                "--via replicas, or give --run-dir of the deployment instead of --url"
            )
        url = args.url.rstrip("/")
        return _Served([WarmTarget("gateway", url, gateway=gateway)], url)
    if (run_dir / RAY_STATE).exists() and not (run_dir / SERVE_STATE).exists():
        state = _read_state(run_dir / RAY_STATE)
        spec = _read_state(run_dir / RAY_SPEC)["app_args"]
        llm = spec["llm_config"]
        router, url = spec["router"], state["url"]
        if args.via == "router":
            targets = [WarmTarget("router", url, gateway=router != "kv-aware")]
        elif router == "prefixkit":
            targets = pinned_replica_targets(url, len(state["replicas"]))
        else:
            raise UsageError(
                f"the Ray deployment in {run_dir} routes with the {router} router, which "
                "cannot be told which replica to use: give --via router (the router then "
                "places the prefix where it will place the real requests)"
            )
        return _Served(
            targets,
            url,
            model=llm["model_loading_config"]["model_id"],
            model_dir=llm["model_loading_config"]["model_source"],
            block_size=llm["engine_kwargs"]["block_size"],
        )
    state = _read_state(run_dir / SERVE_STATE)
    if not state.get("replicas") or not state.get("endpoint"):
        raise UsageError(f"{run_dir / SERVE_STATE} lists no replicas: restart `prefixkit serve`")
    if args.via == "router":
        targets = [WarmTarget("router", state["endpoint"], gateway=gateway)]
    else:
        targets = replica_targets(state["replicas"])
    return _Served(targets, state["replicas"][0])


def _name_and_version(key: str) -> tuple[str, str | None]:
    name, at, version = key.partition("@")
    return name, (version if at else None)


def _tenants(path: Path | None, run_dir: Path) -> Tenants:
    """The tenants file given, else the environment, else the run dir's demo tenants."""
    from prefixkit.engine_adapter import Tenants

    if path is None and not os.environ.get("PREFIXKIT_TENANT_KEYS"):
        demo = run_dir / "tenants.toml"
        path = demo if demo.exists() else None
    return Tenants.load(path)


def _read_state(path: Path) -> dict[str, Any]:
    from prefixkit.sdk import UsageError

    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"nothing served from {path.parent} (no {path.name}): start `prefixkit serve`, "
            "pass the --run-dir it used, or give --url of the deployment's gateway"
        ) from None
    except ValueError:
        raise UsageError(f"{path} is not JSON: restart `prefixkit serve`") from None
    return state


def _served_model(url: str, headers: dict[str, str]) -> tuple[str, str | None]:
    """The served model name and its folder (`root`), from the server's /v1/models."""
    import httpx
    from prefixkit.engine_adapter import WarmupError

    try:
        response = httpx.get(f"{url}/v1/models", headers=headers, timeout=10.0)
    except httpx.HTTPError as error:
        raise WarmupError(
            f"{url} is unreachable ({type(error).__name__}): check that the deployment is "
            "running (`prefixkit serve status`) and the address",
            url=url,
        ) from None
    if response.status_code != 200:
        raise WarmupError(
            f"{url}/v1/models answered HTTP {response.status_code}: {response.text}",
            url=url,
            status=response.status_code,
        )
    (served, *_) = response.json()["data"]
    root = served.get("root")
    return str(served["id"]), root if isinstance(root, str) else None


def _tokenizer_folder(root: str | None) -> Path:
    from prefixkit.sdk import UsageError

    if root is None or not (Path(root) / "tokenizer_config.json").is_file():
        raise UsageError(
            f"the replicas' model folder {root!r} is not on this machine: give --tokenizer DIR "
            "(the served model's tokenizer folder)"
        )
    return Path(root)


def _block_size(url: str, headers: dict[str, str]) -> int:
    import httpx
    from prefixkit.engine_adapter.engine.metrics import parse_cache_metrics
    from prefixkit.sdk import UsageError

    response = httpx.get(f"{url}/metrics", headers=headers, timeout=10.0)
    block_size = parse_cache_metrics(response.text).block_size if response.is_success else None
    if block_size is None:
        raise UsageError(f"{url}/metrics does not say the block size: give --block-size")
    return block_size


def _render(report: WarmReport, as_json: bool) -> str:
    if as_json:
        rows = [
            {
                "prompt": r.key,
                "target": r.target,
                "url": r.url,
                "tenant": r.tenant,
                "prefix_tokens": r.prefix_tokens,
                "cached_before": r.cached_before,
                "cached_after": r.cached_after,
                "seconds": round(r.seconds, 4),
                "warmed": r.warmed,
            }
            for r in report.results
        ]
        return json.dumps({"warmed": report.all_warmed, "results": rows}, indent=2)
    lines = [
        f"{'prompt':<20} {'target':<12} {'tenant':<12} {'prefix':>7} {'before':>7} "
        f"{'after':>7} {'time':>8}"
    ]
    for r in report.results:
        after = "?" if r.cached_after is None else str(r.cached_after)
        before = "?" if r.cached_before is None else str(r.cached_before)
        lines.append(
            f"{r.key:<20} {r.target:<12} {r.tenant or '-':<12} {r.prefix_tokens:>7} "
            f"{before:>7} {after:>7} {r.seconds * 1000:>6.0f} ms"
            + ("" if r.warmed else "  NOT CACHED")
        )
    done = sum(r.warmed for r in report.results)
    lines.append(
        f"{done} of {len(report.results)} warm requests left their whole prefix cached "
        "(prefix: tokens of whole blocks; before: already cached; after: found by a probe)"
    )
    return "\n".join(lines)
