"""How much better than SMG can any router do at small per-replica caches? Bounds.

On the first `--requests` Mooncake requests, 8 replicas x `--capacity` blocks:

* ``shared LRU``: one LRU of 8 x capacity blocks (the `analyze` capacity oracle);
* ``Belady``: one cache of 8 x capacity blocks that evicts the block used
  furthest in the future (clairvoyant; may also decline to cache). Every
  router over per-replica caches is bounded by it: the union of the replicas'
  caches is itself a schedule for one cache of the summed capacity;
* ``clairvoyant placement``: routers cannot change the engines' eviction (LRU
  per replica); this one places each request knowing which blocks will ever be
  used again: longest cached run minus the blocks with a future use that
  admitting the request would evict, among replicas whose assigned blocks stay
  within `--balance` x the mean (the imbalance budget);
* ``segmented`` (online, the SLRU/2Q idea applied to placement): first turns
  (nothing past the shared first block ever routed before) go to `P`
  "probation" replicas, continuations with no cached run to the other,
  "protected" ones, the rest by the precise rule, among replicas whose assigned
  and uncached blocks stay within `--balance` x the mean (or unconstrained);
* ``precise, told continuations``: the precise rule with its eviction cost
  from the future instead of the learned `ReuseModel`: the evicted blocks
  count in full when the newest one's prompt is continued (its next turn
  arrives) within the next 1 or 2 fleet turnovers of requests, else not at
  all. How far better prediction alone could take the precise rule;
* ``precise`` and ``smg_like`` from the simulator, same requests and load model
  as `bench/route_replay.py` (1 ms prefill per uncached block, arrivals
  compressed 25x); precise also with other work budgets (`PreciseParams.
  work_balance`), to show how much its hit rate moves with a setting.

    .venv/bin/python bench/research/route_bounds.py                    # ~10 s
    .venv/bin/python bench/research/route_bounds.py --requests 0       # the whole trace, ~30 s
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import sys
from collections.abc import Container, Sequence
from pathlib import Path

from prefixkit.engine_adapter.replay.cache_sim import ReplicaCaches, oracle_hits
from prefixkit.engine_adapter.replay.replay import LoadParams, analyze, replay, token_hit_rate
from prefixkit.engine_adapter.replay.replica_load import ReplicaLoad
from prefixkit.engine_adapter.replay.trace import Trace, load_trace
from prefixkit.engine_adapter.routing.policy import (
    PreciseParams,
    WorkShares,
    cached_runs,
    choose_replica,
)

MOONCAKE_TRACE = (
    Path(__file__).resolve().parents[2] / "examples" / "traces" / "mooncake_conversation.jsonl.gz"
)

NEVER = sys.maxsize
LOAD = LoadParams(0.001, 0.0, 25.0)


def next_uses(trace: Trace) -> list[dict[int, int]]:
    """Per request, each of its blocks -> index of the next request using it (NEVER)."""
    later: dict[int, int] = {}
    uses: list[dict[int, int]] = []
    for index in range(len(trace) - 1, -1, -1):
        blocks = trace.blocks[index]
        uses.append({block: later.get(block, NEVER) for block in blocks})
        for block in blocks:
            later[block] = index
    uses.reverse()
    return uses


def _leading_run(blocks: Sequence[int], held: Container[int]) -> int:
    """How many leading blocks are in `held`."""
    run = 0
    for block in blocks:
        if block not in held:
            break
        run += 1
    return run


def belady_hits(trace: Trace, capacity: int, uses: list[dict[int, int]]) -> list[int]:
    """Cached run per request in one clairvoyant cache of `capacity` blocks."""
    cache: dict[int, int] = {}  # block -> its next use
    furthest: list[tuple[int, int]] = []  # (-next use, block), stale entries skipped
    runs = []
    for index, blocks in enumerate(trace.blocks):
        runs.append(_leading_run(blocks, cache))
        for block in blocks:
            cache[block] = uses[index][block]
            heapq.heappush(furthest, (-cache[block], block))
        while len(cache) > capacity:
            negative, block = heapq.heappop(furthest)
            if cache.get(block) == -negative:
                del cache[block]
    return runs


def clairvoyant_placement(
    trace: Trace, replicas: int, capacity: int, balance: float, uses: list[dict[int, int]]
) -> tuple[list[int], float]:
    """(cached runs, imbalance) of the clairvoyant placement router over per-replica LRUs."""
    last_use: dict[int, int] = {}
    for index, blocks in enumerate(trace.blocks):
        for block in blocks:
            last_use[block] = index
    caches = ReplicaCaches(replicas, capacity)
    assigned = [0] * replicas
    runs = []
    for index, blocks in enumerate(trace.blocks):
        cached = cached_runs(caches.holders, blocks, replicas)
        budget = balance * (sum(assigned) + len(blocks)) / replicas
        allowed = [r for r in range(replicas) if assigned[r] + len(blocks) <= budget]
        best: tuple[int, int] | None = None
        for replica in allowed or [min(range(replicas), key=assigned.__getitem__)]:
            evicted = caches.held(replica) + len(blocks) - cached[replica] - capacity
            lost = 0
            if evicted > 0:
                for block, _ in itertools.islice(caches.oldest(replica), evicted):
                    if block not in uses[index] and last_use[block] > index:
                        lost += 1
            score = cached[replica] - lost
            if best is None or score > best[0]:
                best = (score, replica)
        assert best is not None
        replica = best[1]
        runs.append(caches.admit(blocks, replica, index))
        assigned[replica] += len(blocks)
    mean = sum(assigned) / replicas
    return runs, max(assigned) / mean


def continuations(trace: Trace) -> dict[int, int]:
    """Prompt index -> the index of the request that continues it first, by the
    `ReuseModel`'s rule: the deepest full block the request shares with earlier
    ones was that prompt's last full block, and no request went past it before."""
    # full block -> 2 x the last prompt using it, + 1 once some prompt continued past it
    links: dict[int, int] = {}
    first: dict[int, int] = {}
    for index, blocks in enumerate(trace.blocks):
        full = blocks[: trace.input_lengths[index] // trace.block_size]
        deepest = -1
        for block in full:
            link = links.get(block, -1)
            if link < 0:
                break
            deepest = link
        if deepest >= 0 and not deepest & 1:
            first.setdefault(deepest >> 1, index)
        if full:
            for block in full[:-1]:
                links[block] = 2 * index + 1
            links[full[-1]] = 2 * index + (links.get(full[-1], 0) & 1)
    return first


class Fleet:
    """What an online router under test acts on: per-replica LRU caches, the
    load model of `precise` here (1 ms per uncached block, arrivals / 25) and the
    blocks, and uncached blocks, given to each replica so far (`WorkShares`,
    with a budget of `balance` x the mean plus `slack_blocks`, or none)."""

    def __init__(
        self,
        trace: Trace,
        replicas: int,
        capacity: int,
        balance: float | None,
        slack_blocks: float = 0.0,
    ) -> None:
        self.trace = trace
        self.replicas = replicas
        self.caches = ReplicaCaches(replicas, capacity)
        self.load = ReplicaLoad(replicas, 0.001, 0.0)
        self.shares = WorkShares(replicas, balance, slack_blocks)
        self.runs: list[int] = []

    def arrive(self, index: int) -> float:
        """Advance the load model to request `index`'s arrival; that time (s)."""
        now = self.trace.timestamps_ms[index] / 1000.0 / 25.0
        self.load.advance(now)
        return now

    def cached(self, blocks: Sequence[int]) -> list[int]:
        """Each replica's cached run of `blocks`."""
        return cached_runs(self.caches.holders, blocks, self.replicas)

    def queued(self, now: float) -> list[float]:
        """Each replica's queued prefill blocks at `now`."""
        return [self.load.queued_blocks(r, now) for r in range(self.replicas)]

    def within(self, cached: list[int], length: int) -> list[int]:
        """Replicas within the budget if given this request (every replica if
        none would, or there is no budget)."""
        everyone = list(range(self.replicas))
        within = self.shares.within(cached, length)
        if within is None:
            return everyone
        return [r for r in everyone if within[r]] or everyone

    def serve(self, index: int, replica: int, now: float) -> None:
        blocks = self.trace.blocks[index]
        run = self.caches.admit(blocks, replica, index)
        self.load.dispatch(replica, now, len(blocks) - run, self.trace.output_lengths[index])
        self.runs.append(run)
        self.shares.record(replica, len(blocks), run)

    def outcome(self) -> tuple[list[int], float, float]:
        """(cached runs, imbalance, uncached imbalance)."""
        replicas = self.replicas
        assigned = self.shares.assigned
        uncached = self.shares.uncached
        return (
            self.runs,
            max(assigned) * replicas / sum(assigned),
            max(uncached) * replicas / sum(uncached),
        )


def segmented(
    trace: Trace, replicas: int, capacity: int, probation: int, balance: float | None
) -> tuple[list[int], float, float]:
    """(cached runs, imbalance, uncached imbalance) of the segmented online router."""
    fleet = Fleet(trace, replicas, capacity, balance)
    caches = fleet.caches
    params = PreciseParams()
    routed: set[int] = set()  # the router's own history
    for index, blocks in enumerate(trace.blocks):
        now = fleet.arrive(index)
        cached = fleet.cached(blocks)
        seen = _leading_run(blocks, routed)
        routed.update(blocks)
        length = len(blocks)
        allowed = fleet.within(cached, length)
        if seen <= 1:
            allowed = [r for r in allowed if r < probation] or allowed
        elif max(cached) <= 1:
            allowed = [r for r in allowed if r >= probation] or allowed
        scores = [cached[r] if r in allowed else -NEVER for r in range(replicas)]
        queued = fleet.queued(now)

        def eviction(
            replica: int, cached: list[int] = cached, length: int = length
        ) -> tuple[float, float]:
            return 0.0, caches.newest_evicted(replica, cached[replica], length)[1]

        replica = choose_replica(scores, queued, fleet.load.inflight, params, index, eviction)
        fleet.serve(index, replica, now)
    return fleet.outcome()


def told_continuations(
    trace: Trace, replicas: int, capacity: int, horizon: int
) -> tuple[list[int], float, float]:
    """(cached runs, imbalance, uncached imbalance) of the precise rule (its
    default work budget and slack, as `Precise`) with the eviction cost told by
    the future: the evicted blocks in full if the newest one's prompt is
    continued within the next `horizon` requests, else 0."""
    params = PreciseParams()
    fleet = Fleet(trace, replicas, capacity, params.work_balance, capacity)
    caches = fleet.caches
    continued_at = continuations(trace)
    for index, blocks in enumerate(trace.blocks):
        now = fleet.arrive(index)
        cached = fleet.cached(blocks)
        length = len(blocks)
        queued = fleet.queued(now)

        def eviction(
            replica: int, cached: list[int] = cached, length: int = length, index: int = index
        ) -> tuple[float, float]:
            evicted, stamp = caches.newest_evicted(replica, cached[replica], length)
            later = continued_at.get(int(stamp), NEVER) if evicted > 0 else NEVER
            return (float(evicted) if later <= index + horizon else 0.0), stamp

        within = fleet.shares.within(cached, length)
        replica = choose_replica(
            cached, queued, fleet.load.inflight, params, index + 1, eviction, within
        )
        fleet.serve(index, replica, now)
    return fleet.outcome()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(MOONCAKE_TRACE))
    parser.add_argument("--requests", type=int, default=3000, help="0: the whole trace")
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--capacity", type=int, default=500)
    parser.add_argument("--balance", type=float, default=1.05)
    args = parser.parse_args()

    trace = load_trace(args.trace, limit=args.requests or None)
    uses = next_uses(trace)
    total = args.replicas * args.capacity
    sim = analyze(
        trace,
        args.replicas,
        args.capacity,
        LOAD,
        policies=("smg_like", "precise"),
    )
    result = {r.policy: r for r in sim.results}
    # one fleet turnover in requests: the fleet's blocks over precise's uncached blocks per request
    uncached = sum(map(len, trace.blocks)) * (1.0 - result["precise"].hit_rate) / len(trace)
    turnover = round(total / uncached)
    placement, imbalance = clairvoyant_placement(
        trace, args.replicas, args.capacity, args.balance, uses
    )
    rows = [
        ("infinite cache", token_hit_rate(trace, oracle_hits(trace.blocks, None))[0], ""),
        (f"Belady, one cache of {total}", token_hit_rate(trace, belady_hits(trace, total, uses))[0], ""),
        (f"shared LRU of {total}", sim.oracle_capacity, ""),
        ("clairvoyant placement", token_hit_rate(trace, placement)[0], f"{imbalance:.2f}"),
        *(
            (f"segmented P={p}" + (f" within {b:g}" if b else ", no budget"), token_hit_rate(trace, hits)[0], f"{imb:.2f} / {unc:.2f}")
            for p, b in ((1, None), (2, None), (1, args.balance), (2, args.balance), (3, args.balance), (4, args.balance))
            for hits, imb, unc in [segmented(trace, args.replicas, args.capacity, p, b)]
        ),
        *(
            (f"precise, work balance {b:g}", r.hit_rate, f"{r.imbalance:.2f} / {r.uncached_imbalance:.2f}")
            for b in (1.04, 1.08, 1.12)
            for r in [replay(trace, "precise", args.replicas, args.capacity, LOAD, precise=PreciseParams(work_balance=b))]
        ),
        *(
            (f"precise, told {k} turnover{'s' * (k > 1)}", token_hit_rate(trace, hits)[0], f"{imb:.2f} / {unc:.2f}")
            for k in (1, 2)
            for hits, imb, unc in [told_continuations(trace, args.replicas, args.capacity, k * turnover)]
        ),
        ("precise (simulated, 1.06)", result["precise"].hit_rate, f"{result['precise'].imbalance:.2f} / {result['precise'].uncached_imbalance:.2f}"),
        ("smg_like (simulated)", result["smg_like"].hit_rate, f"{result['smg_like'].imbalance:.2f} / {result['smg_like'].uncached_imbalance:.2f}"),
    ]  # fmt: skip
    smg = result["smg_like"].hit_rate
    # Could a router guess which prompts come back? Share of requests with a block
    # past the first (the system prompt every request shares) reused later, for new
    # conversations (nothing past the first block seen before) and continued ones.
    seen_runs = oracle_hits(trace.blocks, None)
    followed = {True: [0, 0], False: [0, 0]}
    for index, blocks in enumerate(trace.blocks):
        tally = followed[seen_runs[index] > 1]
        tally[0] += any(uses[index][block] != NEVER for block in blocks[1:])
        tally[1] += 1
    print(
        f"{len(trace)} requests, {args.replicas} replicas x {args.capacity} blocks "
        f"(clairvoyant placement within {args.balance:g} x mean assigned blocks; "
        f"one fleet turnover: {turnover} requests)"
    )
    print(f"{'':<30}{'hit rate':>9}{'/ smg_like':>11}{'imbalance (assigned / uncached)':>33}")
    for name, rate, imb in rows:
        print(f"{name:<30}{rate:>9.3f}{rate / smg:>11.3f}{imb:>33}")
    print(
        "prompt continued by a later request: "
        + ", ".join(
            f"{label} {followed[key][0] / max(1, followed[key][1]):.2f} of {followed[key][1]}"
            for key, label in ((False, "new conversations"), (True, "continued ones"))
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
