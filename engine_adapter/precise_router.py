"""The precise router: an OpenAI-compatible async proxy that routes by what the engines cached.

    app = precise_router_app(RouterSettings(replica_urls=[...], kv_endpoints=[...], ...))
    uvicorn.run(app, host="127.0.0.1", port=18190)

Per request to ``/v1/chat/completions`` or ``/v1/completions``:

1. token ids exactly as the engine will see them, from a replica's own
   ``/tokenize`` (same tokenizer and chat template as the engine, no drift);
2. block hashes with `prefixkit.sdk.block_hash` (block size, hash algorithm
   and seed of the replicas; ``cache_salt`` in the first block's extra keys);
3. each replica's cached run from the `BlockIndex` that `KvEventFollower`
   keeps from the engines' KV events, continued over the blocks of requests
   in flight to it (an engine reports a block stored only once its prefill
   computed it; until the request finishes its blocks count as coming, so a
   burst on a new prefix is not scattered), what the request would evict there
   (valued by a `ReuseModel` learned from the routed requests, when the
   replicas' capacity is known), its queued prefill (uncached blocks of the
   requests it was sent that have not produced a first byte yet), its running
   requests and the work it was given so far (`WorkShares`);
   `precise_policy.choose_replica` decides;
4. the body is forwarded unchanged and the response streamed back as it comes
   (``x-prefixkit-replica`` names the replica; ``server-timing`` gives the
   router's own time before forwarding, in ms: ``tokenize`` for step 1, the
   round trip to the replica, and ``route`` for steps 2-3).

With `RouterSettings.decision_log` set, every decision is appended to that
file as one JSON line: the request's number and blocks, whether the reuse
model is informed yet, the replica chosen and, per healthy replica, its cached
run, in-flight requests, queued prefill blocks, whether it is within the work
budget, and the blocks the request would evict there with their cost and
last-use stamp (`prefixkit serve --router precise --decision-log`).

A health loop polls every replica's ``/health``; a replica that fails it is left
out of routing and its blocks are dropped (it will be replayed from scratch when
it comes back, since a restarted engine starts with an empty cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prefixkit.sdk.block_hash import DEFAULT_NONE_HASH_SEED, HashAlgo, PrefixHashMemo
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .block_index import BlockIndex
from .kv_events import KvEventFollower
from .precise_policy import PreciseParams, WorkShares, choose_replica
from .reuse_model import ReuseModel, ReuseSettings

__all__ = [
    "RouterSettings",
    "RouterState",
    "parse_server_timing",
    "precise_router_app",
    "server_timing",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterSettings:
    """Where the replicas are and how they hash blocks."""

    replica_urls: Sequence[str]
    kv_endpoints: Sequence[str]
    kv_replay_endpoints: Sequence[str | None] = ()
    kv_topic: str = "kv"
    block_size: int = 32
    hash_algo: HashAlgo = "sha256_cbor"
    hash_seed: str = DEFAULT_NONE_HASH_SEED
    capacity_blocks: Sequence[int | None] = ()
    params: PreciseParams = field(default_factory=PreciseParams)
    health_interval_s: float = 1.0
    request_timeout_s: float = 600.0
    decision_log: Path | None = None  # one JSON line per decision, appended


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
            settings.block_size, algo=settings.hash_algo, seed=settings.hash_seed
        )
        # given each decision's record (see `_decision`) when set
        self.decision_sink: Callable[[dict[str, Any]], None] | None = None

    def hashes(self, token_ids: Sequence[int], cache_salt: str | None) -> list[int]:
        return self.hash_memo.hashes(token_ids, cache_salt)

    def route(self, hashes: Sequence[int]) -> tuple[int, int]:
        """(replica, its cached run) for a request with these block hashes."""
        alive = [r for r, ok in enumerate(self.healthy) if ok] or list(range(len(self.healthy)))
        runs_all = self.index.runs(hashes)
        runs = [runs_all[r] for r in alive]
        self.turn += 1
        request = self.turn
        clock = self.shares.clock
        reuse = self.reuse
        if reuse is not None:
            reuse.observe(request, hashes, clock)
        length = len(hashes)
        index = self.index

        def eviction(pick: int) -> tuple[float, float]:
            replica = alive[pick]
            count, stamp = index.newest_evicted(replica, runs_all[replica], length)
            return (0.0 if reuse is None else reuse.eviction_cost(count, stamp, clock)), stamp

        within = self.shares.within(runs_all, length, reuse is not None and not reuse.informed)
        pick = choose_replica(
            runs,
            [self.queued_blocks[r] for r in alive],
            [self.inflight[r] for r in alive],
            self.settings.params,
            self.turn,
            eviction,
            None if within is None else [within[r] for r in alive],
        )
        replica = alive[pick]
        if self.decision_sink is not None:
            self.decision_sink(self._decision(request, length, alive, runs_all, within, replica))
        index.touch(replica, hashes, request)
        index.sent(replica, hashes)
        self.shares.record(replica, length, runs[pick])
        self.routed[replica] += 1
        return replica, runs[pick]

    def _decision(
        self,
        request: int,
        length: int,
        alive: Sequence[int],
        runs: Sequence[int],
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
            candidates.append(
                {
                    "replica": r,
                    "run": runs[r],
                    "inflight": self.inflight[r],
                    "queued_blocks": self.queued_blocks[r],
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
            log.warning("replica %d failed its health check: dropping its blocks", replica)
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


async def _health_loop(state: RouterState, clients: Sequence[httpx.AsyncClient]) -> None:
    while True:
        for replica, url in enumerate(state.settings.replica_urls):
            try:
                response = await clients[replica].get(f"{url}/health", timeout=2.0)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            state.set_health(replica, ok)
        await asyncio.sleep(state.settings.health_interval_s)


async def _token_ids(
    client: httpx.AsyncClient, url: str, path: str, body: dict[str, Any]
) -> list[int]:
    if path.endswith("chat/completions"):
        query: dict[str, Any] = {"model": body.get("model"), "messages": body.get("messages", [])}
        for key in (
            "tools",
            "chat_template_kwargs",
            "add_generation_prompt",
            "continue_final_message",
        ):
            if key in body:
                query[key] = body[key]
    else:
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            return [int(t) for t in prompt]
        query = {
            "model": body.get("model"),
            "prompt": prompt if isinstance(prompt, str) else prompt[0],
        }
    response = await client.post(f"{url}/tokenize", json=query, timeout=30.0)
    response.raise_for_status()
    return [int(t) for t in response.json()["tokens"]]


def precise_router_app(settings: RouterSettings) -> Starlette:
    """The Starlette app; its lifespan starts the KV-event follower and the health loop."""
    state = RouterState(settings)
    # one HTTP client per replica: httpx's connection pool walks all of its
    # connections on every request, so one pool for the whole fleet costs
    # milliseconds of CPU per request under load (encode/httpcore#1035)
    clients: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with contextlib.ExitStack() as files:
            if settings.decision_log is not None:  # opened first: a bad path starts nothing
                log_file = files.enter_context(settings.decision_log.open("a", buffering=1))

                def write(record: dict[str, Any]) -> None:
                    log_file.write(json.dumps(record, allow_nan=False) + "\n")

                state.decision_sink = write
            clients[:] = [
                httpx.AsyncClient(
                    timeout=settings.request_timeout_s, limits=httpx.Limits(max_connections=256)
                )
                for _ in settings.replica_urls
            ]
            await state.follower.start()
            health = asyncio.create_task(_health_loop(state, clients))
            try:
                yield
            finally:
                state.decision_sink = None
                health.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await health
                await state.follower.stop()
                for client in clients:
                    await client.aclose()

    async def health(request: Request) -> Response:
        return JSONResponse(
            {"healthy": state.healthy}, status_code=200 if any(state.healthy) else 503
        )

    async def models(request: Request) -> Response:
        for replica, url in enumerate(settings.replica_urls):
            if state.healthy[replica]:
                upstream = await clients[replica].get(f"{url}/v1/models")
                return Response(
                    upstream.content, upstream.status_code, media_type="application/json"
                )
        return JSONResponse({"error": {"message": "no healthy replica"}}, status_code=503)

    async def router_state(request: Request) -> Response:
        replicas = range(len(settings.replica_urls))
        return JSONResponse(
            {
                "routed": state.routed,
                "inflight": state.inflight,
                "held_blocks": [state.index.held(r) for r in replicas],
                "coming_blocks": [state.index.coming_unheld(r) for r in replicas],
                "healthy": state.healthy,
            }
        )

    async def proxy(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return JSONResponse({"error": {"message": "request body is not JSON"}}, status_code=400)
        alive = [r for r, ok in enumerate(state.healthy) if ok] or [0]
        tokenizer = alive[state.turn % len(alive)]
        started = time.perf_counter()
        try:
            tokens = await _token_ids(
                clients[tokenizer], settings.replica_urls[tokenizer], request.url.path, body
            )
        except httpx.HTTPStatusError as exc:
            return Response(
                exc.response.content, exc.response.status_code, media_type="application/json"
            )
        tokenized = time.perf_counter()
        hashes = state.hashes(tokens, body.get("cache_salt"))
        replica, run = state.route(hashes)
        routed = time.perf_counter()
        uncached = float(len(hashes) - run)
        state.inflight[replica] += 1
        state.queued_blocks[replica] += uncached
        pending = {"queued": True}

        def first_byte() -> None:
            if pending["queued"]:
                pending["queued"] = False
                state.queued_blocks[replica] -= uncached

        def finished() -> None:
            first_byte()
            state.inflight[replica] -= 1
            state.index.finished(replica, hashes)

        client = clients[replica]
        upstream_request = client.build_request(
            "POST",
            settings.replica_urls[replica] + request.url.path,
            content=raw,
            headers={"content-type": "application/json"},
        )
        try:
            upstream = await client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            finished()
            return JSONResponse(
                {"error": {"message": f"replica {replica}: {exc}"}}, status_code=502
            )

        async def relay() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_raw():
                first_byte()
                yield chunk

        async def close() -> None:
            await upstream.aclose()
            finished()

        headers = {
            "x-prefixkit-replica": str(replica),
            "server-timing": server_timing(
                {"tokenize": (tokenized - started) * 1e3, "route": (routed - tokenized) * 1e3}
            ),
        }
        return StreamingResponse(
            relay(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
            headers=headers,
            background=BackgroundTask(close),
        )

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/router/state", router_state),
            Route("/v1/chat/completions", proxy, methods=["POST"]),
            Route("/v1/completions", proxy, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.router = state
    return app
