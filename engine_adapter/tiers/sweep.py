"""Replays over the sizes of one tier, and where more memory stops paying.

More of a tier pays while it saves more prefill: it raises the hit rate, or serves from
a faster tier hits a slower one served. Under LRU the gain per added byte falls as the
tier grows past the working set of the traffic. `stops_paying` finds the size from which
one doubling of the tier saves less than `min_gain` more of all prompts' prefill time
(`TieredResult.prefill_saved_share`: hits weighed by what their tier saves).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixkit.sdk import UsageError

from ..replay.replay import LoadParams
from ..replay.trace import Trace
from .simulate import TieredResult, TierSetup, simulate_tiers

__all__ = ["SweepPoint", "default_sizes", "stops_paying", "sweep_tier"]


@dataclass(frozen=True)
class SweepPoint:
    """One size of the swept tier (bytes per replica) and its replay."""

    capacity_bytes: int
    result: TieredResult


def default_sizes(size: int) -> list[int]:
    """The sizes swept around `size` bytes: none, 1/8 ... 4x."""
    return [0, *(int(size * f) for f in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0))]


def sweep_tier(
    trace: Trace,
    setup: TierSetup,
    replicas: int,
    load: LoadParams,
    tier: str,
    sizes: Sequence[int],
    *,
    policy: str = "precise",
    max_tree_blocks: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[SweepPoint]:
    """One replay per size of `tier` (bytes per replica), smallest first; a negative
    size is refused."""
    negative = [size for size in sizes if size < 0]
    if negative:
        raise UsageError(
            f"sweep sizes {negative}: a tier's size is 0 bytes or more",
            argument="sizes",
            value=list(sizes),
        )
    return [
        SweepPoint(
            size,
            simulate_tiers(
                trace,
                setup.with_capacity(tier, size),
                replicas,
                load,
                policy=policy,
                max_tree_blocks=max_tree_blocks,
                progress=progress,
            ),
        )
        for size in sorted(set(sizes))
    ]


def stops_paying(points: Sequence[SweepPoint], min_gain: float) -> int | None:
    """The size (bytes) past which the tier stops paying: the end of the last step of the
    sweep that saves at least `min_gain` more of the prefill time per doubling of the
    size (a step from 0: in all); the smallest size when no step does; None when the
    last step still does (sweep further). Of points of one size the first counts; fewer
    than two sizes compare nothing and are refused."""
    by_size: dict[int, SweepPoint] = {}
    for point in points:
        by_size.setdefault(point.capacity_bytes, point)
    ordered = [by_size[size] for size in sorted(by_size)]
    if len(ordered) < 2:
        raise UsageError(
            f"a sweep of {len(ordered)} size{'' if len(ordered) == 1 else 's'} compares "
            "nothing: give points of two sizes or more",
            argument="points",
        )
    knee = ordered[0].capacity_bytes
    for smaller, larger in itertools.pairwise(ordered):
        gain = larger.result.prefill_saved_share - smaller.result.prefill_saved_share
        if smaller.capacity_bytes > 0:
            gain /= math.log2(larger.capacity_bytes / smaller.capacity_bytes)
        if gain >= min_gain:
            knee = larger.capacity_bytes
    return None if knee == ordered[-1].capacity_bytes else knee
