"""Where cache breakpoints go: one pure planner shared by the provider renderers.

A rendered request is a flat sequence of blocks (tool definitions, system
blocks, message content blocks), each with the stability of its segment. The
planner marks:

1. every block the caller marked (counted, never moved or dropped);
2. the end of the STATIC tier, then the end of the SESSION tier (the rolling
   breakpoint on the latest turn), then the end of the VERSIONED tier, while
   slots remain (DYNAMIC blocks change every request and are never marked);
3. with a lookback window (Anthropic reads walk back at most 20 blocks), when
   the rolling breakpoint is further than the window from the last fixed
   marker: checkpoints on a grid of window-1 blocks counted from the end of
   the fixed tiers. The grid does not move as a conversation grows, so the
   previous turn's checkpoint or rolling entry is always within reach.

Tier markers whose prefix is shorter than the model's minimum are skipped
(they can never be cache entries) unless nothing longer is marked.
TTLs (Anthropic) must not increase along the request: caller TTLs are kept as
given (a caller's 1h after a caller's 5m is an error) and prefixkit's own TTLs
are raised or lowered to fit between them.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .errors import RenderError
from .segment import Stability

__all__ = ["Block", "Breakpoint", "plan_breakpoints"]

Reason = Literal["caller", "tier", "rolling", "checkpoint"]


class Block(NamedTuple):
    """One markable-or-not unit of a rendered request.

    `caller_ttl` is set when the caller's segment carries its own marker
    ("" for a marker without TTL); `prefix_tokens` counts every token up to
    and including this block (None when not counted). A tuple: a render builds
    one per block, and a tuple is the cheapest immutable record to build.
    """

    label: str
    stability: Stability
    markable: bool = True
    caller_ttl: str | None = None
    prefix_tokens: int | None = None


@dataclass(frozen=True)
class Breakpoint:
    """A marker on `blocks[index]`; `ttl` is None for providers without per-marker TTLs."""

    index: int
    ttl: str | None
    reason: Reason


def plan_breakpoints(
    blocks: Sequence[Block],
    *,
    max_markers: int,
    reserved: int = 0,
    tier_ttl: Mapping[Stability, str] | None = None,
    ttl_order: Sequence[str] = (),
    trailing_ttl: str | None = None,
    lookback: int | None = None,
    min_tokens: int | None = None,
    trailing_index: int | None = None,
    unmarked: Collection[Stability] = (),
) -> list[Breakpoint]:
    """Plan the breakpoints of one request (sorted by position).

    - `max_markers`: the provider's limit; `reserved` slots are used by a
      request-level mode (Anthropic automatic caching, OpenAI's implicit
      breakpoint) that marks `trailing_index` (default: the last block) with
      `trailing_ttl`.
    - `tier_ttl`: TTL for prefixkit's own markers on STATIC, VERSIONED and
      SESSION blocks (all three keys);
      `ttl_order` lists TTLs longest first (["1h", "5m"]). Leave both empty
      for providers without per-marker TTLs.
    - `lookback`: the provider's read lookback in blocks, if any.
    - `min_tokens`: the model's minimum cacheable prefix, if known.
    - `unmarked`: tiers whose end prefixkit leaves unmarked (STATIC or
      VERSIONED, when no TTL outlives the interval between reuses).

    Raises `RenderError` when the caller's markers alone exceed the limit or
    their TTLs increase along the request.
    """
    callers = [i for i, block in enumerate(blocks) if block.caller_ttl is not None]
    if len(callers) + reserved > max_markers:
        labels = ", ".join(blocks[i].label for i in callers)
        extra = f" plus {reserved} for the request-level cache mode" if reserved else ""
        raise RenderError(
            f"{len(callers)} caller cache markers{extra} exceed the provider limit of "
            f"{max_markers} ({labels}): remove cache_control from "
            f"{len(callers) + reserved - max_markers} segment(s)"
        )
    rank = {ttl: len(ttl_order) - position for position, ttl in enumerate(ttl_order)}
    _check_caller_order(blocks, callers, rank, trailing_ttl)
    # What decides the plan, and nothing else: a conversation's blocks differ from one
    # request to the next in text and counts, rarely in this shape.
    shape = tuple(
        [
            (block.stability, block.markable, block.caller_ttl, _long_enough(block, min_tokens))
            for block in blocks
        ]
    )
    return list(
        _plan(
            shape,
            max_markers,
            reserved,
            tuple(sorted(tier_ttl.items())) if tier_ttl else (),
            tuple(ttl_order),
            trailing_ttl,
            lookback,
            len(blocks) - 1 if trailing_index is None else trailing_index,
            frozenset(unmarked),
        )
    )


class _Shape(NamedTuple):
    """The planner's view of a block: all `plan_breakpoints` decides on."""

    stability: Stability
    markable: bool
    caller_ttl: str | None
    long_enough: bool


