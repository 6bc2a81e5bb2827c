"""Routing policies as the trace simulator runs them.

Each policy picks a replica for a request's blocks at time `now` (s), reading
the simulated caches and load (`ReplicaCaches`, `LoadModel`) it was built with:

* ``round_robin``: replica i mod N.
* ``consistent_hash``: a ring (160 virtual nodes per replica) keyed by the id of
  the request's block ``key_blocks - 1`` (ids are chained, so it names the first
  ``key_blocks`` blocks), with bounded loads: walk the ring past replicas whose
  in-flight count would exceed ``ceil(1.25 x (total + 1) / N)``.
* ``smg_like``: SMG's ``cache_aware`` for HTTP workers, block-granular. One
  approximate tree records routing history (which replica each prefix was sent
  to), never evictions by the engines; every ``eviction_interval_s`` (60 s,
  SMG's default) of trace time its least recently used entries are evicted
  until it holds at most ``max_tree_blocks`` distinct blocks. The matched length is the longest prefix
  in the tree (all replicas); its owner is the replica that first inserted the
  deepest matched block (SMG keeps a node's first tenant). If matched / total >
  ``cache_threshold`` (0.3) the owner gets it, unless the spill gate fires: its
  in-flight count exceeds the fleet mean by ``min(balance_abs_threshold (64),
  max(4, 2 sqrt(mean)))`` and by ``balance_rel_threshold`` (1.5) x the mean.
  Otherwise the least-loaded replica, ties by fewest requests processed, then
  lowest index (SMG's ``(load, processed, idx)``). The chosen replica's path is
  inserted whatever the branch.
* ``precise``: `precise_policy.choose_replica` over the true simulated caches.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Protocol

from .cache_sim import ReplicaCaches, cached_runs
from .load_model import LoadModel
from .precise_policy import PreciseParams, choose_replica

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

    def choose(self, blocks: Sequence[int], now: float) -> int: ...


class RoundRobin:
    name = "round_robin"

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self.turn = -1

    def choose(self, blocks: Sequence[int], now: float) -> int:
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
        load: LoadModel,
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

    def choose(self, blocks: Sequence[int], now: float) -> int:
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
        load: LoadModel,
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
        # (block * replicas + replica) -> last use (a request counter)
        self.stamps: dict[int, int] = {}
        self.clock = 0
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

    def choose(self, blocks: Sequence[int], now: float) -> int:
        tree = self.tree
        matched = 0
        for block in blocks:
            if block not in tree:
                break
            matched += 1
        if blocks and matched / len(blocks) > self.cache_threshold:
            deepest = blocks[matched - 1]
            owner = self.owner[deepest]
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
        self._insert(blocks, chosen, now)
        return chosen

    def _insert(self, blocks: Sequence[int], replica: int, now: float) -> None:
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
        stamps = self.stamps
        replicas = self.replicas
        self.clock += 1
        clock = self.clock
        for block in blocks:
            key = block * replicas + replica
            if key not in stamps:
                mask = tree.get(block, 0)
                if not mask:
                    owner[block] = replica
                tree[block] = mask | bit
            stamps[key] = clock
        if now >= self.next_eviction:
            self.next_eviction = now + self.eviction_interval_s
            self._evict()

    def _evict(self) -> None:
        """SMG's periodic eviction: least recently used (replica, block) entries go
        until the tree holds at most `max_tree_blocks` distinct blocks."""
        tree = self.tree
        limit = self.max_tree_blocks
        if limit is None or len(tree) <= limit:
            return
        owner = self.owner
        stamps = self.stamps
        replicas = self.replicas
        for key in sorted(stamps, key=stamps.__getitem__):
            if len(tree) <= limit:
                break
            del stamps[key]
            block, holder = divmod(key, replicas)
            left = tree[block] & ~(1 << holder)
            if left:
                tree[block] = left
                if owner[block] == holder:
                    owner[block] = (left & -left).bit_length() - 1
            else:
                del tree[block]
                del owner[block]


class Precise:
    name = "precise"

    def __init__(
        self,
        replicas: int,
        caches: ReplicaCaches,
        load: LoadModel,
        params: PreciseParams | None = None,
    ) -> None:
        self.replicas = replicas
        self.caches = caches
        self.load = load
        self.params = params or PreciseParams()
        self.turn = 0

    def choose(self, blocks: Sequence[int], now: float) -> int:
        caches = self.caches
        runs = cached_runs(caches.holders, blocks, self.replicas)
        load = self.load
        per_block = load.prefill_s_per_block
        queued = [
            (busy - now) / per_block if busy > now and per_block > 0 else 0.0
            for busy in load.busy_until
        ]
        self.turn += 1
        length = len(blocks)

        def eviction_stamp(replica: int) -> float:
            return caches.eviction_stamp(replica, length - runs[replica])

        return choose_replica(runs, queued, load.inflight, self.params, self.turn, eviction_stamp)


def make_policy(
    name: str,
    replicas: int,
    caches: ReplicaCaches,
    load: LoadModel,
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
