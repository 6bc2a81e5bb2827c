"""prefixkit's precise routing policy as a Ray Serve request router.

`PrefixkitRouter` runs where Ray Serve routes requests to the vLLM replicas (the OpenAI
ingress's handle). Per request it computes the prompt tokens the engine computes
(`PromptTokenizer` on the model folder the replicas load: chat template, tools and
template kwargs included; a request it cannot reproduce is placed by load and counted in
`RouterState.tokenize_fallbacks`), hashes the blocks with the engines' own
block hash under the request's ``cache_salt`` (`RouterState.hashes`, as the vLLM installed
beside it computes it: the version the engine's interpreter has), and asks
`RouterState.route`, i.e. `policy.choose_replica`, the decision the local router and the
replay make, for the replica, each replica's cached run weighed by the tier holding its
blocks (``savings``: per tier of `routing.tiered.MEDIA`, all 1.0 by default: tier-blind).
The block index is fed by each replica's KV events (the state's `KvEventFollower`,
following a slot's endpoint once its replica publishes it; first the batches in the
replica's replay buffer, published before the router subscribed), found in the
replicas' routing stats (`server.KV_EVENTS_STAT`, `server.KV_REPLAY_STAT`). A request
that ended stays coming to its replica until the index holds its blocks there (at
most a grace after its end), as on the local backend.

Replicas come and go (Ray restarts a dead one under a new id, autoscaling adds and
removes them): each running replica holds a slot of the state; a replica that leaves
frees its slot and its blocks are dropped, and only running replicas are candidates, so
nothing is sent to a replica while it is down. A request in flight ends with
`on_request_completed`. A request whose body carries ``prefixkit_replica: I``
(`serving.gateway.PIN_FIELD`) goes to the I-th running replica in replica-id order (warm-up),
and waits (Serve backs off and asks again) while fewer than I + 1 replicas run.

Each decision is counted as on the local backend (`serving.metrics.RouterCounters`: by
prefix, by load, pinned, or replaced when Serve asks again for a request it placed), in
the application's counts actor (`counters.ActorCounters`), which the gateway's
``/metrics`` shows.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..routing.router_state import Placement, RouterSettings, RouterState
from ..routing.tiered import MEDIA
from ..serving.gateway import PIN_FIELD
from ..serving.metrics import RouterCounters
from .counters import ActorCounters
from .server import KV_EVENTS_STAT, KV_REPLAY_STAT, KV_TOPIC

# `PrefixkitRouter` too, made on first use (module `__getattr__`): it subclasses Ray's
# `RequestRouter`, so this module imports without Ray (as in prefixkit's own environment)
__all__ = ["request_body"]

log = logging.getLogger(__name__)


def request_body(request: Any) -> tuple[str, dict[str, Any]]:
    """(OpenAI path, JSON body as the client sent it) of the request object Ray Serve's
    OpenAI ingress passes on (vLLM's pydantic request: only the fields the client set)."""
    body = request.model_dump(exclude_unset=True) if hasattr(request, "model_dump") else {}
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    return path, body


def __getattr__(name: str) -> Any:
    if name == "PrefixkitRouter":
        return _prefixkit_router()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _prefixkit_router() -> type[Any]:
    from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

    from ..routing.prompt_tokens import Cannot, PromptTokenizer, PromptTokens

    class PrefixkitRouter(RequestRouter):  # type: ignore[misc]
        """Routes by prefixkit's precise policy (module docstring)."""

        def initialize_state(
            self,
            model_dir: str = "",
            block_size: int = 32,
            hash_algo: str = "sha256_cbor",
            hash_seed: str | None = None,
            slots: int = 2,
            capacity_blocks: int | None = None,
            savings: Sequence[float] | None = None,
            **_: Any,
        ) -> None:
            from importlib.metadata import version

            from prefixkit.sdk import DEFAULT_NONE_HASH_SEED, vllm_version_of

            self._model_dir = Path(model_dir)
            self._slots: list[ReplicaID | None] = [None] * slots
            self._state = RouterState(
                RouterSettings(
                    replica_urls=[""] * slots,
                    kv_endpoints=[None] * slots,
                    kv_topic=KV_TOPIC,
                    block_size=block_size,
                    hash_algo=hash_algo,  # type: ignore[arg-type]
                    hash_seed=hash_seed or DEFAULT_NONE_HASH_SEED,
                    vllm=vllm_version_of(
                        version("vllm")
                    ),  # the engine beside it, in its interpreter
                    capacity_blocks=[capacity_blocks] * slots if capacity_blocks else (),
                    savings=(1.0,) * len(MEDIA) if savings is None else tuple(savings),
                )
            )
            self._followed: set[int] = set()  # slots whose KV events the state follows
            self._placements: dict[str, Placement] = {}
            self._prompt_tokens: PromptTokenizer | Cannot | None = None  # loaded on first use
            self._counts = RouterCounters(ActorCounters.for_application())

        def _tokens(self, request: Any) -> PromptTokens | Cannot:
            """The request's prompt tokens as the engine computes them (`PromptTokenizer`
            on the model folder the replicas load), or why not: it is then placed by load,
            and counted."""
            if self._prompt_tokens is None:
                self._prompt_tokens = PromptTokenizer.load(self._model_dir)
                if isinstance(self._prompt_tokens, Cannot):
                    log.warning(
                        "the router cannot compute prompt tokens (%s): it places every "
                        "request by load",
                        self._prompt_tokens.reason,
                    )
            if isinstance(self._prompt_tokens, Cannot):
                return self._prompt_tokens
            return self._prompt_tokens.tokens(*request_body(request))

        async def _sync_slots(self) -> dict[ReplicaID, int]:
            """Give each running replica a slot (freeing the slots of those gone) and follow
            the KV events of those that published their endpoint; replica id -> slot."""
            running = self.curr_replicas
            state = self._state
            for slot, replica_id in enumerate(self._slots):
                if replica_id is not None and replica_id not in running:
                    await self._release(slot)
            for replica_id in sorted(running, key=lambda r: r.unique_id):
                if replica_id in self._slots:
                    continue
                if None not in self._slots:
                    log.warning("more replicas than the router's %d slots", len(self._slots))
                    break
                slot = self._slots.index(None)
                self._slots[slot] = replica_id
                state.inflight[slot] = 0
                state.queued_blocks[slot] = 0.0
            for slot, replica_id in enumerate(self._slots):
                if replica_id is None or slot in self._followed:
                    continue
                stats = running[replica_id].routing_stats or {}
                endpoint = stats.get(KV_EVENTS_STAT)
                if endpoint:
                    state.follower.follow(slot, endpoint, stats.get(KV_REPLAY_STAT))
                    self._followed.add(slot)
                    log.info("following KV events of replica %s at %s", replica_id, endpoint)
            return {r: s for s, r in enumerate(self._slots) if r is not None}

        async def _release(self, slot: int) -> None:
            self._slots[slot] = None
            if slot in self._followed:
                self._followed.discard(slot)
                await self._state.follower.unfollow(slot)
            self._state.follower.forget(slot)
            for placement in self._placements.values():
                if placement.replica == slot:
                    placement.ended = True
            self._state.inflight[slot] = 0
            self._state.queued_blocks[slot] = 0.0

        async def choose_replicas(
            self,
            candidate_replicas: list[RunningReplica],
            pending_request: PendingRequest | None = None,
        ) -> Sequence[list[RunningReplica]]:
            if not candidate_replicas:
                return []
            if pending_request is None or not pending_request.args:
                return [candidate_replicas]
            slot_of = await self._sync_slots()
            by_slot = {
                slot_of[r.replica_id]: r for r in candidate_replicas if r.replica_id in slot_of
            }
            if not by_slot:
                return [candidate_replicas]
            request = pending_request.args[0]
            pin = getattr(request, PIN_FIELD, None)
            if isinstance(pin, int):
                ordered = sorted(candidate_replicas, key=lambda r: r.replica_id.unique_id)
                if not 0 <= pin < len(ordered):
                    # the pinned replica is not running (yet: a replacement still starting):
                    # Serve asks again after a backoff rather than warming another replica
                    pending_request.routing_context.should_backoff = True
                    return []
                self._counts.decided("pinned")
                return [[ordered[pin]]]
            state = self._state
            tokens = self._tokens(request)
            if isinstance(tokens, Cannot):  # the engine answers it: placed by load alone
                state.tokenize_fallbacks += 1
                log.debug("placing a request by load: %s", tokens.reason)
                self._counts.decided("load")
                self._counts.tokenized(state.tokenized_here, state.tokenize_fallbacks)
                return [candidate_replicas]
            state.tokenized_here += 1
            request_id = pending_request.metadata.internal_request_id
            earlier = self._placements.pop(request_id, None)
            if earlier is not None:  # tried again: its earlier placement did not happen
                state.finished(earlier)
            for slot in range(len(self._slots)):
                state.healthy[slot] = slot in by_slot
            hashes = state.hashes(tokens.token_ids, tokens.cache_salt)
            placement = state.route(hashes)
            self._placements[request_id] = placement
            outcome = "prefix" if placement.run > 0 else "load"
            self._counts.decided("replaced" if earlier is not None else outcome)
            self._counts.tokenized(state.tokenized_here, state.tokenize_fallbacks)
            # the chosen replica alone: were it full, or slow to tell its queue length, Serve
            # asks again (after a backoff) rather than sending the request elsewhere
            return [[by_slot[placement.replica]]]

        def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
            placement = self._placements.pop(internal_request_id, None)
            if placement is not None:
                self._state.finished(placement)

    PrefixkitRouter.__module__ = __name__
    PrefixkitRouter.__qualname__ = "PrefixkitRouter"
    return PrefixkitRouter
