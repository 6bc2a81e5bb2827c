"""Which replica holds which KV block, as the engines report it (the precise router's state).

Blocks are the 8-byte ints of KV events (`prefixkit.sdk.event_block_hash`).
`stored` / `removed` / `drop_replica` follow the events, per tier (`tiered.MEDIA`:
the engine's GPU cache, and where an engine that offloads keeps blocks it dropped
from there: host memory, disk). Only the GPU tier is kept in LRU order and counts
against the capacity; a lower tier keeps which replica holds which block, counting
repeated announcements of a block (vLLM's offloading connector announces a block
again for each chunk that carries it, and for each secondary tier with the same
medium: it stays held until each is removed). `sent` / `finished`
bracket a request in flight: an engine reports a block only once its prefill
has computed it, so until the request ends its blocks count as *coming* to its
replica (they continue the replica's cached run, and take its room first).
`touch` records that a routed request used a replica's blocks, so each
replica's blocks are kept in least-recently-used order, like the engine's own
free queue. Each block is stamped with the id of the last request that used it
(the router numbers them from 1): `touch` stamps the blocks a request reuses,
`stored` the blocks an engine reports with the last request sent to that
replica (the one that usually made them; 0 before any). From that order, `newest_evicted` tells how
many blocks, last used by which request, a request's new blocks would evict
(the precise policy values them with its `ReuseModel`).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from .policy import cached_runs
from .tiered import MEDIA, tiered_runs

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
        self.holders: dict[int, int] = {}  # the GPU tier's
        # per lower tier (MEDIA[1:]): block -> replica bitmask, and per replica the
        # announcements of each block it holds there
        self.lower: list[dict[int, int]] = [{} for _ in MEDIA[1:]]
        self._lower_counts: list[list[dict[int, int]]] = [
            [{} for _ in range(replicas)] for _ in MEDIA[1:]
        ]
        self.last_request = [0] * replicas
        # per replica: block -> requests in flight to it that carry the block
        self.coming: list[dict[int, int]] = [{} for _ in range(replicas)]
        # per replica: how many of its coming blocks it does not hold (kept up to
        # date by every event, so no eviction query walks the blocks in flight)
        self._coming_unheld = [0] * replicas

    def stored(self, replica: int, hashes: Iterable[int], tier: int = 0) -> None:
        """`replica` stored `hashes` in `tier` (an index of `MEDIA`; 0: GPU)."""
        if tier:
            self._stored_lower(replica, hashes, tier - 1)
            return
        bit = 1 << replica
        lru = self.lru[replica]
        holders = self.holders
        stamp = self.last_request[replica]
        coming = self.coming[replica]
        arrived = 0
        self._changed(replica)
        for block in hashes:
            if block in lru:
                lru.move_to_end(block)
            elif block in coming:
                arrived += 1
            holders[block] = holders.get(block, 0) | bit
            lru[block] = stamp
        self._coming_unheld[replica] -= arrived

    def removed(self, replica: int, hashes: Iterable[int], tier: int = 0) -> None:
        """`replica` dropped `hashes` from `tier` (an index of `MEDIA`; 0: GPU)."""
        if tier:
            self._removed_lower(replica, hashes, tier - 1)
            return
        clear = ~(1 << replica)
        lru = self.lru[replica]
        holders = self.holders
        coming = self.coming[replica]
        lost = 0
        self._changed(replica)
        for block in hashes:
            if lru.pop(block, None) is None:
                continue
            if block in coming:
                lost += 1
            left = holders.get(block, 0) & clear
            if left:
                holders[block] = left
            else:
                holders.pop(block, None)
        self._coming_unheld[replica] += lost

    def _stored_lower(self, replica: int, hashes: Iterable[int], lower: int) -> None:
        bit = 1 << replica
        holders = self.lower[lower]
        counts = self._lower_counts[lower][replica]
        for block in hashes:
            count = counts.get(block, 0)
            if not count:
                holders[block] = holders.get(block, 0) | bit
            counts[block] = count + 1

    def _removed_lower(self, replica: int, hashes: Iterable[int], lower: int) -> None:
        clear = ~(1 << replica)
        holders = self.lower[lower]
        counts = self._lower_counts[lower][replica]
        for block in hashes:
            count = counts.get(block, 0)
            if count > 1:
                counts[block] = count - 1
            elif count:
                del counts[block]
                left = holders.get(block, 0) & clear
                if left:
                    holders[block] = left
                else:
                    holders.pop(block, None)

    def drop_replica(self, replica: int) -> None:
        """Forget every block of `replica` in every tier (it restarted, cleared its
        cache or went away)."""
        self.removed(replica, list(self.lru[replica]))
        clear = ~(1 << replica)
        for holders, per_replica in zip(self.lower, self._lower_counts, strict=True):
            counts = per_replica[replica]
            for block in counts:
                left = holders.get(block, 0) & clear
                if left:
                    holders[block] = left
                else:
                    holders.pop(block, None)
            counts.clear()

    def sent(self, replica: int, hashes: Sequence[int]) -> None:
        """A request carrying `hashes` was sent to `replica`: its blocks are
        coming there until it has `finished`."""
        coming = self.coming[replica]
        lru = self.lru[replica]
        unheld = 0
        for block in hashes:
            count = coming.get(block, 0)
            if not count and block not in lru:
                unheld += 1
            coming[block] = count + 1
        self._coming_unheld[replica] += unheld

    def finished(self, replica: int, hashes: Sequence[int]) -> None:
        """A request `sent` to `replica` with `hashes` ended: from now on only the
        engine's events tell which of its blocks the replica holds."""
        coming = self.coming[replica]
        lru = self.lru[replica]
        gone = 0
        for block in hashes:
            left = coming[block] - 1
            if left:
                coming[block] = left
            else:
                del coming[block]
                if block not in lru:
                    gone += 1
        self._coming_unheld[replica] -= gone

    def coming_unheld(self, replica: int) -> int:
        """Blocks that requests in flight to `replica` will store and it does not hold yet."""
        return self._coming_unheld[replica]

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

    def newest_evicted(self, replica: int, run: int, length: int) -> tuple[int, float]:
        """If a request of `length` blocks with that cached run went to `replica`:
        the blocks it would evict and the stamp of the newest of them; when none
        would be (or nothing is held), 0 and -1 minus the blocks left free (below
        every stamp, the roomiest replica first); 0 and -inf when the capacity is
        unknown. The blocks coming there and not held yet are stored first: they
        take room, and what they evict is not this request's doing.
        (`ReplicaCaches.newest_evicted` answers the same for the simulator,
        where nothing is in flight.)"""
        capacity = self._limits[replica]
        if capacity is None:
            return 0, -math.inf
        lru = self.lru[replica]
        held = len(lru)
        evicted = held + self._coming_unheld[replica] + length - run - capacity
        own = min(evicted, length - run)
        if evicted <= 0 or not held:
            return max(own, 0), min(evicted, 0) - 1.0
        oldest = self._oldest[replica]
        if oldest is None or (len(oldest) < evicted and len(oldest) < held):
            oldest = list(itertools.islice(lru.values(), max(evicted, _OLDEST_READ)))
            self._oldest[replica] = oldest
        return own, oldest[min(evicted, len(oldest)) - 1]

    def runs(self, hashes: Sequence[int]) -> list[int]:
        """Each replica's cached run of `hashes`: the leading blocks it holds or
        that a request in flight to it carries."""
        holders = self.holders
        runs = cached_runs(holders, hashes, self.replicas)
        length = len(hashes)
        for replica, coming in enumerate(self.coming):
            if not coming:
                continue
            run = runs[replica]
            bit = 1 << replica
            while run < length and (hashes[run] in coming or holders.get(hashes[run], 0) & bit):
                run += 1
            runs[replica] = run
        return runs

    def tiered_runs(
        self, hashes: Sequence[int], savings: Sequence[float]
    ) -> tuple[list[int], list[float]]:
        """Each replica's cached run of `hashes` in any tier (continued, as `runs`,
        over the blocks a request in flight to it carries) and its value: each block
        counts the `savings` (per tier of `MEDIA`) of the fastest tier holding it
        there, a block in flight there that of the GPU. While no lower tier holds a
        block, this is `runs` times the GPU's saving."""
        lower = self.lower
        if not any(lower):
            runs = self.runs(hashes)
            gpu = savings[0]
            # a copy when the GPU saves it all (the common case, and the cheaper)
            return runs, ([*runs] if gpu == 1.0 else [run * gpu for run in runs])
        holders = self.holders
        runs, values = tiered_runs([holders, *lower], hashes, self.replicas, savings)
        length = len(hashes)
        for replica, coming in enumerate(self.coming):
            if not coming:
                continue
            run = runs[replica]
            value = values[replica]
            bit = 1 << replica
            while run < length:
                block = hashes[run]
                if block in coming or holders.get(block, 0) & bit:
                    value += savings[0]
                else:
                    tier = next(
                        (t for t, held in enumerate(lower, 1) if held.get(block, 0) & bit), 0
                    )
                    if not tier:
                        break
                    value += savings[tier]
                run += 1
            runs[replica] = run
            values[replica] = value
        return runs, values

    def holds(self, replica: int, block: int) -> bool:
        """Whether `replica` holds `block` in its GPU tier."""
        return block in self.lru[replica]

    def held(self, replica: int, tier: int = 0) -> int:
        """How many blocks `replica` holds in `tier` (an index of `MEDIA`; 0: GPU)."""
        if tier:
            return len(self._lower_counts[tier - 1][replica])
        return len(self.lru[replica])
