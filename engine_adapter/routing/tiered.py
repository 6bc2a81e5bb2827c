"""Cached runs by tier: where a replica holds each block of a request (GPU, CPU, disk).

An engine that offloads its KV cache holds a block in GPU memory, in host memory or
on disk (vLLM's KV events say which: their ``medium``). A block held in a slower
tier still continues a replica's cached run (the engine loads it instead of
computing it again), but saves less of the block's prefill: the time to fetch it
is not saved. `tiered_runs` gives, per replica, the run (blocks held in any tier,
from the first) and its value (each block counted as the fraction of its prefill
a hit in the fastest tier holding it there saves). The precise decision
(`policy.choose_replica`) takes the values as its runs; the work budget
(`policy.WorkShares`) keeps the int runs.

Pure and on the request path: with one tier it costs what `policy.cached_runs`
costs (it is that call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .policy import cached_runs

__all__ = ["MEDIA", "tiered_runs"]

# fastest first; vLLM's `medium` names, upper-cased
MEDIA: tuple[str, ...] = ("GPU", "CPU", "DISK")


def tiered_runs(
    holders: Sequence[Mapping[int, int]],
    blocks: Sequence[int],
    replicas: int,
    savings: Sequence[float],
) -> tuple[list[int], list[float]]:
    """Per replica: (the cached run of `blocks`: blocks held there in any tier, from the
    first; its value: each block of the run counts savings[t] of the fastest tier t
    holding it there). `holders` is per tier, fastest first, a block -> replica-bitmask
    index; `savings` per tier the fraction of a block's prefill a hit there saves.
    With one tier and savings (1.0,), the runs equal `policy.cached_runs` and the
    values too."""
    tiers = len(holders)
    if len(savings) != tiers:
        raise ValueError(
            f"tiered_runs: {len(savings)} savings for {tiers} tiers of holders; "
            "give one saving per tier, fastest first"
        )
    if tiers == 1 and type(holders[0]) is dict:  # the compiled walk takes exact dicts only
        runs = cached_runs(holders[0], blocks, replicas)
        saving = savings[0]
        return runs, ([*runs] if saving == 1.0 else [run * saving for run in runs])
    runs = [0] * replicas
    values = [0.0] * replicas
    if not tiers:
        return runs, values
    if tiers > len(MEDIA):
        return _walk(holders, blocks, replicas, savings, runs, values)
    # up to three tiers (the media): the lookups unrolled, missing tiers empty
    empty: Mapping[int, int] = {}
    gpu, cpu, disk = (*holders, empty, empty)[:3]
    get0, get1, get2 = gpu.get, cpu.get, disk.get
    savings = (*savings, 0.0, 0.0)[:3]
    # `tier_of[r]`: the fastest tier holding the current block on replica r (while r's
    # run goes on); `since[r]`: the block from which it has been that tier. The values
    # are summed per stretch of blocks with the same tier, so a block where no
    # replica's tier changes costs the lookups and a comparison only.
    alive = (1 << replicas) - 1
    tier_of = [-1] * replicas
    since = [0] * replicas
    # per tier: the alive replicas whose fastest tier it is, at the block before
    on0 = on1 = on2 = 0
    for index, block in enumerate(blocks):
        m0 = get0(block, 0) & alive
        held = m0 | (get1(block, 0) & alive)
        m1 = held & ~m0
        m2 = (get2(block, 0) & alive) & ~held
        held |= m2
        if held and m0 == on0 and m1 == on1 and m2 == on2:
            continue  # every replica's tier is that of the block before
        changed = (m0 ^ on0) | (m1 ^ on1) | (m2 ^ on2)
        on0, on1, on2 = m0, m1, m2
        while changed:
            low = changed & -changed
            changed ^= low
            replica = low.bit_length() - 1
            old = tier_of[replica]
            if old >= 0:
                values[replica] += (index - since[replica]) * savings[old]
            since[replica] = index
            if held & low:
                tier_of[replica] = 0 if m0 & low else 1 if m1 & low else 2
            else:
                # its run ends here (a replica that never held the first block has run 0)
                if old >= 0:
                    runs[replica] = index
                tier_of[replica] = -1
        alive = held
        if not alive:
            return runs, values
    length = len(blocks)
    while alive:
        low = alive & -alive
        alive ^= low
        replica = low.bit_length() - 1
        runs[replica] = length
        values[replica] += (length - since[replica]) * savings[tier_of[replica]]
    return runs, values


def _walk(
    holders: Sequence[Mapping[int, int]],
    blocks: Sequence[int],
    replicas: int,
    savings: Sequence[float],
    runs: list[int],
    values: list[float],
) -> tuple[list[int], list[float]]:
    """`tiered_runs` over any number of tiers (the same walk, the lookups in a loop)."""
    tiers = len(holders)
    alive = (1 << replicas) - 1
    getters = [tier.get for tier in holders]
    tier_of = [-1] * replicas
    since = [0] * replicas
    classes = [0] * tiers
    for index, block in enumerate(blocks):
        held = 0
        current = []
        for get in getters:
            mask = get(block, 0) & alive & ~held
            current.append(mask)
            held |= mask
        if held and current == classes:
            continue
        changed = 0
        for tier in range(tiers):
            changed |= current[tier] ^ classes[tier]
        classes = current
        while changed:
            low = changed & -changed
            changed ^= low
            replica = low.bit_length() - 1
            old = tier_of[replica]
            if old >= 0:
                values[replica] += (index - since[replica]) * savings[old]
            since[replica] = index
            if held & low:
                tier = 0
                while not current[tier] & low:
                    tier += 1
                tier_of[replica] = tier
            else:
                if old >= 0:
                    runs[replica] = index
                tier_of[replica] = -1
        alive = held
        if not alive:
            return runs, values
    length = len(blocks)
    while alive:
        low = alive & -alive
        alive ^= low
        replica = low.bit_length() - 1
        runs[replica] = length
        values[replica] += (length - since[replica]) * savings[tier_of[replica]]
    return runs, values