@functools.lru_cache(maxsize=4096)
def _plan(
    shape: tuple[tuple[Stability, bool, str | None, bool], ...],
    max_markers: int,
    reserved: int,
    tier_ttl: tuple[tuple[Stability, str], ...],
    ttl_order: tuple[str, ...],
    trailing_ttl: str | None,
    lookback: int | None,
    last: int,
    unmarked: frozenset[Stability],
) -> tuple[Breakpoint, ...]:
    """The plan for blocks of this shape (memoised: equal shapes, equal plans)."""
    blocks = [_Shape(*block) for block in shape]
    rank = {ttl: len(ttl_order) - position for position, ttl in enumerate(ttl_order)}
    tiers = dict(tier_ttl)
    if tiers:
        _check_tier_order(tiers, rank)
    callers = [i for i, block in enumerate(blocks) if block.caller_ttl is not None]
    candidates = _candidates(blocks, reserved > 0, last, lookback, unmarked)
    chosen: dict[int, Reason] = {i: "caller" for i in callers}
    free = max_markers - reserved - len(callers)
    for index, reason in candidates:
        if free == 0:
            break
        if index in chosen:
            continue
        chosen[index] = reason
        free -= 1
    plan = [
        Breakpoint(i, (blocks[i].caller_ttl or None) if reason == "caller" else None, reason)
        for i, reason in sorted(chosen.items())
    ]
    if tiers:
        plan = _assign_ttls(plan, blocks, tiers, rank, trailing_ttl)
    return tuple(plan)


def _check_caller_order(
    blocks: Sequence[Block],
    callers: Sequence[int],
    rank: Mapping[str, int],
    trailing_ttl: str | None,
) -> None:
    if not rank:
        return
    seen: list[tuple[int, str]] = []
    marked = [(i, blocks[i].caller_ttl or "") for i in callers]
    if trailing_ttl is not None:
        marked.append((len(blocks), trailing_ttl))
    for index, ttl in marked:
        where = "automatic caching" if index == len(blocks) else blocks[index].label
        if ttl and ttl not in rank:
            raise RenderError(
                f"cache ttl {ttl!r} of {where} is not one of {', '.join(rank)}", segment=where
            )
        for earlier_index, earlier_ttl in seen:
            if rank.get(ttl, 0) > rank.get(earlier_ttl, 0) and ttl and earlier_ttl:
                raise RenderError(
                    f"{where} has cache ttl {ttl} after {blocks[earlier_index].label} with "
                    f"ttl {earlier_ttl}: longer TTLs must come first; give "
                    f"{blocks[earlier_index].label} ttl {ttl} or shorten the later one",
                    segment=where,
                )
        seen.append((index, ttl))


