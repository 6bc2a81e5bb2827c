"""Simulated prefix caches: one LRU of block ids per replica, and the oracle bounds.

A request hits the longest run of its blocks, from the first, that its replica
holds (vLLM's prefix cache is a chain: block k is reusable only with blocks
0..k-1). After the request every one of its blocks is in that replica's cache.
Blocks are touched last-to-first so that, as in vLLM (which frees a request's
blocks tail first), a prompt's tail is evicted before its head.

`holders` maps a block id to a bitmask of the replicas holding it, so a policy
reads every replica's cached run in one pass over the prompt. Plain dicts,
OrderedDicts and ints only: this is the simulator's hot loop.

`LruReplicas` is what the simulated caches and the live router's `BlockIndex`
share: per-replica LRU orders of block -> last-use stamp, and what admitting a
request to a replica would evict (the precise policy's eviction cost).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["LruReplicas", "ReplicaCaches", "cached_runs", "oracle_hits"]


_OLDEST_READ = 128  # stamps read off an LRU order at once: what several requests evict


class LruReplicas:
    """Per replica, an LRU order of block -> last-use stamp (least recently used
    first) and a capacity in blocks (None: unknown). The stamps of each replica's oldest
    blocks are read off its order when needed and kept until it changes: subclasses
    call `_changed(replica)` when they change that order (`ReplicaCaches.admit`
    keeps them instead while it only evicts from their front)."""

    __slots__ = ("_limits", "_oldest", "lru")

    def __init__(self, replicas: int, capacities: Sequence[int | None]) -> None:
        self.lru: list[OrderedDict[int, float]] = [OrderedDict() for _ in range(replicas)]
        self._limits = list(capacities)
        self._oldest: list[list[float] | None] = [None] * replicas

    def _changed(self, replica: int) -> None:
        self._oldest[replica] = None

    def newest_evicted(self, replica: int, run: int, length: int) -> tuple[int, float]:
        """If a request of `length` blocks with that cached run went to `replica`:
        the blocks it would evict and the stamp of the newest of them; when none
        would be (or nothing is held), 0 and -1 minus the blocks left free (below
        every stamp, the roomiest replica first); 0 and -inf when the capacity is
        unknown."""
        capacity = self._limits[replica]
        if capacity is None:
            return 0, -math.inf
        lru = self.lru[replica]
        held = len(lru)
        evicted = held + length - run - capacity
        if evicted <= 0 or not held:
            return max(evicted, 0), min(evicted, 0) - 1.0
        oldest = self._oldest[replica]
        if oldest is None or (len(oldest) < evicted and len(oldest) < held):
            oldest = list(itertools.islice(lru.values(), max(evicted, _OLDEST_READ)))
            self._oldest[replica] = oldest
        return evicted, oldest[min(evicted, len(oldest)) - 1]


class ReplicaCaches(LruReplicas):
    """`replicas` LRU caches of `capacity` blocks each (None: unbounded)."""

    __slots__ = ("capacity", "holders", "replicas")

    def __init__(self, replicas: int, capacity: int | None) -> None:
        if replicas < 1:
            raise ValueError(f"need at least one replica, got {replicas}")
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be positive blocks or None, got {capacity}")
        super().__init__(replicas, [capacity] * replicas)  # stamps: request sequence numbers
        self.replicas = replicas
        self.capacity = capacity
        self.holders: dict[int, int] = {}

    def cached_run(self, blocks: Sequence[int], replica: int) -> int:
        """How many leading blocks of `blocks` `replica` holds."""
        holders = self.holders
        run = 0
        for block in blocks:
            if not (holders.get(block, 0) >> replica) & 1:
                break
            run += 1
        return run

    def admit(self, blocks: Sequence[int], replica: int, stamp: float = 0.0) -> int:
        """Serve `blocks` on `replica` at `stamp`: return the cached run, then cache them all.

        The stamps read off the replica's oldest blocks stay valid as long as
        none of those blocks is reused: evicted ones are dropped from their front."""
        holders = self.holders
        lru = self.lru[replica]
        oldest = self._oldest[replica]
        newest_read = oldest[-1] if oldest else -math.inf
        bit = 1 << replica
        run = 0
        for block in blocks:
            if block not in lru:
                break
            run += 1
        move = lru.move_to_end
        for block in reversed(blocks):
            last = lru.get(block)
            if last is None:
                lru[block] = stamp
                holders[block] = holders.get(block, 0) | bit
            else:
                move(block)
                lru[block] = stamp
                if last <= newest_read:  # may be one of the oldest read
                    oldest = None
        evicted = 0
        capacity = self.capacity
        if capacity is not None and len(lru) > capacity:
            clear = ~bit
            pop = lru.popitem
            while len(lru) > capacity:
                old, _ = pop(last=False)
                evicted += 1
                left = holders[old] & clear
                if left:
                    holders[old] = left
                else:
                    del holders[old]
        self._oldest[replica] = (oldest[evicted:] or None) if oldest else None
        return run

    def clear(self, replica: int) -> None:
        """Forget everything `replica` holds (a restart)."""
        clear = ~(1 << replica)
        holders = self.holders
        for block in self.lru[replica]:
            left = holders[block] & clear
            if left:
                holders[block] = left
            else:
                del holders[block]
        self.lru[replica].clear()
        self._changed(replica)


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


def oracle_hits(blocks: Sequence[Sequence[int]], capacity: int | None) -> list[int]:
    """Per request, the cached run in ONE shared LRU cache of `capacity` blocks
    (None: infinite). The sum of all replicas' capacity bounds any router."""
    caches = ReplicaCaches(1, capacity)
    admit = caches.admit
    return [admit(request, 0) for request in blocks]
