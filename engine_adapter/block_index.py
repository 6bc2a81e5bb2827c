"""Which replica holds which KV block, as the engines report it (the precise router's state).

Blocks are the 8-byte ints of KV events (`prefixkit.sdk.block_hash.event_block_hash`).
`stored` / `removed` / `drop_replica` follow the events; `touch` records that a
routed request used a replica's blocks, so each replica's blocks are kept in
least-recently-used order, like the engine's own free queue. From that order,
`eviction_stamp` tells how recently used the blocks are that a request's new
blocks would evict (the precise policy prefers evicting old ones).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from .cache_sim import cached_runs

__all__ = ["BlockIndex"]


class BlockIndex:
    """Block -> replicas index plus per-replica LRU order; `capacity[r]` in blocks (None: unknown)."""

    def __init__(self, replicas: int, capacity: Sequence[int | None] | None = None) -> None:
        self.replicas = replicas
        self.capacity: list[int | None] = list(capacity) if capacity else [None] * replicas
        self.holders: dict[int, int] = {}
        self.lru: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(replicas)]
        self.clock = 0

    def stored(self, replica: int, hashes: Iterable[int]) -> None:
        bit = 1 << replica
        lru = self.lru[replica]
        holders = self.holders
        self.clock += 1
        for block in hashes:
            if block in lru:
                lru.move_to_end(block)
            holders[block] = holders.get(block, 0) | bit
            lru[block] = self.clock

    def removed(self, replica: int, hashes: Iterable[int]) -> None:
        clear = ~(1 << replica)
        lru = self.lru[replica]
        holders = self.holders
        for block in hashes:
            if lru.pop(block, None) is None:
                continue
            left = holders.get(block, 0) & clear
            if left:
                holders[block] = left
            else:
                holders.pop(block, None)

    def drop_replica(self, replica: int) -> None:
        """Forget every block of `replica` (it restarted, cleared its cache or went away)."""
        self.removed(replica, list(self.lru[replica]))

    def touch(self, replica: int, hashes: Sequence[int]) -> None:
        """A request using `hashes` was sent to `replica`: its held blocks become most recent."""
        lru = self.lru[replica]
        self.clock += 1
        for block in reversed(hashes):
            if block in lru:
                lru.move_to_end(block)
                lru[block] = self.clock

    def runs(self, hashes: Sequence[int]) -> list[int]:
        """Each replica's cached run of `hashes` (leading blocks it holds)."""
        return cached_runs(self.holders, hashes, self.replicas)

    def held(self, replica: int) -> int:
        return len(self.lru[replica])

    def eviction_stamp(self, replica: int, incoming: int) -> float:
        """Stamp of the newest block `incoming` new blocks would evict; when none
        would, -1 minus the blocks left free (below every stamp: the roomiest
        replica first); -inf when the capacity is unknown."""
        capacity = self.capacity[replica]
        lru = self.lru[replica]
        if capacity is None:
            return -math.inf
        evicted = len(lru) + incoming - capacity
        if evicted <= 0 or not lru:
            return float(min(evicted, 0) - 1)
        index = min(evicted, len(lru)) - 1
        return float(next(itertools.islice(lru.values(), index, index + 1)))
