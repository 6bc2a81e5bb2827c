"""Replay a trace through GPU -> CPU -> disk tiers on every replica.

Each replica has one LRU of blocks per tier, as vLLM's native offloading keeps them:

* the GPU tier is the replay's own prefix cache (`replay.cache_sim.ReplicaCaches`: a
  prompt's tail leaves before its head), so with the lower tiers at 0 this replay gives
  the single-tier replay's numbers;
* every block a request computes or loads is stored in every lower tier as it is
  computed, not when the GPU evicts it (vLLM's `OffloadingConnectorScheduler` stores
  each computed chunk, and its tiering manager cascades every store to all secondary
  tiers); a tier's LRU order is refreshed per request, tail first, as vLLM's LRU policy
  does at a request's end, so a prompt's tail leaves before its head in every tier;
* a hit in a lower tier is promoted: the block is in the GPU (and in every tier) after
  the request;
* a request's cached run on its replica is its blocks held there in any tier, from the
  first; each block counts in the fastest tier holding it.

Blocks of different salts are never shared: give each request's salt (or tenant) and
equal block ids under different salts become different blocks.

What a hit saves follows the fetch rule (`fetch`): under ``always_load`` every lower-tier
hit is loaded (what vLLM and LMCache do), under ``when_faster`` a block is loaded only if
that beats computing it. The estimated time to first token of a request is its wait for
the replica's prefill queue (one FIFO queue per replica; the fetch runs while it waits),
then the prefill of its blocks that were not loaded: ``max(arrival + fetch, queue free)
+ uncached tokens / prefill_tokens_per_s - arrival``. Decode is not modelled.
"""

from __future__ import annotations

import gzip
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prefixkit.sdk import UsageError

from ..replay.cache_sim import ReplicaCaches
from ..replay.policies import Precise, make_policy
from ..replay.replay import LoadParams
from ..replay.replica_load import ReplicaLoad
from ..replay.trace import Trace
from ..routing.policy import PreciseParams, cached_runs
from ..routing.tiered import tiered_runs
from .fetch import FETCH_RULES, FetchRule, Tier, fetch_seconds, tier_savings

__all__ = [
    "TIERED_POLICY_NAMES",
    "TierSetup",
    "TieredResult",
    "read_salts",
    "salted",
    "simulate_tiers",
]

# the replay's policies, and the precise decision weighing each block by its tier
TIERED_POLICY_NAMES = ("round_robin", "consistent_hash", "smg_like", "precise", "precise_tiered")

Progress = Callable[[int], None]


@dataclass(frozen=True)
class TierSetup:
    """The tiers of one replica, fastest first (the GPU first), and what the tier model
    needs to time them: KV bytes per token, the prefill rate, the fetch rule."""

    tiers: tuple[Tier, ...]
    bytes_per_token: float
    prefill_tokens_per_s: float
    rule: FetchRule = "always_load"

    def __post_init__(self) -> None:
        if not self.tiers or self.tiers[0].read_bytes_per_s:
            raise UsageError(
                "the first tier is the GPU: give it and no read links", argument="tiers"
            )
        for name in ("bytes_per_token", "prefill_tokens_per_s"):
            value = getattr(self, name)
            if not 0 < value < math.inf:
                raise UsageError(
                    f"{name} {value!r}: give a positive number", argument=name, value=value
                )
        if self.rule not in FETCH_RULES:
            raise UsageError(
                f"unknown fetch rule {self.rule!r}: choose from {', '.join(FETCH_RULES)}",
                argument="rule",
                value=self.rule,
            )
        per_byte = [sum(1 / rate for rate in t.read_bytes_per_s) for t in self.tiers]
        for faster, slower, a, b in zip(
            self.tiers, self.tiers[1:], per_byte, per_byte[1:], strict=False
        ):
            if b < a:
                raise UsageError(
                    f"tier {slower.name} is read faster than tier {faster.name} above it: "
                    "give the tiers fastest first (GPU, CPU, DISK)",
                    argument="tiers",
                    value=slower.name,
                )

    def savings(self, block_tokens: int) -> tuple[float, ...]:
        """Per tier, the fraction of a block's prefill a hit there saves."""
        return tier_savings(
            self.tiers,
            block_tokens=block_tokens,
            block_bytes=block_tokens * self.bytes_per_token,
            prefill_tokens_per_s=self.prefill_tokens_per_s,
            rule=self.rule,
        )

    def capacities(self, block_tokens: int) -> tuple[int, ...]:
        """Per tier, how many blocks of `block_tokens` tokens it holds per replica."""
        return tuple(t.capacity_blocks(block_tokens * self.bytes_per_token) for t in self.tiers)

    def with_capacity(self, name: str, capacity_bytes: int) -> TierSetup:
        """The same setup with tier `name` resized."""
        if all(t.name != name for t in self.tiers):
            raise ValueError(f"no tier {name!r}: the tiers are {[t.name for t in self.tiers]}")
        tiers = tuple(
            Tier(t.name, capacity_bytes, t.read_bytes_per_s) if t.name == name else t
            for t in self.tiers
        )
        return TierSetup(tiers, self.bytes_per_token, self.prefill_tokens_per_s, self.rule)


