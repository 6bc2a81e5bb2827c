"""What both backends of `prefixkit serve` read from the shared options: the engine's
config (--model or --embedded and the engine group), the tenants file (--tenants, or the
demo tenants of --embedded) and the gateway's limits."""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prefixkit.engine_adapter import EngineConfig, Limits
    from rich.console import Console

__all__ = ["add_limit_options", "engine_config", "limits_of", "tenants_file"]

# the gateway's `Limits` as options: field, type, help
_LIMITS: tuple[tuple[str, type, str], ...] = (
    ("max_body_bytes", int, "refuse request bodies larger than this (413)"),
    ("max_json_depth", int, "refuse JSON bodies nested deeper (400)"),
    ("header_timeout_s", float, "seconds for a request's head to arrive (408)"),
    ("body_timeout_s", float, "seconds for a request's body to arrive (408)"),
    ("max_inflight_per_tenant", int, "a tenant's requests in flight at most (429)"),
    ("upstream_connect_timeout_s", float, "seconds to connect to an engine"),
    ("upstream_read_timeout_s", float, "seconds to wait for each chunk of an engine's answer"),
)


def add_limit_options(group: argparse._ArgumentGroup) -> None:
    """--max-body-bytes ... --upstream-read-timeout-s, defaulting to `Limits()`'s."""
    from prefixkit.engine_adapter import Limits

    defaults = Limits()
    for name, kind, help_text in _LIMITS:
        group.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=getattr(defaults, name),
            metavar="N",
            help=f"{help_text} (default {getattr(defaults, name)})",
        )


def limits_of(args: argparse.Namespace) -> Limits:
    """The gateway's `Limits` from the parsed options."""
    from prefixkit.engine_adapter import Limits

    return Limits(**{name: getattr(args, name) for name, _, _ in _LIMITS})


def engine_config(args: argparse.Namespace, report: Any) -> EngineConfig:
    """The replicas' `EngineConfig`: --model with the engine options given, or with
    --embedded the CPU engine and SmolLM2 (installed and prepared if missing, told to
    `report`)."""
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
            "kv_tiers": tuple(args.kv_tier) if args.kv_tier else None,
            "single_tenant": args.single_tenant,
            "tool_call_parser": args.tool_call_parser,
        }.items()
        if value is not None
    }
    if args.embedded:
        return prepare_embedded(report, **overrides)
    return EngineConfig(model=args.model.expanduser().resolve(), **overrides)


def tenants_file(args: argparse.Namespace, run_dir: Path, console: Console) -> Path | None:
    """--tenants, or with --embedded and no keys in the environment, the demo tenants file
    of the run directory (created with two demo tenants, an operator and a random secret if
    missing)."""
    path: Path | None = args.tenants
    if path is None and args.embedded and not os.environ.get("PREFIXKIT_TENANT_KEYS"):
        path = run_dir / "tenants.toml"
        if not path.exists():
            path.write_text(
                f'secret = "{secrets.token_hex(32)}"\n\n[tenants]\n'
                f'demo-a = "pk-demo-a-{secrets.token_hex(12)}"\n'
                f'demo-b = "pk-demo-b-{secrets.token_hex(12)}"\n\n[operators]\n'
                f'ops = "pk-ops-{secrets.token_hex(12)}"\n'
            )
            path.chmod(0o600)
            console.print(f"created demo tenants, an operator key and a salt secret in {path}")
    return path
