"""Simulated prefix caches: one LRU of block ids per replica, and the oracle bounds.

A request hits the longest run of its blocks, from the first, that its replica
holds (vLLM's prefix cache is a chain: block k is reusable only with blocks
0..k-1). After the request every one of its blocks is in that replica's cache,
and a prompt's tail is evicted before its head (vLLM frees a request's blocks
tail first).

`holders` maps a block id to a bitmask of the replicas holding it, so a policy
reads every replica's cached run in one pass over the prompt.

Each replica's LRU order is kept as *groups*, one per admit: the request's
blocks, all last used at its stamp, which leave tail first. A block belongs to
the group of its last admit (`held` maps it there); the copies older groups
keep of it are stale and skipped. Evicting walks the oldest group from its
tail; counting the blocks each group still holds (`live`) tells which group
the k-th least recently used block is in, which is what the precise policy's
eviction cost asks. Plain dicts, lists and slotted objects only: this is the
simulator's hot loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

__all__ = ["ReplicaCaches", "oracle_hits"]


class _Group:
    """The blocks one admit cached, its stamp, and how many of them are still
    held here (neither evicted nor reused by a later admit)."""

    __slots__ = ("blocks", "live", "stamp")

    def __init__(self, stamp: float) -> None:
        self.blocks: tuple[int, ...] = ()
        self.stamp = stamp
        self.live = 0


class _ReplicaLru:
    """One replica's LRU order of blocks, as groups (see the module doc)."""

    __slots__ = ("first", "groups", "held", "taken")

    def __init__(self) -> None:
        self.held: dict[int, _Group] = {}  # block -> the group of its last admit
        self.groups: list[_Group] = []  # oldest first
        self.first = 0  # index of the oldest group that may still hold blocks
        self.taken = 0  # entries of that group already evicted or skipped, from its tail


class ReplicaCaches:
    """`replicas` LRU caches of `capacity` blocks each (None: unbounded)."""

    __slots__ = ("_lrus", "capacity", "holders", "replicas")

    def __init__(self, replicas: int, capacity: int | None) -> None:
        if replicas < 1:
            raise ValueError(f"need at least one replica, got {replicas}")
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be positive blocks or None, got {capacity}")
        self.replicas = replicas
        self.capacity = capacity
        self.holders: dict[int, int] = {}
        self._lrus = [_ReplicaLru() for _ in range(replicas)]

    def held(self, replica: int) -> int:
        """How many blocks `replica` holds."""
        return len(self._lrus[replica].held)

    def oldest(self, replica: int) -> Iterator[tuple[int, float]]:
        """`replica`'s blocks and their last-use stamps, least recently used
        first (admitting while iterating invalidates the iterator)."""
        lru = self._lrus[replica]
        held = lru.held
        for group in lru.groups[lru.first :]:
            for block in reversed(group.blocks):
                if held.get(block) is group:
                    yield block, group.stamp

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
        """Serve `blocks` on `replica` at `stamp`: return the cached run, then
        cache them all, as one new group, and evict past the capacity."""
        if not blocks:
            return 0
        lru = self._lrus[replica]
        held = lru.held
        holders = self.holders
        group = _Group(stamp)
        bit = 1 << replica
        run = 0
        leading = True  # still in the cached run
        repeated = False
        for block in blocks:
            last = held.get(block)
            if last is group:  # a second time in this request
                repeated = True
                run += leading
                continue
            if last is None:
                leading = False
                holders[block] = holders.get(block, 0) | bit
            else:
                run += leading
                last.live -= 1
            held[block] = group
            group.live += 1
        # in the order they leave: a repeated block where it was first (last touched)
        group.blocks = tuple(dict.fromkeys(blocks) if repeated else blocks)
        lru.groups.append(group)
        capacity = self.capacity
        if capacity is not None and len(held) > capacity:
            self._evict(lru, replica, len(held) - capacity)
        return run

    def _evict(self, lru: _ReplicaLru, replica: int, count: int) -> None:
        """Evict `count` blocks from `replica`, least recently used first."""
        held = lru.held
        holders = self.holders
        groups = lru.groups
        clear = ~(1 << replica)
        first = lru.first
        taken = lru.taken
        group = groups[first]
        blocks = group.blocks
        while count:
            if not group.live:
                first += 1
                taken = 0
                group = groups[first]
                blocks = group.blocks
                continue
            taken += 1
            block = blocks[len(blocks) - taken]
            if held.get(block) is not group:  # stale: reused by a later admit
                continue
            del held[block]
            group.live -= 1
            count -= 1
            left = holders[block] & clear
            if left:
                holders[block] = left
            else:
                del holders[block]
        lru.first = first
        lru.taken = taken
        if first > 1024 and 2 * first > len(groups):  # drop the groups left behind
            del groups[:first]
            lru.first = 0

    def newest_evicted(self, replica: int, run: int, length: int) -> tuple[int, float]:
        """If a request of `length` blocks with that cached run went to `replica`:
        the blocks it would evict and the stamp of the newest of them; when none
        would be (or nothing is held), 0 and -1 minus the blocks left free (below
        every stamp, the roomiest replica first); 0 and -inf when unbounded."""
        capacity = self.capacity
        if capacity is None:
            return 0, -math.inf
        lru = self._lrus[replica]
        size = len(lru.held)
        evicted = size + length - run - capacity
        if evicted <= 0 or not size:
            return max(evicted, 0), min(evicted, 0) - 1.0
        groups = lru.groups
        index = lru.first
        newest = len(groups) - 1
        group = groups[index]
        left = evicted - group.live
        while left > 0 and index < newest:
            index += 1
            group = groups[index]
            left -= group.live
        return evicted, group.stamp

    def clear(self, replica: int) -> None:
        """Forget everything `replica` holds (a restart)."""
        clear = ~(1 << replica)
        holders = self.holders
        for block in self._lrus[replica].held:
            left = holders[block] & clear
            if left:
                holders[block] = left
            else:
                del holders[block]
        self._lrus[replica] = _ReplicaLru()


def oracle_hits(blocks: Sequence[Sequence[int]], capacity: int | None) -> list[int]:
    """Per request, the cached run in ONE shared LRU cache of `capacity` blocks
    (None: infinite). The sum of all replicas' capacity bounds any router."""
    caches = ReplicaCaches(1, capacity)
    admit = caches.admit
    return [admit(request, 0) for request in blocks]