@dataclass
class TieredResult:
    """One replay through the tiers. Token counts are prompt tokens; `hit_tokens` per tier
    (fastest first) counts those served from that tier, `declined_tokens` those found in
    a tier slower than recompute and computed again (``when_faster`` only)."""

    policy: str
    rule: FetchRule
    tier_names: tuple[str, ...]
    capacity_blocks: tuple[int, ...]
    savings: tuple[float, ...]
    prompt_tokens: int
    hit_tokens: tuple[int, ...]
    declined_tokens: int
    prefill_seconds_saved: float
    prefill_seconds: float  # of every prompt token, with no cache
    ttft_s: list[float] = field(repr=False)
    assignments: list[int] = field(repr=False)
    requests_per_s: float = 0.0

    @property
    def hit_rates(self) -> tuple[float, ...]:
        """Per tier, the share of prompt tokens served from it."""
        total = self.prompt_tokens
        return tuple(h / total if total else 0.0 for h in self.hit_tokens)

    @property
    def hit_rate(self) -> float:
        return sum(self.hit_rates)

    @property
    def prefill_saved_share(self) -> float:
        """The share of all prompts' prefill time the hits save, net of the fetches."""
        return self.prefill_seconds_saved / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def prefill_tokens_saved(self) -> int:
        """Prompt tokens not prefilled (served from any tier)."""
        return sum(self.hit_tokens)

    def ttft_quantile(self, q: float) -> float:
        """The `q` quantile of the estimated time to first token (s; nearest rank)."""
        ordered = sorted(self.ttft_s)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def as_json(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "rule": self.rule,
            "tiers": {
                name: {
                    "capacity_blocks": blocks,
                    "saving": round(saving, 4),
                    "hit_rate": round(rate, 4),
                }
                for name, blocks, saving, rate in zip(
                    self.tier_names, self.capacity_blocks, self.savings, self.hit_rates, strict=True
                )
            },
            "hit_rate": round(self.hit_rate, 4),
            "prefill_tokens_saved": self.prefill_tokens_saved,
            "declined_tokens": self.declined_tokens,
            "prefill_seconds_saved": round(self.prefill_seconds_saved, 3),
            "prefill_saved_share": round(self.prefill_saved_share, 4),
            "ttft_p50_s": round(self.ttft_quantile(0.5), 4),
            "ttft_p90_s": round(self.ttft_quantile(0.9), 4),
        }


def salted(trace: Trace, salts: Sequence[str | None]) -> Trace:
    """`trace` with its block ids made distinct per salt: requests of different salts
    share no block; requests without a salt (None) share among themselves."""
    if len(salts) != len(trace):
        raise ValueError(f"{len(salts)} salts for {len(trace)} requests")
    ids: dict[tuple[str | None, int], int] = {}
    blocks = [
        [ids.setdefault((salt, block), len(ids)) for block in request]
        for salt, request in zip(salts, trace.blocks, strict=True)
    ]
    return Trace(
        trace.block_size,
        list(trace.timestamps_ms),
        list(trace.input_lengths),
        list(trace.output_lengths),
        blocks,
    )


SALT_FIELDS = ("cache_salt", "tenant")