def _check_tier_order(tier_ttl: Mapping[Stability, str], rank: Mapping[str, int]) -> None:
    previous: tuple[Stability, str] | None = None
    for tier in sorted(tier_ttl):
        ttl = tier_ttl[tier]
        if ttl not in rank:
            raise RenderError(f"ttl {ttl!r} for {tier.name} is not one of {', '.join(rank)}")
        if previous is not None and rank[ttl] > rank[previous[1]]:
            raise RenderError(
                f"ttl {ttl} for {tier.name} is longer than {previous[1]} for "
                f"{previous[0].name}: longer TTLs must come first"
            )
        previous = (tier, ttl)


def _tier_end(blocks: Sequence[_Shape], tier: Stability, upto: int) -> int | None:
    """The last markable block of `tier` at or before `upto`."""
    for index in range(min(upto, len(blocks) - 1), -1, -1):
        block = blocks[index]
        if block.stability < tier:
            return None
        if block.stability == tier and block.markable:
            return index
    return None


def _long_enough(block: Block, min_tokens: int | None) -> bool:
    return min_tokens is None or block.prefix_tokens is None or block.prefix_tokens >= min_tokens


def _candidates(
    blocks: Sequence[_Shape],
    trailing_marked: bool,
    last: int,
    lookback: int | None,
    unmarked: Collection[Stability],
) -> list[tuple[int, Reason]]:
    """prefixkit's own candidate markers, most valuable first."""
    static_end = None if Stability.STATIC in unmarked else _tier_end(blocks, Stability.STATIC, last)
    versioned_end = (
        None if Stability.VERSIONED in unmarked else _tier_end(blocks, Stability.VERSIONED, last)
    )
    rolling = None if trailing_marked else _tier_end(blocks, Stability.SESSION, last)
    fixed = [i for i in (static_end, versioned_end) if i is not None]
    priority: list[tuple[int | None, Reason]] = [
        (static_end, "tier"),
        (rolling, "rolling"),
        (versioned_end, "tier"),
    ]
    ordered: list[tuple[int, Reason]] = [
        (i, reason) for i, reason in priority if i is not None and blocks[i].long_enough
    ]
    if not ordered:
        # Nothing reaches the minimum: still mark the longest candidate (harmless, and
        # the renderer warns), so the request is ready once the prefix grows.
        longest = max(
            (i for i in (static_end, versioned_end, rolling) if i is not None), default=None
        )
        if longest is not None:
            ordered.append((longest, "rolling" if longest == rolling else "tier"))
    moving_end = last if trailing_marked else rolling
    if lookback is not None and moving_end is not None:
        anchor = max(fixed, default=-1)
        stride = max(lookback - 1, 1)
        grid = anchor + ((moving_end - 1 - anchor) // stride) * stride
        while grid > anchor and moving_end - anchor > lookback:
            block = blocks[grid]
            if block.markable and block.stability <= Stability.SESSION and block.long_enough:
                ordered.append((grid, "checkpoint"))
            grid -= stride
    return ordered


def _assign_ttls(
    plan: Sequence[Breakpoint],
    blocks: Sequence[_Shape],
    tier_ttl: Mapping[Stability, str],
    rank: Mapping[str, int],
    trailing_ttl: str | None,
) -> list[Breakpoint]:
    by_rank = {value: ttl for ttl, value in rank.items()}
    result: list[Breakpoint] = []
    for position, point in enumerate(plan):
        if point.reason == "caller":
            result.append(point)
            continue
        wanted = rank[tier_ttl[blocks[point.index].stability]]
        upper = min(
            (rank[p.ttl] for p in result if p.ttl is not None and p.ttl in rank),
            default=max(rank.values()),
        )
        later = [p.ttl for p in plan[position + 1 :] if p.reason == "caller" and p.ttl]
        if trailing_ttl is not None:
            later.append(trailing_ttl)
        lower = max((rank[t] for t in later if t in rank), default=min(rank.values()))
        result.append(
            Breakpoint(point.index, by_rank[max(lower, min(wanted, upper))], point.reason)
        )
    return result
