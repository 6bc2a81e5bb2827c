"""The precise routing decision, shared by the live router and the simulator.

Inputs are facts, not history: each replica's cached run of the request's
blocks (from the engines' KV events live, from the simulated caches in a
replay), its queued prefill work (blocks) and its running requests. The score
of replica r is

    run[r] - queue_weight * queued_blocks[r] - running_weight * inflight[r]

i.e. the prefill it saves minus the prefill and decode it would wait behind.
Bounded-load spill-over: a replica is a candidate only while
``inflight[r] + 1 <= ceil(load_factor * (total_inflight + 1) / replicas) +
spill_slack`` (the slack keeps a light load, where one request is already above
the mean, from scattering prefixes), so a popular prefix spills to the next
best replica instead of piling up. Equal scores go to the replica whose
would-be-evicted blocks are the least recently used (if nothing would be
evicted, to the one left with the most free blocks, so new prefixes spread
over the replicas while they have room), then by a rotating turn, never in
favour of replica 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["PreciseParams", "choose_replica", "load_bound"]


@dataclass(frozen=True)
class PreciseParams:
    """Weights of the load term (in blocks) and the bounded-load factor."""

    queue_weight: float = 0.1
    running_weight: float = 1.0
    load_factor: float = 1.25
    spill_slack: int = 2


def load_bound(total_inflight: int, replicas: int, params: PreciseParams) -> int:
    """Most in-flight requests a replica may reach by taking one more request."""
    return math.ceil(params.load_factor * (total_inflight + 1) / replicas) + params.spill_slack


def choose_replica(
    runs: Sequence[int],
    queued_blocks: Sequence[float],
    inflight: Sequence[int],
    params: PreciseParams,
    turn: int,
    eviction_stamp: Callable[[int], float] | None = None,
) -> int:
    """The replica for a request.

    Among equal scores, `eviction_stamp(r)` (when given) prefers the replica
    whose cache would evict its least recently used blocks (lowest last-use
    stamp; below every stamp, the most free blocks left, if nothing would be
    evicted), which makes N per-replica LRUs behave like one shared LRU;
    `turn` (any int, e.g. a request counter) breaks what remains.
    """
    replicas = len(runs)
    bound = load_bound(sum(inflight), replicas, params)
    best = -math.inf
    tied: list[int] = []
    qw = params.queue_weight
    rw = params.running_weight
    for r in range(replicas):
        if inflight[r] + 1 > bound:
            continue
        score = runs[r] - qw * queued_blocks[r] - rw * inflight[r]
        if score > best:
            best = score
            tied = [r]
        elif score == best:
            tied.append(r)
    if eviction_stamp is not None and len(tied) > 1:
        stamps = [eviction_stamp(r) for r in tied]
        oldest = min(stamps)
        tied = [r for r, stamp in zip(tied, stamps, strict=True) if stamp == oldest]
    return tied[turn % len(tied)]
