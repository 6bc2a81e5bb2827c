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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["configure", "run"]


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
        default="round_robin,consistent_hash,smg_like,precise",
        help="comma-separated policies to replay",
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
    from prefixkit.engine_adapter import LoadParams, analyze, load_trace
    from prefixkit.engine_adapter.replay.policies import POLICY_NAMES
    from prefixkit.sdk import UsageError
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    err = Console(stderr=True)
    policies = [p.strip() for p in args.policies.split(",")]
    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown:
        raise UsageError(f"unknown policies {unknown}: choose from {', '.join(POLICY_NAMES)}")
    _check_numbers(args)
    if args.plot is not None:
        _check_plot(Path(args.plot))
    trace = load_trace(
        args.trace, block_size=args.block_size, tokenizer=args.tokenizer, limit=args.limit
    )
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
