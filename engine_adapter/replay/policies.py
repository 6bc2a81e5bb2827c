"""Routing policies as the trace simulator runs them.

Each policy picks a replica for a request's blocks at time `now` (s), reading
the simulated caches and load (`ReplicaCaches`, `ReplicaLoad`) it was built with:

* ``round_robin``: replica i mod N.
* ``consistent_hash``: a ring (160 virtual nodes per replica) keyed by the id of
  the request's block ``key_blocks - 1`` (ids are chained, so it names the first
  ``key_blocks`` blocks), with bounded loads: walk the ring past replicas whose
  in-flight count would exceed ``ceil(1.25 x (total + 1) / N)``.
* ``smg_like``: SMG's ``cache_aware`` for HTTP workers, block-granular. One
  approximate tree records routing history (which replica each prefix was sent
  to), never evictions by the engines. Eviction follows SMG's
  ``evict_tenant_by_size``: every ``eviction_interval_s`` (60 s, SMG's default)
  of trace time, each replica holding more than ``max_tree_blocks`` blocks of
  the tree loses its least recently used *leaves* (blocks none of whose
  children it holds), deepest first, until it is within the limit. Last-use
  stamps as SMG sets them: blocks an insert creates and the request's last
  block get the insert's stamp, blocks of other replicas' paths the insert
  joins get 0 (evicted first once they become leaves), and every fourth
  request (SMG's 1-in-8 epoch test, two epochs a request) the deepest matched
  block is touched for its owner. The matched length is the longest prefix
  in the tree (all replicas); its owner is the replica that first inserted the
  deepest matched block (SMG keeps a node's first tenant). If matched / total >
  ``cache_threshold`` (0.3) the owner gets it, unless the spill gate fires: its
  in-flight count exceeds the fleet mean by ``min(balance_abs_threshold (64),
  max(4, 2 sqrt(mean)))`` and by ``balance_rel_threshold`` (1.5) x the mean.
  Otherwise the least-loaded replica, ties by fewest requests processed, then
  lowest index (SMG's ``(load, processed, idx)``). The chosen replica's path is
  inserted whatever the branch.
* ``precise``: `routing.policy.choose_replica` over the true simulated caches,
  with the eviction cost of a `ReuseModel` learned as the replay goes and the
  work budget of `WorkShares`, which spreads prefixes evenly while the model
  has no evidence yet, as live (requests are numbered as the replay stamps
  their blocks: 0, 1, ...).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from typing import Protocol, cast

from ..routing.policy import PreciseParams, WorkShares, cached_runs, choose_replica
from ..routing.reuse import ReuseModel, ReuseSettings
from .cache_sim import ReplicaCaches
from .replica_load import ReplicaLoad

__all__ = [
    "POLICY_NAMES",
    "ConsistentHash",
    "Policy",
    "Precise",
    "RoundRobin",
    "SmgLike",
    "make_policy",
]

POLICY_NAMES = ("round_robin", "consistent_hash", "smg_like", "precise")


class Policy(Protocol):
    name: str

    def choose(self, blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
        """The replica for `blocks` arriving at `now`; `full_blocks` of them are
        full (None: all; a Mooncake prompt's last block may be partial)."""
        ...


class RoundRobin:
    name = "round_robin"

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.turn = -1

    def choose(self, blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
        self.turn += 1
        return self.turn % self.replicas


def _mix64(value: int) -> int:
    # splitmix64 finaliser: spreads small consecutive ids over the ring
    value = (value + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return value ^ (value >> 31)


class ConsistentHash:
    name = "consistent_hash"

    def __init__(
        self,
        replicas: int,
        load: ReplicaLoad,
        key_blocks: int = 2,
        load_factor: float = 1.25,
        virtual_nodes: int = 160,
    ) -> None:
        ring = sorted(
            (_mix64(r * 1_000_003 + v), r) for r in range(replicas) for v in range(virtual_nodes)
        )
        self.points = [point for point, _ in ring]
        self.owners = [owner for _, owner in ring]
        self.replicas = replicas
        self.load = load
        self.key_blocks = key_blocks
        self.load_factor = load_factor

    def choose(self, blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
        key = _mix64(blocks[min(self.key_blocks, len(blocks)) - 1]) if blocks else 0
        inflight = self.load.inflight
        bound = math.ceil(self.load_factor * (sum(inflight) + 1) / self.replicas)
        index = bisect.bisect(self.points, key)
        owners = self.owners
        size = len(owners)
        for step in range(size):
            replica = owners[(index + step) % size]
            if inflight[replica] + 1 <= bound:
                return replica
        return owners[index % size]


class SmgLike:
    name = "smg_like"

    def __init__(
        self,
        replicas: int,
        load: ReplicaLoad,
        *,
        cache_threshold: float = 0.3,
        balance_abs_threshold: int = 64,
        balance_rel_threshold: float = 1.5,
        max_tree_blocks: int | None = None,
        eviction_interval_s: float = 60.0,
    ) -> None:
        self.replicas = replicas
        self.load = load
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.max_tree_blocks = max_tree_blocks
        self.processed = [0] * replicas
        self.tree: dict[int, int] = {}  # block -> bitmask of replicas in its path
        self.owner: dict[int, int] = {}  # block -> first replica that inserted it
        self.parent: dict[int, int] = {}  # block -> the block before it (-1: first)
        # per replica: block -> last-use stamp (SMG's epoch), for leaf-first LRU
        self.stamps: list[dict[int, int]] = [{} for _ in range(replicas)]
        # per replica: block -> how many of its children the replica holds (0: a leaf)
        self.children: list[dict[int, int]] = [{} for _ in range(replicas)]
        # per replica: heap of (stamp, block) leaf candidates, checked when popped
        self.leaves: list[list[tuple[int, int]]] = [[] for _ in range(replicas)]
        self.tracking = False
        self.requests = 0
        self.eviction_interval_s = eviction_interval_s
        self.next_eviction = eviction_interval_s

    def _least_loaded(self) -> int:
        inflight = self.load.inflight
        processed = self.processed
        best = 0
        best_load = inflight[0]
        best_done = processed[0]
        for r in range(1, self.replicas):
            load = inflight[r]
            if load < best_load or (load == best_load and processed[r] < best_done):
                best, best_load, best_done = r, load, processed[r]
        return best

    def choose(self, blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
        tree = self.tree
        matched = 0
        for block in blocks:
            if block not in tree:
                break
            matched += 1
        epoch = 2 * self.requests  # SMG draws one epoch for the match, one for the insert
        self.requests += 1
        if blocks and matched / len(blocks) > self.cache_threshold:
            deepest = blocks[matched - 1]
            owner = self.owner[deepest]
            if self.max_tree_blocks is not None and not epoch & 7:
                self.stamps[owner][deepest] = epoch
                if self.tracking:
                    heapq.heappush(self.leaves[owner], (epoch, deepest))
            inflight = self.load.inflight
            mean = sum(inflight) / self.replicas
            margin = min(self.balance_abs_threshold, max(4.0, 2.0 * math.sqrt(mean)))
            if (
                inflight[owner] > mean + margin
                and inflight[owner] > self.balance_rel_threshold * mean
            ):
                owner = self._least_loaded()
            chosen = owner
        else:
            chosen = self._least_loaded()
        self.processed[chosen] += 1
        self._insert(blocks, chosen, now, epoch + 1)
        return chosen

    def _insert(self, blocks: Sequence[int], replica: int, now: float, epoch: int) -> None:
        tree = self.tree
        owner = self.owner
        bit = 1 << replica
        if self.max_tree_blocks is None:  # unbounded: nothing is ever evicted
            for block in blocks:
                mask = tree.get(block, 0)
                if not mask:
                    owner[block] = replica
                tree[block] = mask | bit
            return
        stamps = self.stamps[replica]
        parent = self.parent
        tracking = self.tracking
        children = self.children[replica]
        previous = -1
        for block in blocks:
            if block not in stamps:
                mask = tree.get(block, 0)
                if mask:  # joins a path other replicas made: an intermediate node
                    stamps[block] = 0
                    tree[block] = mask | bit
                else:  # a new node: stamped by this insert
                    stamps[block] = epoch
                    tree[block] = bit
                    owner[block] = replica
                    parent[block] = previous
                if tracking:
                    up = parent[block]
                    if up in stamps:
                        children[up] = children.get(up, 0) + 1
            previous = block
        if blocks:
            stamps[previous] = epoch
            if tracking:
                heapq.heappush(self.leaves[replica], (epoch, previous))
        if now >= self.next_eviction:
            self.next_eviction = now + self.eviction_interval_s
            self._evict()

    def _track(self) -> None:
        """Start keeping children counts and leaf heaps (from the first eviction
        on: a tree that never outgrows its limit does not pay for them)."""
        parent = self.parent
        for replica, stamps in enumerate(self.stamps):
            children = self.children[replica]
            for block in stamps:
                up = parent[block]
                if up in stamps:
                    children[up] = children.get(up, 0) + 1
            leaves = [(stamp, block) for block, stamp in stamps.items() if block not in children]
            heapq.heapify(leaves)
            self.leaves[replica] = leaves
        self.tracking = True

    def _evict(self) -> None:
        """SMG's periodic `evict_tenant_by_size`: per replica over the limit, its
        least recently used leaves go, deepest first, until it holds at most
        `max_tree_blocks` blocks."""
        limit = self.max_tree_blocks
        if limit is None or all(len(stamps) <= limit for stamps in self.stamps):
            return
        if not self.tracking:
            self._track()
        tree = self.tree
        owner = self.owner
        parent = self.parent
        pop = heapq.heappop
        push = heapq.heappush
        for replica, stamps in enumerate(self.stamps):
            if len(stamps) <= limit:
                continue
            children = self.children[replica]
            leaves = self.leaves[replica]
            clear = ~(1 << replica)
            while len(stamps) > limit and leaves:
                stamp, block = pop(leaves)
                # stale: re-stamped, already evicted, or no longer a leaf
                if stamps.get(block) != stamp or children.get(block, 0):
                    continue
                del stamps[block]
                children.pop(block, None)
                up = parent[block]
                left = tree[block] & clear
                if left:
                    tree[block] = left
                    if owner[block] == replica:
                        owner[block] = (left & -left).bit_length() - 1
                else:
                    del tree[block]
                    del owner[block]
                    del parent[block]
                count = children.get(up, 0) - 1
                if count == 0:
                    children[up] = 0
                    push(leaves, (stamps[up], up))
                elif count > 0:
                    children[up] = count
            if len(leaves) > 2 * len(stamps) + 1024:  # drop stale candidates
                leaves[:] = [
                    (stamp, block) for block, stamp in stamps.items() if not children.get(block, 0)
                ]
                heapq.heapify(leaves)


class Precise:
    name = "precise"

    def __init__(
        self,
        replicas: int,
        caches: ReplicaCaches,
        load: ReplicaLoad,
        params: PreciseParams | None = None,
    ) -> None:
        self.replicas = replicas
        self.caches = caches
        self.load = load
        self.params = params or PreciseParams()
        self.requests = 0
        # the request being decided, for `_eviction`
        self._runs: list[int] = []
        self._length = 0
        self._clock = 0
        # unbounded caches evict nothing: no eviction cost, no budget (as live
        # without the replicas' capacity)
        capacity = caches.capacity
        self.shares = WorkShares(
            replicas, None if capacity is None else self.params.work_balance, capacity or 0
        )
        self.reuse = (
            None
            if capacity is None
            else ReuseModel(ReuseSettings.for_capacity(replicas * capacity))
        )

    def choose(self, blocks: Sequence[int], now: float, full_blocks: int | None = None) -> int:
        # requests are numbered as the replay stamps their blocks (0, 1, ...)
        request = self.requests
        self.requests += 1
        shares = self.shares
        reuse = self.reuse
        clock = shares.clock
        if reuse is not None:
            reuse.observe(request, blocks if full_blocks is None else blocks[:full_blocks], clock)
        runs, values = self._runs_and_values(blocks)
        load = self.load
        per_block = load.prefill_s_per_block
        queued = [
            (busy - now) / per_block if busy > now and per_block > 0 else 0.0
            for busy in load.busy_until
        ]
        length = len(blocks)
        eviction = None
        if reuse is not None:
            self._runs = self._gpu_runs(blocks, runs)
            self._length = length
            self._clock = clock
            eviction = self._eviction
        within = shares.within(runs, length, reuse is not None and not reuse.informed)
        # choose_replica scores runs as numbers (annotated int; tiered values are floats)
        replica = choose_replica(
            cast("list[int]", values),
            queued,
            load.inflight,
            self.params,
            self.requests,
            eviction,
            within,
        )
        shares.record(replica, length, runs[replica])
        return replica

    def _runs_and_values(self, blocks: Sequence[int]) -> tuple[list[int], list[float]]:
        """Each replica's cached run of `blocks`, and what the decision scores it at (its
        length)."""
        runs = cached_runs(self.caches.holders, blocks, self.replicas)
        return runs, cast("list[float]", runs)

    def _gpu_runs(self, blocks: Sequence[int], runs: list[int]) -> list[int]:
        """Each replica's run of `blocks` in GPU memory, which a request there does not
        evict (`runs`: its cached runs)."""
        return runs

    def _eviction(self, replica: int) -> tuple[float, float]:
        """The current request's (eviction cost, eviction stamp) on `replica`."""
        reuse = self.reuse
        assert reuse is not None, "choose() passes _eviction only when caches are bounded"
        count, stamp = self.caches.newest_evicted(replica, self._runs[replica], self._length)
        return reuse.eviction_cost(count, stamp, self._clock), stamp


def make_policy(
    name: str,
    replicas: int,
    caches: ReplicaCaches,
    load: ReplicaLoad,
    *,
    max_tree_blocks: int | None = None,
    precise: PreciseParams | None = None,
) -> Policy:
    """A fresh policy by name (one of `POLICY_NAMES`)."""
    if name == "round_robin":
        return RoundRobin(replicas)
    if name == "consistent_hash":
        return ConsistentHash(replicas, load)
    if name == "smg_like":
        return SmgLike(replicas, load, max_tree_blocks=max_tree_blocks)
    if name == "precise":
        return Precise(replicas, caches, load, precise)
    raise ValueError(f"unknown policy {name!r}: choose from {', '.join(POLICY_NAMES)}")
