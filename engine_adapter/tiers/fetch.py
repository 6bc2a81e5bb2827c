"""Fetch or recompute: what a hit in each tier saves of a block's prefill.

A block found in a lower tier is worth fetching only while fetching it is faster than
computing it again. For a block of ``block_tokens`` tokens and ``block_bytes`` bytes of
KV, on a replica that prefills ``prefill_tokens_per_s``:

* computing it takes ``block_tokens / prefill_tokens_per_s``;
* fetching it from a tier takes ``block_bytes / read_bytes_per_s`` of each link on its
  way, one after the other (vLLM's native offloading promotes a block from disk into
  host memory first, then loads it into the GPU);
* a hit saves ``1 - fetch / compute`` of the block's prefill.

Two rules decide what a lower-tier hit does:

* ``always_load``: every hit is loaded, whatever it costs. This is what vLLM's native
  offloading connector does (`OffloadingConnectorScheduler.get_num_new_matched_tokens`
  returns the longest stored prefix; only a request's own ``max_load_tokens`` caps it)
  and what LMCache's vLLM connector does (`get_num_new_matched_tokens` returns
  LMCache's hit tokens minus those already computed). A tier slower than recompute
  then costs time: its saving is negative.
* ``when_faster``: a block is fetched only if that is faster than computing it; a tier
  slower than recompute saves 0 (its hits are recomputed).

The time model is serial per request: the fetch is not overlapped with the prefill of
the request's other blocks (vLLM loads a request's blocks before scheduling its
prefill).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prefixkit.sdk import UsageError

__all__ = ["FetchRule", "Tier", "fetch_seconds", "tier_savings"]

FetchRule = Literal["always_load", "when_faster"]
FETCH_RULES: tuple[FetchRule, ...] = ("always_load", "when_faster")


def _finite_positive(value: float) -> bool:
    return 0 < value < math.inf


@dataclass(frozen=True)
class Tier:
    """One cache tier of a replica: its name (``GPU``, ``CPU``, ``DISK``), how many bytes
    of KV it holds per replica, and the read bandwidth of each link a block crosses on its
    way into GPU memory (empty for the GPU itself)."""

    name: str
    capacity_bytes: int
    read_bytes_per_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.capacity_bytes < math.inf:
            raise UsageError(
                f"tier {self.name}: capacity_bytes {self.capacity_bytes!r}: give 0 bytes or more",
                argument="capacity_bytes",
                value=self.capacity_bytes,
            )
        bad = [rate for rate in self.read_bytes_per_s if not _finite_positive(rate)]
        if bad:
            raise UsageError(
                f"tier {self.name}: read_bytes_per_s {self.read_bytes_per_s!r}: every link's "
                "read rate is a positive number of bytes per second",
                argument="read_bytes_per_s",
                value=self.read_bytes_per_s,
            )

    def capacity_blocks(self, block_bytes: float) -> int:
        """How many blocks of `block_bytes` fit."""
        return int(self.capacity_bytes // block_bytes) if block_bytes > 0 else 0


def fetch_seconds(tier: Tier, block_bytes: float) -> float:
    """Seconds to bring one block from `tier` into GPU memory (0 for the GPU)."""
    return sum(block_bytes / rate for rate in tier.read_bytes_per_s)


def tier_savings(
    tiers: Sequence[Tier],
    *,
    block_tokens: int,
    block_bytes: float,
    prefill_tokens_per_s: float,
    rule: FetchRule,
) -> tuple[float, ...]:
    """Per tier, fastest first: the fraction of a block's prefill time a hit there saves
    (1.0 on the GPU; see the module doc for the two rules)."""
    if rule not in FETCH_RULES:
        raise UsageError(
            f"unknown fetch rule {rule!r}: choose from {', '.join(FETCH_RULES)}",
            argument="rule",
            value=rule,
        )
    compute = block_tokens / prefill_tokens_per_s
    savings = []
    for tier in tiers:
        saving = 1.0 - fetch_seconds(tier, block_bytes) / compute
        savings.append(max(saving, 0.0) if rule == "when_faster" else saving)
    return tuple(savings)
