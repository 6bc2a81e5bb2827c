"""Replay a request trace over N simulated replicas and compare routing policies.

Reads a Mooncake trace (`hash_ids` per request) or a request log (`token_ids`,
or `prompt` / `messages` with --tokenizer), then reports the sharing rate, the
oracle hit rates (infinite cache; one shared cache of N x --capacity blocks) and,
per policy (round_robin, consistent_hash, smg_like, precise), the token hit rate,
its ratio to the capacity oracle, load imbalance and prefill tokens saved.

    prefixkit analyze trace.jsonl --replicas 8 --capacity 500
    prefixkit analyze trace.jsonl --format json --plot policies.png

Load model (for the policies' load terms): a replica prefills one request at a
time at --prefill-tokens-per-s and decodes in parallel at --decode-tokens-per-s
per request; --time-scale compresses arrival times.

--tiers replays the trace through GPU -> CPU -> disk tiers per replica instead (a
simulation: `prefixkit.engine_adapter.tiers`): hit rate per tier, prefill tokens
saved and the estimated time to first token against the GPU alone, under vLLM's rule
(load every lower-tier hit) and a fetch-only-when-faster rule, and a sweep over one
tier's size that says where more memory stops paying.

    prefixkit analyze trace.jsonl --tiers --model-config MODEL_DIR \
        --kv-tier gpu:32GiB --kv-tier cpu:256GiB --kv-tier disk:2TiB --gpu h100
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefixkit.engine_adapter import Trace
    from rich.table import Table

__all__ = ["configure", "run"]

# kept in step with prefixkit.engine_adapter.tiers.hardware (a test checks), so that
# building the parser imports no part of the replay
_GPU_NAMES = ("h100", "a100-80gb", "a100-40gb", "l4")
_LINK_NAMES = ("pcie4", "pcie5", "nvme", "net100", "net400")
_TIER_NAMES = ("gpu", "cpu", "disk")
_DEFAULT_POLICIES = "round_robin,consistent_hash,smg_like,precise"
_DEFAULT_TIER_POLICIES = "round_robin,precise,precise_tiered"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace", help="JSONL trace: Mooncake hash_ids, token_ids, prompt or messages"
    )
    parser.add_argument("--replicas", type=int, default=8, help="number of replicas (default 8)")
    parser.add_argument(
        "--capacity",
        type=int,
        default=None,
        help="KV cache blocks per replica (default: unbounded)",
    )
    parser.add_argument(
        "--block-size", type=int, default=None, help="tokens per block (Mooncake: 512)"
    )
    parser.add_argument(
        "--tokenizer", default=None, help="local tokenizer dir for prompt/messages logs"
    )
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N requests")
    parser.add_argument(
        "--policies",
        default=None,
        help="comma-separated policies to replay (default: round_robin,consistent_hash,"
        "smg_like,precise; with --tiers: round_robin,precise,precise_tiered)",
    )
    parser.add_argument("--prefill-tokens-per-s", type=float, default=10_000.0)
    parser.add_argument("--decode-tokens-per-s", type=float, default=30.0)
    parser.add_argument("--time-scale", type=float, default=1.0, help="compress arrivals N times")
    parser.add_argument(
        "--smg-max-tree-size",
        type=int,
        default=67_108_864,
        help="SMG's --max-tree-size in characters per worker (its default), for smg_like",
    )
    parser.add_argument(
        "--chars-per-token",
        type=float,
        default=4.0,
        help="converts SMG's character budget into blocks (default 4)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--plot", default=None, metavar="PNG", help="write a bar chart")
    tiers = parser.add_argument_group(
        "KV tiers (--tiers)", "replay through GPU -> CPU -> disk tiers per replica"
    )
    tiers.add_argument(
        "--tiers", action="store_true", help="replay through KV cache tiers (a simulation)"
    )
    tiers.add_argument(
        "--kv-tier",
        action="append",
        default=[],
        metavar="TIER:SIZE",
        help="a tier's KV capacity per replica, e.g. gpu:32GiB, cpu:256GiB, disk:2TiB "
        "(repeat; gpu defaults to --capacity blocks)",
    )
    tiers.add_argument(
        "--gpu",
        default="h100",
        help=f"GPU preset: {', '.join(_GPU_NAMES)} (default h100; sets the CPU link "
        "default: pcie5 for h100, else pcie4)",
    )
    tiers.add_argument(
        "--cpu-read",
        default=None,
        metavar="RATE",
        help=f"host RAM -> GPU read bandwidth: {', '.join(_LINK_NAMES)} or a rate like "
        "20GB/s (B: bytes; b: bits, 100Gb/s = 12.5GB/s)",
    )
    tiers.add_argument(
        "--disk-read",
        default="nvme",
        metavar="RATE",
        help="disk or shared store -> host RAM read bandwidth (default nvme; net100, "
        "net400 or a rate like 5GB/s or 100Gb/s); a disk block then crosses the CPU link too",
    )
    tiers.add_argument(
        "--model-config",
        default=None,
        metavar="PATH",
        help="the served model's config.json (or its folder): KV bytes per token",
    )
    tiers.add_argument(
        "--kv-bytes-per-token",
        type=float,
        default=None,
        help="KV bytes per token, instead of --model-config",
    )
    tiers.add_argument(
        "--kv-cache-dtype",
        default="auto",
        help="vLLM's --kv-cache-dtype (auto: the model's dtype; fp8: one byte)",
    )
    tiers.add_argument(
        "--sweep",
        default=None,
        metavar="TIER",
        help="the tier whose size is swept (default: cpu if given, else disk, else gpu; "
        "'none' for no sweep)",
    )
    tiers.add_argument(
        "--sweep-sizes",
        default=None,
        metavar="SIZES",
        help="comma-separated sizes, e.g. 0GiB,64GiB,256GiB (default: 0 and 1/8 to 4x "
        "the tier's size)",
    )
    tiers.add_argument(
        "--router-bandwidth-scale",
        default=None,
        metavar="FACTORS",
        help="also replay precise_tiered with its router believing every link this many "
        "times as fast, e.g. 0.5,2 (misestimated bandwidths)",
    )
    tiers.add_argument(
        "--min-gain",
        type=float,
        default=0.005,
        help="a tier stops paying where doubling it saves less than this share of all "
        "prompts' prefill time more (default 0.005: half a percentage point)",
    )


def _recommendation(analysis: object) -> str:
    from prefixkit.engine_adapter.replay.replay import Analysis

    assert isinstance(analysis, Analysis)
    if analysis.oracle_infinite < 0.05:
        return (
            f"Caching barely pays for this traffic: even an infinite cache hits "
            f"{analysis.oracle_infinite:.1%} of prompt tokens; route for load (round_robin)."
        )
    best = max(analysis.results, key=lambda r: (r.hit_rate, -r.imbalance))
    return (
        f"Caching pays: up to {analysis.oracle_infinite:.1%} of prompt tokens are reusable. "
        f"Use {best.policy} ({best.hit_rate:.1%} hit rate, {best.oracle_ratio:.2f} of the "
        f"capacity oracle, imbalance {best.imbalance:.2f})."
    )


def _plot(analysis: object, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from prefixkit.engine_adapter.replay.replay import Analysis

    assert isinstance(analysis, Analysis)
    names = [r.policy for r in analysis.results]
    rates = [r.hit_rate for r in analysis.results]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, rates, color="#4477aa")
    ax.axhline(
        analysis.oracle_capacity, color="#cc6677", linestyle="--", label="shared-cache oracle"
    )
    ax.axhline(
        analysis.oracle_infinite, color="#999933", linestyle=":", label="infinite-cache oracle"
    )
    ax.set_ylabel("token hit rate")
    capacity = (
        "unbounded" if analysis.capacity_blocks is None else f"{analysis.capacity_blocks} blocks"
    )
    ax.set_title(f"{analysis.requests} requests, {analysis.replicas} replicas x {capacity}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _check_numbers(args: argparse.Namespace) -> None:
    """Counts and rates that cannot work are usage errors, named, before the replay."""
    from prefixkit.sdk import UsageError

    for option, value in (
        ("--replicas", args.replicas),
        ("--capacity", args.capacity),
        ("--block-size", args.block_size),
        ("--limit", args.limit),
        ("--prefill-tokens-per-s", args.prefill_tokens_per_s),
        ("--decode-tokens-per-s", args.decode_tokens_per_s),
        ("--time-scale", args.time_scale),
        ("--smg-max-tree-size", args.smg_max_tree_size),
        ("--chars-per-token", args.chars_per_token),
    ):
        if value is not None and not 0 < value < float("inf"):
            raise UsageError(f"{option} {value}: give a positive number")


def _check_plot(path: Path) -> None:
    """The plot can be written where asked, in a format matplotlib writes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from prefixkit.sdk import UsageError

    if not path.parent.is_dir():
        raise UsageError(f"--plot {path}: the folder {path.parent} does not exist")
    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise UsageError(
            f"--plot {path}: give a file name ending in one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )


def run(args: argparse.Namespace) -> int:
    from prefixkit.sdk import require_extra

    require_extra("analyze", "prefixkit analyze", "rich")
    if args.plot is not None:  # checked now, not after the replay
        require_extra("analyze", "prefixkit analyze --plot", "matplotlib")
    from prefixkit.engine_adapter import LoadParams, analyze
    from prefixkit.engine_adapter.replay.policies import POLICY_NAMES
    from prefixkit.sdk import UsageError
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    err = Console(stderr=True)
    if args.tiers:
        return _run_tiers(args)
    _check_tier_options_need_tiers(args)
    policies = [p.strip() for p in (args.policies or _DEFAULT_POLICIES).split(",")]
    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown:
        raise UsageError(f"unknown policies {unknown}: choose from {', '.join(POLICY_NAMES)}")
    _check_numbers(args)
    if args.plot is not None:
        _check_plot(Path(args.plot))
    trace = _salted_trace(args)
    load = LoadParams(
        prefill_s_per_block=trace.block_size / args.prefill_tokens_per_s,
        decode_s_per_token=1.0 / args.decode_tokens_per_s,
        time_scale=args.time_scale,
    )
    tree_blocks = max(1, int(args.smg_max_tree_size / args.chars_per_token / trace.block_size))
    with Progress(
        console=err, transient=True, disable=args.format == "json" or not err.is_terminal
    ) as bar:
        task = bar.add_task("replaying", total=len(trace) * len(policies))
        analysis = analyze(
            trace,
            args.replicas,
            args.capacity,
            load,
            policies=policies,
            max_tree_blocks=tree_blocks,
            progress=lambda n: bar.advance(task, n),
        )
    if args.plot:
        _plot(analysis, args.plot)
    if args.format == "json":
        json.dump([r.as_json() for r in analysis.results], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out = Console()
    capacity = "unbounded" if args.capacity is None else f"{args.capacity} blocks"
    table = Table(
        title=f"{len(trace)} requests, {args.replicas} replicas x {capacity} "
        f"({trace.block_size}-token blocks)"
    )
    for column in (
        "policy",
        "hit rate",
        "/ oracle",
        "imbalance",
        "uncached imb.",
        "prefill tokens saved",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for r in analysis.results:
        table.add_row(
            r.policy,
            f"{r.hit_rate:.3f}",
            f"{r.oracle_ratio:.3f}",
            f"{r.imbalance:.2f}",
            f"{r.uncached_imbalance:.2f}",
            f"{r.prefill_tokens_saved:,}",
        )
    out.print(
        f"sharing rate {analysis.sharing_rate:.3f}   oracle: infinite cache "
        f"{analysis.oracle_infinite:.3f}, shared cache of {args.replicas} x {capacity} "
        f"{analysis.oracle_capacity:.3f}"
    )
    out.print(table)
    out.print(_recommendation(analysis))
    return 0


_TIER_ONLY_OPTIONS: tuple[tuple[str, str, object], ...] = (
    ("--kv-tier", "kv_tier", []),
    ("--cpu-read", "cpu_read", None),
    ("--model-config", "model_config", None),
    ("--kv-bytes-per-token", "kv_bytes_per_token", None),
    ("--sweep", "sweep", None),
    ("--sweep-sizes", "sweep_sizes", None),
    ("--router-bandwidth-scale", "router_bandwidth_scale", None),
    ("--gpu", "gpu", "h100"),
    ("--disk-read", "disk_read", "nvme"),
    ("--kv-cache-dtype", "kv_cache_dtype", "auto"),
    ("--min-gain", "min_gain", 0.005),
)


def _salted_trace(args: argparse.Namespace) -> Trace:
    """The trace, its blocks kept apart per request salt (``cache_salt``, else ``tenant``,
    in any format): requests of different salts share no block, in the plain replay as in
    the tiered one."""
    from prefixkit.engine_adapter import load_trace
    from prefixkit.engine_adapter.tiers.simulate import read_salts, salted

    trace = load_trace(
        args.trace, block_size=args.block_size, tokenizer=args.tokenizer, limit=args.limit
    )
    salts = read_salts(args.trace, args.limit)
    return trace if salts is None else salted(trace, salts)


def _check_tier_options_need_tiers(args: argparse.Namespace) -> None:
    from prefixkit.sdk import UsageError

    for option, name, default in _TIER_ONLY_OPTIONS:
        if getattr(args, name) != default:
            raise UsageError(f"{option} applies to the tiered replay: add --tiers", argument=option)


def _size(option: str, text: str) -> int:
    from prefixkit.engine_adapter.tiers.hardware import parse_size
    from prefixkit.sdk import UsageError

    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text}: {exc}", argument=option, value=text) from None


def _rate(option: str, text: str) -> float:
    from prefixkit.engine_adapter.tiers.hardware import parse_rate
    from prefixkit.sdk import UsageError

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text}: {exc}", argument=option, value=text) from None


def _tier_sizes(
    args: argparse.Namespace, bytes_per_token: float, block_size: int
) -> dict[str, int]:
    """Each tier's bytes per replica from --kv-tier (gpu from --capacity if not given)."""
    from prefixkit.sdk import UsageError

    sizes: dict[str, int] = {}
    for item in args.kv_tier:
        name, colon, size = item.partition(":")
        name = name.strip().lower()
        if not colon or name not in _TIER_NAMES:
            raise UsageError(
                f"--kv-tier {item}: give TIER:SIZE with TIER one of {', '.join(_TIER_NAMES)}, "
                "e.g. cpu:64GiB",
                argument="--kv-tier",
                value=item,
            )
        if name in sizes:
            raise UsageError(
                f"--kv-tier {item}: the {name} tier is given twice; give it once",
                argument="--kv-tier",
                value=item,
            )
        if ":" in size:
            raise UsageError(
                f"--kv-tier {item}: analyze simulates a tier's size only: give {name}:SIZE, "
                f"e.g. {name}:500GiB (the TIER:PATH:SIZE form is `prefixkit serve`'s)",
                argument="--kv-tier",
                value=item,
            )
        try:
            sizes[name] = _size("--kv-tier", size)
        except UsageError as exc:
            raise UsageError(
                f"--kv-tier {item}: {str(exc).partition(': ')[2]}",
                argument="--kv-tier",
                value=item,
            ) from None
    if "gpu" in sizes and args.capacity is not None:
        raise UsageError(
            "--capacity and --kv-tier gpu:SIZE both give the GPU tier: give one of them",
            argument="--capacity",
            value=args.capacity,
        )
    if "gpu" not in sizes:
        if args.capacity is None:
            raise UsageError(
                "--tiers needs the GPU's KV capacity per replica: give --kv-tier gpu:SIZE "
                "(the GPU memory vLLM leaves for KV cache) or --capacity BLOCKS",
                argument="--kv-tier",
            )
        sizes["gpu"] = int(args.capacity * block_size * bytes_per_token)
    return sizes


def _bytes_per_token(args: argparse.Namespace, prefix_tokens: int) -> tuple[float, str]:
    """KV bytes per token and where they come from."""
    from prefixkit.engine_adapter.tiers.kv_layout import kv_layout, load_model_config
    from prefixkit.sdk import UsageError

    if args.model_config is None and args.kv_bytes_per_token is None:
        raise UsageError(
            "--tiers needs the KV size of a token: give --model-config (the served model's "
            "config.json or folder) or --kv-bytes-per-token N",
            argument="--model-config",
        )
    if args.model_config is not None and args.kv_bytes_per_token is not None:
        raise UsageError(
            "--model-config and --kv-bytes-per-token both give the KV size of a token: "
            "give one of them",
            argument="--kv-bytes-per-token",
            value=args.kv_bytes_per_token,
        )
    if args.kv_bytes_per_token is not None and args.kv_cache_dtype != "auto":
        raise UsageError(
            f"--kv-cache-dtype {args.kv_cache_dtype} does not apply to --kv-bytes-per-token "
            "(the KV bytes of a token, as given): drop it, or give --model-config to size "
            f"the KV cache in {args.kv_cache_dtype}",
            argument="--kv-cache-dtype",
            value=args.kv_cache_dtype,
        )
    if args.kv_bytes_per_token is not None:
        if not 0 < args.kv_bytes_per_token < float("inf"):
            raise UsageError(
                f"--kv-bytes-per-token {args.kv_bytes_per_token}: give a positive number",
                argument="--kv-bytes-per-token",
                value=args.kv_bytes_per_token,
            )
        return float(args.kv_bytes_per_token), "--kv-bytes-per-token"
    layout = kv_layout(load_model_config(args.model_config), kv_cache_dtype=args.kv_cache_dtype)
    per_token = layout.bytes_per_token(max(prefix_tokens, 1))
    source = f"{args.model_config}"
    if layout.window_tokens is not None:
        source += f" (sliding window {layout.window_tokens}, at the mean prompt {prefix_tokens})"
    return per_token, source


def _tier_setup(
    args: argparse.Namespace, block_size: int, mean_prompt: int
) -> tuple[object, dict[str, object]]:
    """The `TierSetup` the options describe, and the inputs it assumes (for the output)."""
    from prefixkit.engine_adapter.tiers.fetch import Tier
    from prefixkit.engine_adapter.tiers.hardware import GPUS, LINKS
    from prefixkit.engine_adapter.tiers.simulate import TierSetup
    from prefixkit.sdk import UsageError

    gpu = GPUS.get(args.gpu.strip().lower())
    if gpu is None:
        raise UsageError(
            f"--gpu {args.gpu}: unknown GPU preset; choose from {', '.join(GPUS)}",
            argument="--gpu",
            value=args.gpu,
        )
    bytes_per_token, source = _bytes_per_token(args, mean_prompt)
    sizes = _tier_sizes(args, bytes_per_token, block_size)
    if sizes["gpu"] > gpu.hbm_bytes:
        given = (
            f"--capacity {args.capacity} blocks"
            if args.capacity is not None
            else "--kv-tier gpu:SIZE"
        )
        raise UsageError(
            f"the GPU tier ({sizes['gpu'] / 1e9:g} GB) is more than the {gpu.name}'s "
            f"{gpu.hbm_bytes / 1e9:g} GB of memory: give the KV cache's share of it "
            f"({given}) or another --gpu",
            argument=given.partition(" ")[0],
            value=sizes["gpu"],
        )
    if sizes.get("disk", 0) and sizes.get("cpu", 0) < block_size * bytes_per_token:
        raise UsageError(
            "a disk tier needs a cpu tier: vLLM reads and writes its disk tier through host "
            "RAM (TieringOffloadingSpec), so `prefixkit serve` refuses a disk tier without "
            "one; add --kv-tier cpu:SIZE (at least one block)",
            argument="--kv-tier",
        )
    cpu_link = args.cpu_read or ("pcie5" if gpu.name == "h100" else "pcie4")
    cpu_rate = _rate("--cpu-read", cpu_link)
    disk_rate = _rate("--disk-read", args.disk_read)
    tiers = (
        Tier("GPU", sizes["gpu"]),
        Tier("CPU", sizes.get("cpu", 0), (cpu_rate,)),
        Tier("DISK", sizes.get("disk", 0), (disk_rate, cpu_rate)),
    )
    setup = TierSetup(tiers, bytes_per_token, args.prefill_tokens_per_s)
    inputs: dict[str, object] = {
        "gpu": gpu.name,
        "kv_bytes_per_token": round(bytes_per_token, 1),
        "kv_bytes_source": source,
        "block_tokens": block_size,
        "prefill_tokens_per_s": args.prefill_tokens_per_s,
        "tier_bytes": {t.name: t.capacity_bytes for t in tiers},
        "cpu_read": LINKS[cpu_link].name if cpu_link in LINKS else cpu_link,
        "cpu_read_bytes_per_s": cpu_rate,
        "disk_read": args.disk_read,
        "disk_read_bytes_per_s": disk_rate,
    }
    return setup, inputs


def _sweep_sizes(args: argparse.Namespace, sweep: str, setup: object, block_size: int) -> list[int]:
    """The distinct sizes of the swept tier, smallest first: --sweep-sizes, or 0 and 1/8 to
    4x its given size; sizes the tier cannot take are refused (given) or left out
    (default), and a sweep of fewer than two sizes is refused (it compares nothing)."""
    from prefixkit.engine_adapter.tiers.hardware import GPUS
    from prefixkit.engine_adapter.tiers.simulate import TierSetup
    from prefixkit.engine_adapter.tiers.sweep import default_sizes
    from prefixkit.sdk import UsageError

    assert isinstance(setup, TierSetup)
    given = setup.tiers[_TIER_NAMES.index(sweep)].capacity_bytes
    block_bytes = block_size * setup.bytes_per_token
    explicit = args.sweep_sizes is not None
    if explicit:
        sizes = [
            _size("--sweep-sizes", text) for text in args.sweep_sizes.split(",") if text.strip()
        ]
    elif sweep != "gpu" and not given:
        raise UsageError(
            f"--sweep {sweep}: there is no {sweep} tier to sweep around: give --kv-tier "
            f"{sweep}:SIZE or the sizes to sweep (--sweep-sizes)",
            argument="--sweep",
            value=sweep,
        )
    else:
        sizes = default_sizes(given)
    # (size, why the tier cannot take it)
    cannot: list[tuple[int, str]] = []
    if sweep == "gpu":
        hbm = GPUS[args.gpu.strip().lower()].hbm_bytes
        cannot += [(s, f"holds no block of {block_size} tokens") for s in sizes if s < block_bytes]
        cannot += [
            (s, f"is more than the {args.gpu.strip().lower()}'s {hbm / 1e9:g} GB of memory")
            for s in sizes
            if s > hbm
        ]
    elif sweep == "cpu" and setup.tiers[2].capacity_bytes:
        cannot += [
            (s, "holds no block, and vLLM reads and writes the disk tier through host RAM")
            for s in sizes
            if s < block_bytes
        ]
    elif sweep == "disk" and setup.tiers[1].capacity_bytes < block_bytes:
        cannot += [
            (s, "needs a cpu tier: vLLM reads and writes the disk tier through host RAM")
            for s in sizes
            if s >= block_bytes
        ]
    if cannot and explicit:
        size, why = cannot[0]
        raise UsageError(
            f"--sweep-sizes {args.sweep_sizes}: a {sweep} tier of {_binary(size)} {why}",
            argument="--sweep-sizes",
            value=args.sweep_sizes,
        )
    left_out = {s for s, _ in cannot}
    distinct = sorted({s for s in sizes if s not in left_out})
    if len(distinct) < 2:
        raise UsageError(
            f"--sweep {sweep}: a sweep compares two sizes or more, and "
            + (f"only {_binary(distinct[0])} is left" if distinct else "no size is left")
            + (
                f" of --sweep-sizes {args.sweep_sizes}"
                if explicit
                else f" around the {sweep} tier's {_binary(given)}"
            )
            + ": give two sizes or more (--sweep-sizes), or --sweep none",
            argument="--sweep-sizes" if explicit else "--sweep",
            value=args.sweep_sizes if explicit else sweep,
        )
    return distinct


def _router_scales(text: str | None) -> list[float]:
    from prefixkit.sdk import UsageError

    scales = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        try:
            factor = float(item)
        except ValueError:
            factor = -1.0
        if not 0 < factor < float("inf"):
            raise UsageError(
                f"--router-bandwidth-scale {text}: give positive factors, e.g. 0.5,2",
                argument="--router-bandwidth-scale",
                value=text,
            )
        scales.append(factor)
    return scales


def _binary(size: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"


def _run_table(
    title: str,
    columns: Sequence[str],
    keys: Sequence[tuple[str, str]],
    cells: Sequence[Sequence[str]],
    *,
    narrow: bool = False,
) -> Table:
    """One row per run: its policy and run label, then `cells` under `columns` (`narrow`:
    no vertical rules)."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD) if narrow else Table(title=title)
    table.add_column("policy", no_wrap=True)
    table.add_column("run", no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for (policy, label), row in zip(keys, cells, strict=True):
        table.add_row(policy, label, *row)
    return table


def _run_tiers(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from prefixkit.engine_adapter import LoadParams
    from prefixkit.engine_adapter.tiers.kv_layout import KvLayoutError
    from prefixkit.engine_adapter.tiers.simulate import (
        TIERED_POLICY_NAMES,
        TieredResult,
        TierSetup,
        read_salts,
        simulate_tiers,
    )
    from prefixkit.engine_adapter.tiers.sweep import stops_paying, sweep_tier
    from prefixkit.sdk import UsageError
    from rich.console import Console
    from rich.table import Table

    policies = [p.strip() for p in (args.policies or _DEFAULT_TIER_POLICIES).split(",")]
    unknown = [p for p in policies if p not in TIERED_POLICY_NAMES]
    if unknown:
        raise UsageError(
            f"unknown policies {unknown}: with --tiers choose from "
            f"{', '.join(TIERED_POLICY_NAMES)}",
            argument="--policies",
            value=args.policies,
        )
    _check_numbers(args)
    if not 0 <= args.min_gain < 1:
        raise UsageError(
            f"--min-gain {args.min_gain}: give a share of prefill time between 0 and 1, e.g. 0.005",
            argument="--min-gain",
            value=args.min_gain,
        )
    if args.plot is not None:
        _check_plot(Path(args.plot))
    sweep = (args.sweep or "").strip().lower()
    if sweep and sweep != "none" and sweep not in _TIER_NAMES:
        raise UsageError(
            f"--sweep {args.sweep}: give one of {', '.join(_TIER_NAMES)} or none",
            argument="--sweep",
            value=args.sweep,
        )
    scales = _router_scales(args.router_bandwidth_scale)
    trace = _salted_trace(args)
    salts = read_salts(args.trace, args.limit)
    mean_prompt = trace.total_input_tokens // max(len(trace), 1)
    try:
        setup, inputs = _tier_setup(args, trace.block_size, mean_prompt)
    except KvLayoutError as exc:
        if exc.field == "kv_cache_dtype":
            raise UsageError(
                f"--kv-cache-dtype {args.kv_cache_dtype}: {exc}",
                argument="--kv-cache-dtype",
                value=args.kv_cache_dtype,
            ) from exc
        raise UsageError(
            f"--model-config {args.model_config}: {exc}", argument="--model-config"
        ) from exc
    assert isinstance(setup, TierSetup)
    inputs["salted"] = salts is not None
    if setup.capacities(trace.block_size)[0] < 1:
        raise UsageError(
            f"the GPU tier ({_binary(setup.tiers[0].capacity_bytes)}) holds no block of "
            f"{trace.block_size} tokens at {setup.bytes_per_token:g} bytes per token: "
            "give a larger --kv-tier gpu:SIZE",
            argument="--kv-tier",
        )
    if not sweep:
        sweep = next(
            (n for n in ("cpu", "disk") if setup.tiers[_TIER_NAMES.index(n)].capacity_bytes),
            "gpu",
        )
    # checked before any replay
    sizes = [] if sweep == "none" else _sweep_sizes(args, sweep, setup, trace.block_size)
    load = LoadParams(
        prefill_s_per_block=trace.block_size / args.prefill_tokens_per_s,
        decode_s_per_token=1.0 / args.decode_tokens_per_s,
        time_scale=args.time_scale,
    )
    tree_blocks = max(1, int(args.smg_max_tree_size / args.chars_per_token / trace.block_size))
    gpu_only = TierSetup(
        (setup.tiers[0], *(replace(t, capacity_bytes=0) for t in setup.tiers[1:])),
        setup.bytes_per_token,
        setup.prefill_tokens_per_s,
    )
    has_lower = any(t.capacity_bytes for t in setup.tiers[1:])
    if scales and ("precise_tiered" not in policies or not has_lower):
        raise UsageError(
            f"--router-bandwidth-scale {args.router_bandwidth_scale}: it replays "
            "precise_tiered with a lower tier, and "
            + (
                "--policies has no precise_tiered: add it"
                if "precise_tiered" not in policies
                else "there is no lower tier: give --kv-tier cpu:SIZE"
            ),
            argument="--router-bandwidth-scale",
            value=args.router_bandwidth_scale,
        )
    # the fetch-only-when-faster rule differs from vLLM's only where a tier is slower
    # than recompute
    rules_differ = any(s < 0 for s in setup.savings(trace.block_size))
    rows: list[tuple[str, TieredResult]] = []
    for policy in policies:
        runs: list[tuple[str, TierSetup]] = []
        # precise_tiered over the GPU alone is precise
        if policy != "precise_tiered" or "precise" not in policies:
            runs.append(("GPU only", gpu_only))
        if has_lower:
            runs.append(("load all", replace(setup, rule="always_load")))
            if rules_differ:
                runs.append(("if faster", replace(setup, rule="when_faster")))
        for label, config in runs:
            result = simulate_tiers(
                trace, config, args.replicas, load, policy=policy, max_tree_blocks=tree_blocks
            )
            rows.append((label, result))
        if policy == "precise_tiered" and has_lower:
            for factor in scales:
                believed = replace(
                    setup,
                    tiers=tuple(
                        replace(t, read_bytes_per_s=tuple(r * factor for r in t.read_bytes_per_s))
                        for t in setup.tiers
                    ),
                )
                result = simulate_tiers(
                    trace,
                    setup,
                    args.replicas,
                    load,
                    policy=policy,
                    max_tree_blocks=tree_blocks,
                    router_setup=believed,
                )
                rows.append((f"load all, bw x{factor:g}", result))
    swept: list[object] = []
    knee: int | None = None
    if sweep != "none":
        tier = setup.tiers[_TIER_NAMES.index(sweep)]
        points = sweep_tier(
            trace,
            setup,
            args.replicas,
            load,
            tier.name,
            sizes,
            policy=policies[-1],
            max_tree_blocks=tree_blocks,
        )
        swept = list(points)
        knee = stops_paying(points, args.min_gain)
    if args.plot:
        _plot_tiers(rows, swept, sweep, args.plot)
    names = [t.name for t in setup.tiers]
    if args.format == "json":
        json.dump(
            {
                "simulation": True,
                "inputs": inputs,
                "savings": dict(zip(names, [round(s, 4) for s in rows[0][1].savings], strict=True)),
                "results": [{"run": label, **r.as_json()} for label, r in rows],
                "sweep": None
                if sweep == "none"
                else {
                    "tier": sweep.upper(),
                    "policy": policies[-1],
                    "min_gain": args.min_gain,
                    "stops_paying_bytes": knee,
                    "points": [
                        {"capacity_bytes": p.capacity_bytes, **p.result.as_json()}  # type: ignore[attr-defined]
                        for p in swept
                    ],
                },
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 0
    out = Console()
    block_bytes = trace.block_size * setup.bytes_per_token
    compute_ms = 1000.0 * trace.block_size / setup.prefill_tokens_per_s
    from prefixkit.engine_adapter.tiers.fetch import fetch_seconds

    out.print(
        f"Simulation: {len(trace)} requests, {args.replicas} replicas, {args.gpu} preset, "
        f"{inputs['kv_bytes_per_token']:,} KV bytes per token ({inputs['kv_bytes_source']}), "
        f"{trace.block_size}-token blocks of {_binary(block_bytes)}, prefill "
        f"{setup.prefill_tokens_per_s:,.0f} tokens/s ({compute_ms:.1f} ms a block)"
    )
    savings = setup.savings(trace.block_size)
    out.print(
        "a hit saves of a block's prefill: "
        + ", ".join(
            f"{t.name} {s:.2f}"
            + (
                f" (fetch {1000 * fetch_seconds(t, block_bytes):.1f} ms)"
                if t.read_bytes_per_s
                else ""
            )
            for t, s in zip(setup.tiers, savings, strict=True)
            if t.name == "GPU" or t.capacity_bytes
        )
        + (
            ""
            if rules_differ or not has_lower
            else "; every tier is faster than recompute, so loading only when faster "
            "changes nothing"
        )
    )
    title = "capacity per replica: " + ", ".join(
        f"{t.name} {_binary(t.capacity_bytes)}" for t in setup.tiers if t.capacity_bytes
    )
    hit_cells = [(*(f"{rate:.3f}" for rate in r.hit_rates), f"{r.hit_rate:.3f}") for _, r in rows]
    time_cells = [
        (
            f"{r.prefill_tokens_saved:,}",
            f"{r.prefill_saved_share:.3f}",
            f"{r.ttft_quantile(0.5):.2f}s",
            f"{r.ttft_quantile(0.9):.2f}s",
        )
        for _, r in rows
    ]
    hit_columns = (*names, "hit")
    time_columns = ("tokens saved", "saved", "p50", "p90")
    keys = [(r.policy, label) for label, r in rows]
    table = _run_table(
        title,
        hit_columns + time_columns,
        keys,
        [h + t for h, t in zip(hit_cells, time_cells, strict=True)],
    )
    if out.measure(table, options=out.options.update_width(1_000)).maximum <= out.width:
        out.print(table)
    else:
        # too wide for the console (a narrow terminal; 80 columns when piped): the hits
        # and the time saved in two tables, so that no number is cut
        out.print(_run_table(title + " (hits)", hit_columns, keys, hit_cells, narrow=True))
        out.print(_run_table("time saved", time_columns, keys, time_cells, narrow=True))
    out.print(
        "run: GPU only (no lower tier), load all (vLLM's and LMCache's rule: every hit in a "
        "lower tier is loaded), if faster (a block is loaded only if that beats computing "
        "it), bw xF (the precise_tiered router believes every link F times as fast). "
        "GPU/CPU/DISK: share of prompt tokens served from each tier; hit: their sum; tokens "
        "saved: prompt tokens not prefilled; saved: "
        "share of all prefill time saved, net of fetches; p50/p90: estimated time to first "
        "token (prefill queue, fetch, prefill; no decode)."
    )
    if swept:
        sweep_table = Table(title=f"sweep of the {sweep.upper()} tier ({policies[-1]})")
        for column in ("per replica", "blocks", "hit", sweep.upper(), "saved", "p50", "p90"):
            sweep_table.add_column(column, justify="right")
        index = _TIER_NAMES.index(sweep)
        for point in swept:
            r = point.result  # type: ignore[attr-defined]
            sweep_table.add_row(
                _binary(point.capacity_bytes),  # type: ignore[attr-defined]
                f"{r.capacity_blocks[index]:,}",
                f"{r.hit_rate:.3f}",
                f"{r.hit_rates[index]:.3f}",
                f"{r.prefill_saved_share:.3f}",
                f"{r.ttft_quantile(0.5):.2f}s",
                f"{r.ttft_quantile(0.9):.2f}s",
            )
        out.print(sweep_table)
        if knee is None:
            out.print(
                f"Every step of the {sweep.upper()} tier still saves at least "
                f"{args.min_gain:.1%} of prefill time per doubling: sweep larger sizes "
                "(--sweep-sizes)."
            )
        elif knee == min(p.capacity_bytes for p in swept):  # type: ignore[attr-defined]
            out.print(
                f"A larger {sweep.upper()} tier does not pay here: no size in the sweep saves "
                f"{args.min_gain:.1%} more of the prefill time per doubling than "
                f"{_binary(knee)}."
            )
        else:
            out.print(
                f"More {sweep.upper()} memory stops paying past {_binary(knee)} per replica: "
                f"doubling it saves less than {args.min_gain:.1%} more of the prefill time."
            )
    return 0


def _plot_tiers(
    rows: Sequence[tuple[str, object]], swept: Sequence[object], tier: str, path: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from prefixkit.engine_adapter.tiers.simulate import TieredResult
    from prefixkit.engine_adapter.tiers.sweep import SweepPoint

    results = [r for _, r in rows if isinstance(r, TieredResult)]
    labels = [f"{r.policy}\n{label}" for (label, _), r in zip(rows, results, strict=True)]
    colors = ("#4477aa", "#66ccee", "#ccbb44")
    fig, axes = plt.subplots(1, 2 if swept else 1, figsize=(12 if swept else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    bottom = [0.0] * len(results)
    for index, name in enumerate(results[0].tier_names):
        heights = [r.hit_rates[index] for r in results]
        ax.bar(labels, heights, bottom=bottom, color=colors[index % 3], label=f"{name} hits")
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylabel("token hit rate")
    ax.set_title("hit rate per tier (simulation)")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend()
    if swept:
        points = [p for p in swept if isinstance(p, SweepPoint)]
        ax = axes[0][1]
        sizes = [p.capacity_bytes / 2**30 for p in points]
        ax.plot(
            sizes, [p.result.hit_rate for p in points], marker="o", color="#4477aa", label="hit"
        )
        ax.plot(
            sizes,
            [p.result.prefill_saved_share for p in points],
            marker="^",
            color="#228833",
            label="prefill time saved",
        )
        ax.set_ylim(0, 1.05 * max(p.result.hit_rate for p in points) or 1)
        ax.set_xlabel(f"{tier.upper()} tier per replica (GiB)")
        ax.set_ylabel("share of prompt tokens / prefill time")
        ax.legend(loc="lower right")
        twin = ax.twinx()
        twin.plot(sizes, [p.result.ttft_quantile(0.5) for p in points], marker="s", color="#cc6677")
        twin.set_ylabel("estimated TTFT p50 (s)", color="#cc6677")
        ax.set_title(f"sweep of the {tier.upper()} tier (simulation)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
