"""The precise routing decision, shared by the live router and the simulator.

Inputs are facts, not history: each replica's cached run of the request's
blocks (from the engines' KV events live, from the simulated caches in a
replay), what admitting the request would evict there, its queued prefill work
(blocks) and its running requests. The score of replica r is

    run[r] - eviction_cost[r] - queue_weight * queued_blocks[r] - running_weight * inflight[r]

i.e. the prefill it saves, minus the blocks of soon-wanted cache it would push
out (a `ReuseModel` estimate: how many of the evicted blocks' prompts are
likely to be continued), minus the prefill and decode it would wait behind.
The load weights are light (a running request weighs a tenth of a block): at
small caches the eviction cost is a fraction of a block per evicted block, and
heavier load terms drown it; the work budget below keeps the balance instead.
Without a budget (the replicas' capacity unknown, or unbounded) the load terms
are all that balance the replicas, and weigh `unbudgeted_load_scale` (10) times
more.

Two filters bound the load instead:

* bounded-load spill-over: a replica is a candidate only while ``inflight[r] +
  1 <= ceil(load_factor * (total_inflight + 1) / replicas) + spill_slack`` (the
  slack keeps a light load, where one request is already above the mean, from
  scattering prefixes), so a popular prefix spills to the next best replica
  instead of piling up;
* the work budget (`WorkShares`): among those, a replica is preferred only while
  the blocks it has been given, and the uncached ones, stay within
  ``work_balance`` x the mean plus one cache's worth (so the first requests of a
  run are not scattered), the imbalance `analyze` reports. Until the
  `ReuseModel` has settled its first counts, a request that no replica holds
  more of than another (a new tenant's first request, say) is preferred only
  on replicas given at most the mean of uncached blocks: the eviction costs
  are still the prior, so they would place it by a few free blocks or a
  moment's queue, and where a new prefix lands decides where its later turns
  go.

Equal scores go to the replica whose would-be-evicted blocks are the least
recently used (if nothing would be evicted, to the one left with the most free
blocks, so new prefixes spread over the replicas while they have room), then
by a rotating turn, never in favour of replica 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Eviction",
    "PreciseParams",
    "WorkShares",
    "cached_runs",
    "choose_replica",
    "load_bound",
]


def cached_runs(holders: dict[int, int], blocks: Sequence[int], replicas: int) -> list[int]:
    """Every replica's cached run of `blocks`, from a block -> replica-bitmask index."""
    runs = [0] * replicas
    alive = (1 << replicas) - 1
    get = holders.get
    for index, block in enumerate(blocks):
        mask = get(block, 0) & alive
        if mask != alive:
            dropped = alive & ~mask
            while dropped:
                low = dropped & -dropped
                runs[low.bit_length() - 1] = index
                dropped ^= low
            alive = mask
            if not alive:
                return runs
    length = len(blocks)
    while alive:
        low = alive & -alive
        runs[low.bit_length() - 1] = length
        alive ^= low
    return runs


@dataclass(frozen=True)
class PreciseParams:
    """Load-term weights (in blocks; times `unbudgeted_load_scale` when no work
    budget applies), the bounded-load factor and the work budget (None: none)."""

    queue_weight: float = 0.01
    running_weight: float = 0.1
    load_factor: float = 1.25
    spill_slack: int = 2
    work_balance: float | None = 1.06
    unbudgeted_load_scale: float = 10.0


def load_bound(total_inflight: int, replicas: int, params: PreciseParams) -> int:
    """Most in-flight requests a replica may reach by taking one more request."""
    return math.ceil(params.load_factor * (total_inflight + 1) / replicas) + params.spill_slack


class WorkShares:
    """Blocks given to each replica so far, all and uncached, and the work budget on them."""

    def __init__(self, replicas: int, balance: float | None, slack_blocks: float) -> None:
        if balance is not None and balance < 1.0:
            raise ValueError(f"work balance is a max/mean ratio, at least 1.0, got {balance}")
        self.balance = balance
        self.slack_blocks = slack_blocks
        self.assigned = [0] * replicas
        self.uncached = [0] * replicas
        self.total_assigned = 0
        # uncached blocks given so far: the fleet's turnover clock (blocks newly
        # cached), the `ReuseModel`'s time
        self.clock = 0

    def within(self, runs: Sequence[int], length: int, evenly: bool = False) -> list[bool] | None:
        """Per replica, whether taking a request of `length` blocks (with that
        cached run) keeps it within budget; None when there is no budget.
        `evenly`: a request with the same run everywhere (it loses no hit
        wherever it goes) fits only replicas given at most the mean of
        uncached blocks so far."""
        balance = self.balance
        if balance is None:
            return None
        replicas = len(self.assigned)
        top_assigned = balance * (self.total_assigned + length) / replicas + self.slack_blocks
        if evenly and max(runs) == min(runs):
            mean_uncached = self.clock / replicas
            return [
                self.uncached[r] <= mean_uncached and self.assigned[r] + length <= top_assigned
                for r in range(replicas)
            ]
        top_uncached = balance * (self.clock + length) / replicas + self.slack_blocks
        return [
            self.assigned[r] + length <= top_assigned
            and self.uncached[r] + length - runs[r] <= top_uncached
            for r in range(replicas)
        ]

    def record(self, replica: int, length: int, run: int) -> None:
        """`replica` was given a request of `length` blocks, `run` of them cached."""
        self.assigned[replica] += length
        self.uncached[replica] += length - run
        self.total_assigned += length
        self.clock += length - run


Eviction = Callable[[int], tuple[float, float]]


def choose_replica(
    runs: Sequence[int],
    queued_blocks: Sequence[float],
    inflight: Sequence[int],
    params: PreciseParams,
    turn: int,
    eviction: Eviction | None = None,
    within_budget: Sequence[bool] | None = None,
) -> int:
    """The replica for a request.

    `eviction(r)` (when given) is replica r's (eviction cost, eviction stamp):
    the cost (>= 0) is subtracted from its score; among equal scores the
    lowest stamp (the last-use stamp of the newest block the request would
    evict there; below every stamp, the most free blocks left, if nothing
    would be evicted) wins, which makes N per-replica LRUs behave like one
    shared LRU. It is asked only of replicas that can still win: costs are
    never negative, so one whose score before the cost is below the best is
    skipped. `within_budget` (when given) narrows the candidates under the
    load bound to the replicas within the work budget, if any is; without it
    the load terms weigh `unbudgeted_load_scale` times more. `turn` (any int,
    e.g. a request counter) breaks what remains.
    """
    replicas = len(runs)
    bound = load_bound(sum(inflight), replicas, params)
    candidates = [r for r in range(replicas) if inflight[r] + 1 <= bound]
    scale = 1.0
    if within_budget is not None:
        candidates = [r for r in candidates if within_budget[r]] or candidates
    else:
        scale = params.unbudgeted_load_scale
    qw = scale * params.queue_weight
    rw = scale * params.running_weight
    best = -math.inf
    tied: list[int] = []
    stamps: list[float] = []
    for r in candidates:
        score = runs[r] - qw * queued_blocks[r] - rw * inflight[r]
        if score < best:
            continue
        stamp = 0.0
        if eviction is not None:
            cost, stamp = eviction(r)
            score -= cost
        if score > best:
            best = score
            tied = [r]
            stamps = [stamp]
        elif score == best:
            tied.append(r)
            stamps.append(stamp)
    if len(tied) > 1:
        oldest = min(stamps)
        tied = [r for r, stamp in zip(tied, stamps, strict=True) if stamp == oldest]
    return tied[turn % len(tied)]
