"""Replay a trace over N simulated replicas and score routing policies.

`replay` runs one policy (or a fixed list of assignments, e.g. the replicas a
real router chose) through per-replica LRU caches and the `ReplicaLoad`;
`analyze` adds the sharing rate and the oracle bounds and replays every policy.
Token hit rate = cached prompt tokens / prompt tokens, where a hit block counts
``block_size`` tokens (capped at the prompt length: Mooncake's last block may be
partial).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..routing.policy import PreciseParams
from .cache_sim import ReplicaCaches, oracle_hits
from .policies import POLICY_NAMES, make_policy
from .replica_load import ReplicaLoad
from .trace import Trace

__all__ = ["Analysis", "LoadParams", "PolicyResult", "analyze", "replay", "token_hit_rate"]

Progress = Callable[[int], None]


@dataclass(frozen=True)
class LoadParams:
    """The replicas' timing (see `replica_load`) and the arrival compression."""

    prefill_s_per_block: float
    decode_s_per_token: float
    time_scale: float = 1.0


@dataclass
class PolicyResult:
    policy: str
    hit_rate: float
    oracle_ratio: float
    imbalance: float  # max/mean of blocks assigned per replica
    uncached_imbalance: float  # max/mean of uncached (prefilled) blocks per replica
    prefill_tokens_saved: int
    requests_per_s: float  # replay throughput of the simulator itself
    assignments: list[int] = field(repr=False, default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "hit_rate": round(self.hit_rate, 4),
            "oracle_ratio": round(self.oracle_ratio, 4),
            "imbalance": round(self.imbalance, 4),
            "uncached_imbalance": round(self.uncached_imbalance, 4),
            "prefill_tokens_saved": self.prefill_tokens_saved,
        }


@dataclass
class Analysis:
    requests: int
    replicas: int
    capacity_blocks: int | None
    sharing_rate: float
    oracle_infinite: float
    oracle_capacity: float
    results: list[PolicyResult]


def token_hit_rate(trace: Trace, hits: Sequence[int]) -> tuple[float, int]:
    """(hit rate, hit tokens) for per-request cached block runs."""
    size = trace.block_size
    saved = 0
    for run, length in zip(hits, trace.input_lengths, strict=True):
        saved += min(run * size, length)
    total = trace.total_input_tokens
    return (saved / total if total else 0.0), saved


def _max_over_mean(values: Sequence[int]) -> float:
    mean = sum(values) / len(values)
    return max(values) / mean if mean else 1.0


def replay(
    trace: Trace,
    policy: str | Sequence[int],
    replicas: int,
    capacity: int | None,
    load: LoadParams,
    *,
    oracle_rate: float = 0.0,
    max_tree_blocks: int | None = None,
    precise: PreciseParams | None = None,
    progress: Progress | None = None,
) -> PolicyResult:
    """Replay `trace` under `policy` (a name, or the replica of every request)."""
    caches = ReplicaCaches(replicas, capacity)
    model = ReplicaLoad(replicas, load.prefill_s_per_block, load.decode_s_per_token)
    if isinstance(policy, str):
        chooser = make_policy(
            policy, replicas, caches, model, max_tree_blocks=max_tree_blocks, precise=precise
        ).choose
        name = policy
    else:
        fixed = list(policy)
        if len(fixed) != len(trace):
            raise ValueError(f"{len(fixed)} assignments for {len(trace)} requests")
        iterator = iter(fixed)

        def chooser(blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
            return next(iterator)

        name = "assigned"
    hits: list[int] = []
    assignments: list[int] = []
    assigned = [0] * replicas
    uncached = [0] * replicas
    admit = caches.admit
    advance = model.advance
    dispatch = model.dispatch
    scale = 1000.0 * load.time_scale
    outputs = trace.output_lengths
    inputs = trace.input_lengths
    block_size = trace.block_size
    started = time.perf_counter()
    for index, (stamp, blocks) in enumerate(zip(trace.timestamps_ms, trace.blocks, strict=True)):
        now = stamp / scale
        advance(now)
        replica = chooser(blocks, now, inputs[index] // block_size)
        run = admit(blocks, replica, index)
        missing = len(blocks) - run
        dispatch(replica, now, missing, outputs[index])
        hits.append(run)
        assignments.append(replica)
        assigned[replica] += len(blocks)
        uncached[replica] += missing
        if progress is not None and index % 1000 == 999:
            progress(1000)
    elapsed = time.perf_counter() - started
    if progress is not None:
        progress(len(trace) % 1000)
    rate, saved = token_hit_rate(trace, hits)
    return PolicyResult(
        policy=name,
        hit_rate=rate,
        oracle_ratio=rate / oracle_rate if oracle_rate else 0.0,
        imbalance=_max_over_mean(assigned),
        uncached_imbalance=_max_over_mean(uncached),
        prefill_tokens_saved=saved,
        requests_per_s=len(trace) / elapsed if elapsed > 0 else float("inf"),
        assignments=assignments,
    )


def sharing_rate(trace: Trace) -> float:
    """Share of prompt blocks whose id occurs in more than one request."""
    counts: dict[int, int] = {}
    for blocks in trace.blocks:
        for block in set(blocks):
            counts[block] = counts.get(block, 0) + 1
    total = sum(len(blocks) for blocks in trace.blocks)
    shared = sum(1 for blocks in trace.blocks for block in blocks if counts[block] > 1)
    return shared / total if total else 0.0


def analyze(
    trace: Trace,
    replicas: int,
    capacity: int | None,
    load: LoadParams,
    *,
    policies: Sequence[str] = POLICY_NAMES,
    max_tree_blocks: int | None = None,
    precise: PreciseParams | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Sharing rate, oracle bounds and one `replay` per policy."""
    infinite, _ = token_hit_rate(trace, oracle_hits(trace.blocks, None))
    shared_capacity = None if capacity is None else capacity * replicas
    bounded, _ = token_hit_rate(trace, oracle_hits(trace.blocks, shared_capacity))
    results = [
        replay(
            trace,
            name,
            replicas,
            capacity,
            load,
            oracle_rate=bounded,
            max_tree_blocks=max_tree_blocks,
            precise=precise,
            progress=progress,
        )
        for name in policies
    ]
    return Analysis(
        requests=len(trace),
        replicas=replicas,
        capacity_blocks=capacity,
        sharing_rate=sharing_rate(trace),
        oracle_infinite=infinite,
        oracle_capacity=bounded,
        results=results,
    )
