"""Which replica holds which KV block, as the engines report it (the precise router's state).

Blocks are the 8-byte ints of KV events (`prefixkit.sdk.block_hash.event_block_hash`).
`stored` / `removed` / `drop_replica` follow the events; `touch` records that a
routed request used a replica's blocks, so each replica's blocks are kept in
least-recently-used order, like the engine's own free queue. Each block is
stamped with the id of the last request that used it (the router numbers them
from 1): `touch` stamps the blocks a request reuses, `stored` the blocks an
engine reports with the last request sent to that replica (the one that
usually made them; 0 before any). From that order, `newest_evicted` tells how
many blocks, last used by which request, a request's new blocks would evict
(the precise policy values them with its `ReuseModel`).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from .cache_sim import cached_runs

__all__ = ["BlockIndex"]


_OLDEST_READ = 128  # stamps read off an LRU order at once: what several requests evict


class BlockIndex:
    """Block -> replicas index plus, per replica, an LRU order of block -> last-use
    stamp (least recently used first); `capacity[r]` in blocks (None: unknown).
    The stamps of each replica's oldest blocks are read off its order when
    needed and kept until it changes."""

    def __init__(self, replicas: int, capacity: Sequence[int | None] | None = None) -> None:
        self.replicas = replicas
        self.lru: list[OrderedDict[int, float]] = [OrderedDict() for _ in range(replicas)]
        self._limits = list(capacity) if capacity else [None] * replicas
        self._oldest: list[list[float] | None] = [None] * replicas
        self.holders: dict[int, int] = {}
        self.last_request = [0] * replicas

    def stored(self, replica: int, hashes: Iterable[int]) -> None:
        bit = 1 << replica
        lru = self.lru[replica]
        holders = self.holders
        stamp = self.last_request[replica]
        self._changed(replica)
        for block in hashes:
            if block in lru:
                lru.move_to_end(block)
            holders[block] = holders.get(block, 0) | bit
            lru[block] = stamp

    def removed(self, replica: int, hashes: Iterable[int]) -> None:
        clear = ~(1 << replica)
        lru = self.lru[replica]
        holders = self.holders
        self._changed(replica)
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

    def touch(self, replica: int, hashes: Sequence[int], request: int) -> None:
        """Request number `request` using `hashes` was sent to `replica`: its held
        blocks become most recent, stamped `request`."""
        lru = self.lru[replica]
        self.last_request[replica] = request
        self._changed(replica)
        for block in reversed(hashes):
            if block in lru:
                lru.move_to_end(block)
                lru[block] = request

    def _changed(self, replica: int) -> None:
        self._oldest[replica] = None

    def newest_evicted(
        self, replica: int, run: int, length: int, coming: int = 0
    ) -> tuple[int, float]:
        """If a request of `length` blocks with that cached run went to `replica`:
        the blocks it would evict and the stamp of the newest of them; when none
        would be (or nothing is held), 0 and -1 minus the blocks left free (below
        every stamp, the roomiest replica first); 0 and -inf when the capacity is
        unknown. `coming`: blocks not held yet that requests in flight there will
        store first; they take room, and what they evict is not this request's
        doing. (`ReplicaCaches.newest_evicted` answers the same for the
        simulator, where nothing is in flight.)"""
        capacity = self._limits[replica]
        if capacity is None:
            return 0, -math.inf
        lru = self.lru[replica]
        held = len(lru)
        evicted = held + coming + length - run - capacity
        own = min(evicted, length - run)
        if evicted <= 0 or not held:
            return max(own, 0), min(evicted, 0) - 1.0
        oldest = self._oldest[replica]
        if oldest is None or (len(oldest) < evicted and len(oldest) < held):
            oldest = list(itertools.islice(lru.values(), max(evicted, _OLDEST_READ)))
            self._oldest[replica] = oldest
        return own, oldest[min(evicted, len(oldest)) - 1]

    def runs(self, hashes: Sequence[int]) -> list[int]:
        """Each replica's cached run of `hashes` (leading blocks it holds)."""
        return cached_runs(self.holders, hashes, self.replicas)

    def held(self, replica: int) -> int:
        return len(self.lru[replica])