def read_salts(path: str | Path, limit: int | None = None) -> list[str | None] | None:
    """Each request's salt in a trace file: its ``cache_salt``, else its ``tenant``
    (None when it has neither); None when no request has one. Read as `load_trace`
    reads the file (gzip if it ends in ``.gz``, blank lines skipped); call it after
    `load_trace`, which reports a file it cannot read."""
    path = Path(path)
    salts: list[str | None] = []
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(encoding="utf-8")
    ) as handle:
        for line in handle:
            if limit is not None and len(salts) >= limit:
                break
            if not line.strip():
                continue
            record = json.loads(line)
            salt = next((record[f] for f in SALT_FIELDS if record.get(f) is not None), None)
            salts.append(None if salt is None else str(salt))
    return salts if any(s is not None for s in salts) else None


class _LowerTier:
    """One lower tier on every replica: an LRU of blocks per replica, and which
    replicas hold each block (bitmask)."""

    __slots__ = ("capacity", "holders", "lrus")

    def __init__(self, replicas: int, capacity: int) -> None:
        self.capacity = capacity
        self.holders: dict[int, int] = {}
        self.lrus: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(replicas)]

    def store(self, blocks: Sequence[int], replica: int) -> None:
        """Store (or refresh) a request's blocks on `replica`, its tail least recent,
        then evict past the capacity."""
        lru = self.lrus[replica]
        holders = self.holders
        bit = 1 << replica
        for block in reversed(blocks):
            if block in lru:
                lru.move_to_end(block)
            else:
                lru[block] = None
                holders[block] = holders.get(block, 0) | bit
        clear = ~bit
        while len(lru) > self.capacity:
            block, _ = lru.popitem(last=False)
            left = holders[block] & clear
            if left:
                holders[block] = left
            else:
                del holders[block]


class _TieredPrecise(Precise):
    """The replay's precise policy (`replay.policies.Precise`) over every tier: a replica's
    cached run counts its blocks in any tier, each valued at its tier's saving
    (`routing.tiered.tiered_runs`). Savings all 1.0 is the tier-blind router, which
    treats an offloaded block like one in GPU memory."""

    def __init__(
        self,
        replicas: int,
        caches: ReplicaCaches,
        lower: Sequence[_LowerTier],
        load: ReplicaLoad,
        savings: Sequence[float],
        params: PreciseParams | None = None,
    ) -> None:
        super().__init__(replicas, caches, load, params)
        self.lower = lower
        self.savings = tuple(savings)

    def _runs_and_values(self, blocks: Sequence[int]) -> tuple[list[int], list[float]]:
        holders = [self.caches.holders] + [tier.holders for tier in self.lower]
        return tiered_runs(holders, blocks, self.replicas, self.savings)

    def _gpu_runs(self, blocks: Sequence[int], runs: list[int]) -> list[int]:
        # the GPU takes every block of the request not already there
        return cached_runs(self.caches.holders, blocks, self.replicas) if self.lower else runs


