"""Simulated prefix caches: one LRU of block ids per replica, and the oracle bounds.

A request hits the longest run of its blocks, from the first, that its replica
holds (vLLM's prefix cache is a chain: block k is reusable only with blocks
0..k-1). After the request every one of its blocks is in that replica's cache.
Blocks are touched last-to-first so that, as in vLLM (which frees a request's
blocks tail first), a prompt's tail is evicted before its head.

`holders` maps a block id to a bitmask of the replicas holding it, so a policy
reads every replica's cached run in one pass over the prompt. Plain dicts,
OrderedDicts and ints only: this is the simulator's hot loop.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

__all__ = ["ReplicaCaches", "cached_runs", "newest_evicted", "oracle_hits"]


class ReplicaCaches:
    """`replicas` LRU caches of `capacity` blocks each (None: unbounded)."""

    __slots__ = ("capacity", "holders", "lru", "replicas")

    def __init__(self, replicas: int, capacity: int | None) -> None:
        if replicas < 1:
            raise ValueError(f"need at least one replica, got {replicas}")
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be positive blocks or None, got {capacity}")
        self.replicas = replicas
        self.capacity = capacity
        # block -> last-use stamp (request sequence number), least recently used first
        self.lru: list[OrderedDict[int, float]] = [OrderedDict() for _ in range(replicas)]
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
        """Serve `blocks` on `replica` at `stamp`: return the cached run, then cache them all."""
        holders = self.holders
        lru = self.lru[replica]
        bit = 1 << replica
        run = 0
        for block in blocks:
            if block not in lru:
                break
            run += 1
        move = lru.move_to_end
        for block in reversed(blocks):
            if block in lru:
                move(block)
                lru[block] = stamp
            else:
                lru[block] = stamp
                holders[block] = holders.get(block, 0) | bit
        capacity = self.capacity
        if capacity is not None and len(lru) > capacity:
            clear = ~bit
            pop = lru.popitem
            while len(lru) > capacity:
                old, _ = pop(last=False)
                left = holders[old] & clear
                if left:
                    holders[old] = left
                else:
                    del holders[old]
        return run

    def evictions(self, runs: Sequence[int], length: int) -> tuple[list[int], list[float]]:
        """`newest_evicted` over these caches (stamps are >= 0)."""
        return newest_evicted(self.lru, itertools.repeat(self.capacity), runs, length)

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


def newest_evicted(
    lrus: Sequence[OrderedDict[int, float]],
    capacities: Iterable[int | None],
    runs: Sequence[int],
    length: int,
) -> tuple[list[int], list[float]]:
    """Per replica (its LRU order of block -> last-use stamp, its capacity), if a
    request of `length` blocks with that cached run went there: the blocks it
    would evict and the stamp of the newest of them; when none would be (or
    nothing is held), 0 and -1 minus the blocks left free (below every stamp,
    the roomiest replica first); 0 and -inf when the capacity is unknown."""
    counts: list[int] = []
    stamps: list[float] = []
    islice = itertools.islice
    # capacities may be an endless repeat of one capacity: lrus and runs bound the loop
    for lru, capacity, run in zip(lrus, capacities, runs, strict=False):
        if capacity is None:
            counts.append(0)
            stamps.append(-math.inf)
            continue
        evicted = len(lru) + length - run - capacity
        if evicted <= 0 or not lru:
            counts.append(max(evicted, 0))
            stamps.append(min(evicted, 0) - 1.0)
            continue
        counts.append(evicted)
        if evicted >= len(lru):
            stamps.append(next(reversed(lru.values())))
        else:
            stamps.append(next(islice(lru.values(), evicted - 1, None)))
    return counts, stamps


def oracle_hits(blocks: Sequence[Sequence[int]], capacity: int | None) -> list[int]:
    """Per request, the cached run in ONE shared LRU cache of `capacity` blocks
    (None: infinite). The sum of all replicas' capacity bounds any router."""
    caches = ReplicaCaches(1, capacity)
    admit = caches.admit
    return [admit(request, 0) for request in blocks]