def simulate_tiers(
    trace: Trace,
    setup: TierSetup,
    replicas: int,
    load: LoadParams,
    *,
    policy: str = "precise",
    max_tree_blocks: int | None = None,
    precise: PreciseParams | None = None,
    router_setup: TierSetup | None = None,
    progress: Progress | None = None,
) -> TieredResult:
    """Replay `trace` on `replicas` replicas with `setup`'s tiers under `policy` (one of
    `TIERED_POLICY_NAMES`); see the module doc. `router_setup`: the tiers as the
    ``precise_tiered`` router believes them (e.g. with misestimated bandwidths; default
    `setup`), which weighs blocks by that setup's savings while hits are timed by
    `setup`'s."""
    if policy not in TIERED_POLICY_NAMES:
        raise ValueError(f"unknown policy {policy!r}: choose from {', '.join(TIERED_POLICY_NAMES)}")
    block_size = trace.block_size
    capacities = setup.capacities(block_size)
    if capacities[0] < 1:
        raise ValueError(
            f"the GPU tier holds no block of {block_size} tokens "
            f"({setup.tiers[0].capacity_bytes} bytes at {setup.bytes_per_token:g} bytes per "
            "token): give it at least one block"
        )
    savings = setup.savings(block_size)
    per_token_s = 1.0 / setup.prefill_tokens_per_s
    block_bytes = block_size * setup.bytes_per_token
    # per tier, seconds to fetch one token's KV; a tier is loaded from when it saves
    fetch_per_token = [fetch_seconds(t, block_bytes) / block_size for t in setup.tiers]
    loaded = [setup.rule == "always_load" or s > 0.0 for s in savings]
    caches = ReplicaCaches(replicas, capacities[0])
    lower = [_LowerTier(replicas, c) for c in capacities[1:] if c > 0]
    lower_index = [i for i, c in enumerate(capacities) if i and c > 0]  # tier of each
    model = ReplicaLoad(replicas, load.prefill_s_per_block, load.decode_s_per_token)
    if policy in ("precise", "precise_tiered"):
        blind = tuple(1.0 for _ in range(1 + len(lower)))
        believed = savings if router_setup is None else router_setup.savings(block_size)
        valued = (believed[0], *(believed[i] for i in lower_index))
        chooser = _TieredPrecise(
            replicas, caches, lower, model, blind if policy == "precise" else valued, precise
        ).choose
    else:
        chooser = make_policy(
            policy, replicas, caches, model, max_tree_blocks=max_tree_blocks, precise=precise
        ).choose
    tiers = len(setup.tiers)
    hit_tokens = [0] * tiers
    declined = 0
    saved_s = 0.0
    ttft: list[float] = []
    assignments: list[int] = []
    queue_free = [0.0] * replicas
    scale = 1000.0 * load.time_scale
    inputs = trace.input_lengths
    outputs = trace.output_lengths
    admit = caches.admit
    advance = model.advance
    dispatch = model.dispatch
    gpu_holders = caches.holders
    lower_gets = [(t.holders.get, i) for t, i in zip(lower, lower_index, strict=True)]
    started = time.perf_counter()
    for index, (stamp, blocks) in enumerate(zip(trace.timestamps_ms, trace.blocks, strict=True)):
        now = stamp / scale
        advance(now)
        length = inputs[index]
        replica = chooser(blocks, now, length // block_size)
        bit = 1 << replica
        # the fastest tier holding each block of the run on `replica`
        served = 0  # tokens loaded or hit
        served_blocks = 0
        fetch_s = 0.0
        start = 0
        for block in blocks:
            tokens = min(block_size, length - start)
            start += block_size
            tier = 0 if gpu_holders.get(block, 0) & bit else -1
            if tier < 0:
                for get, lower_index_of in lower_gets:
                    if get(block, 0) & bit:
                        tier = lower_index_of
                        break
                if tier < 0:
                    break  # the run ends: no tier holds this block here
            if not loaded[tier]:
                declined += max(tokens, 0)
                continue
            served_blocks += 1
            if tokens > 0:
                hit_tokens[tier] += tokens
                served += tokens
                fetch_s += tokens * fetch_per_token[tier]
                saved_s += tokens * per_token_s * savings[tier]
        admit(blocks, replica, index)
        for lower_tier in lower:
            lower_tier.store(blocks, replica)
        ready = max(now + fetch_s, queue_free[replica])
        end = ready + max(length - served, 0) * per_token_s
        queue_free[replica] = end
        ttft.append(end - now)
        # the routing policies' load model: the blocks this request prefills
        dispatch(replica, now, len(blocks) - served_blocks, outputs[index])
        assignments.append(replica)
        if progress is not None and index % 1000 == 999:
            progress(1000)
    elapsed = time.perf_counter() - started
    if progress is not None:
        progress(len(trace) % 1000)
    return TieredResult(
        policy=policy,
        rule=setup.rule,
        tier_names=tuple(t.name for t in setup.tiers),
        capacity_blocks=capacities,
        savings=savings,
        prompt_tokens=trace.total_input_tokens,
        hit_tokens=tuple(hit_tokens),
        declined_tokens=declined,
        prefill_seconds_saved=saved_s,
        prefill_seconds=trace.total_input_tokens * per_token_s,
        ttft_s=ttft,
        assignments=assignments,
        requests_per_s=len(trace) / elapsed if elapsed > 0 else float("inf"),
    )
