"""The precise router: an OpenAI-compatible async proxy that routes by what the engines cached.

    app = precise_router_app(RouterSettings(replica_urls=[...], kv_endpoints=[...], ...))
    served(app, "127.0.0.1", 18190).run()  # from prefixkit.engine_adapter.serving.keepalive

Per request to ``/v1/chat/completions`` or ``/v1/completions``:

1. token ids exactly as the engine will see them, from a replica's own
   ``/tokenize`` (same tokenizer and chat template as the engine, no drift),
   the one with the fewest requests in flight;
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
it comes back, since a restarted engine starts with an empty cache). A replica
that refuses a connection between two polls is marked the same way at once,
and nothing is lost: its ``/tokenize`` is asked of the next healthy replica,
and a request routed to it is placed again (the connection failed, so nothing
reached the engine and nothing runs twice). Other failures answer 502 with
the replica and the reason; a body the router cannot read (not a JSON
object, a prompt neither text nor token ids, a ``cache_salt`` not a string), 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from prefixkit.sdk.block_hash import DEFAULT_NONE_HASH_SEED, HashAlgo, PrefixHashMemo
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..serving.keepalive import UPSTREAM_IDLE_S
from .block_index import BlockIndex
from .kv_events import KvEventFollower
from .policy import PreciseParams, WorkShares, choose_replica
from .reuse import ReuseModel, ReuseSettings

__all__ = [
    "Placement",
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
            settings.block_size, algo=settings.hash_algo, seed=settings.hash_seed
        )
        # given each decision's record (see `_decision`) when set
        self.decision_sink: Callable[[dict[str, Any]], None] | None = None

    def hashes(self, token_ids: Sequence[int], cache_salt: str | None) -> list[int]:
        return self.hash_memo.hashes(token_ids, cache_salt)

    def route(self, hashes: Sequence[int]) -> Placement:
        """Place a request with these block hashes on a healthy replica; from now
        on it is in flight there (its blocks coming, its uncached blocks queued)
        until `finished`."""
        self.turn += 1
        if self.reuse is not None:
            self.reuse.observe(self.turn, hashes, self.shares.clock)
        return self._place(hashes, self.turn)

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
        return self._place(placement.hashes, placement.request)

    def started(self, placement: Placement) -> None:
        """Its first byte came back: its prefill is done, nothing of it is queued."""
        if placement.queued:
            placement.queued = False
            self.queued_blocks[placement.replica] -= len(placement.hashes) - placement.run

    def finished(self, placement: Placement) -> None:
        """It ended (or failed): from now on only the engine's events tell which
        of its blocks the replica holds. Once per placement; later calls do nothing."""
        if placement.ended:
            return
        placement.ended = True
        self.started(placement)
        self.inflight[placement.replica] -= 1
        self.index.finished(placement.replica, placement.hashes)

    def alive(self) -> list[int]:
        """The healthy replicas; every replica when none is (a try beats a refusal)."""
        return [r for r, ok in enumerate(self.healthy) if ok] or list(range(len(self.healthy)))

    def call_failed(self, replica: int, error: httpx.TransportError) -> None:
        """A call to `replica` failed on the way; one that refused the connection is down."""
        if isinstance(error, httpx.ConnectError):
            self.set_health(replica, False)

    def _place(self, hashes: Sequence[int], request: int) -> Placement:
        """Request number `request` (its blocks' stamp) on the best healthy replica."""
        alive = self.alive()
        runs_all = self.index.runs(hashes)
        runs = [runs_all[r] for r in alive]
        clock = self.shares.clock
        reuse = self.reuse
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
            request,
            eviction,
            None if within is None else [within[r] for r in alive],
        )
        replica = alive[pick]
        run = runs[pick]
        if self.decision_sink is not None:
            self.decision_sink(self._decision(request, length, alive, runs_all, within, replica))
        index.touch(replica, hashes, request)
        index.sent(replica, hashes)
        self.shares.record(replica, length, run)
        self.routed[replica] += 1
        self.inflight[replica] += 1
        self.queued_blocks[replica] += length - run
        return Placement(hashes, replica, run, request)

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


class _Answer(Exception):
    """The proxy answers with `response` instead of forwarding the request."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class _Relay(StreamingResponse):
    """A replica's answer passed through as it comes; `ended` runs, and the
    replica's response is closed (so it stops generating), however the relay
    ends: answered, broken off by the replica, or the client hung up, before
    or after the first chunk. (A background task would not do: Starlette skips
    it when the stream raises, and under ASGI 2.4 when the client is gone.)"""

    def __init__(
        self,
        upstream: httpx.Response,
        started: Callable[[], None],
        ended: Callable[[], None],
        headers: Mapping[str, str],
    ) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_raw():
                started()
                yield chunk

        super().__init__(
            chunks(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
            headers=headers,
        )
        self.upstream = upstream
        self.ended = ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.ended()
            with anyio.CancelScope(shield=True):
                await self.upstream.aclose()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status_code=status)


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
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            prompt = prompt[0]  # a batch goes where its first prompt is cached
        if not isinstance(prompt, str):
            raise _Answer(
                _error(400, "prompt must be a string, a list of strings or a list of token ids")
            )
        query = {"model": body.get("model"), "prompt": prompt}
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
                    timeout=settings.request_timeout_s,
                    limits=httpx.Limits(max_connections=256, keepalive_expiry=UPSTREAM_IDLE_S),
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
            if not state.healthy[replica]:
                continue
            try:
                upstream = await clients[replica].get(f"{url}/v1/models")
            except httpx.TransportError as exc:
                state.call_failed(replica, exc)
                continue
            return Response(upstream.content, upstream.status_code, media_type="application/json")
        return _error(503, "no healthy replica")

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

    async def token_ids(path: str, body: dict[str, Any]) -> list[int]:
        """The request's token ids from a replica's ``/tokenize``: the healthy
        replicas with the fewest requests in flight first (in turn among
        equals); one that refuses the connection is marked unhealthy, one that
        fails otherwise is passed over."""
        alive = state.alive()
        first = state.turn % len(alive)
        order = sorted(alive[first:] + alive[:first], key=state.inflight.__getitem__)
        failures = []
        for replica in order:
            try:
                return await _token_ids(
                    clients[replica], settings.replica_urls[replica], path, body
                )
            except httpx.HTTPStatusError as exc:
                raise _Answer(
                    Response(
                        exc.response.content,
                        exc.response.status_code,
                        media_type="application/json",
                    )
                ) from exc
            except httpx.TransportError as exc:
                failures.append(f"replica {replica}: {exc!r}")
                state.call_failed(replica, exc)
        raise _Answer(_error(502, f"no replica could tokenize the request ({'; '.join(failures)})"))

    async def proxy(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, f"request body must be a JSON object, got {type(body).__name__}")
        salt = body.get("cache_salt")
        if salt is not None and not isinstance(salt, str):
            return _error(400, f"cache_salt must be a string, got {type(salt).__name__}")
        started = time.perf_counter()
        try:
            tokens = await token_ids(request.url.path, body)
        except _Answer as answer:
            return answer.response
        tokenized = time.perf_counter()
        placement = state.route(state.hashes(tokens, salt))
        routed = time.perf_counter()
        while True:
            client = clients[placement.replica]
            upstream_request = client.build_request(
                "POST",
                settings.replica_urls[placement.replica] + request.url.path,
                content=raw,
                headers={"content-type": "application/json"},
            )
            try:
                upstream = await client.send(upstream_request, stream=True)
                break
            except httpx.ConnectError as exc:  # nothing reached the replica
                log.warning(
                    "replica %d refused a request (%s): placing it again", placement.replica, exc
                )
                again = state.unreachable(placement)
                if again is None:
                    return _error(
                        502, f"replica {placement.replica}: {exc}; no healthy replica left"
                    )
                placement = again
            except httpx.HTTPError as exc:
                state.finished(placement)
                return _error(502, f"replica {placement.replica}: {exc}")

        headers = {
            "x-prefixkit-replica": str(placement.replica),
            "server-timing": server_timing(
                {"tokenize": (tokenized - started) * 1e3, "route": (routed - tokenized) * 1e3}
            ),
        }
        return _Relay(
            upstream,
            functools.partial(state.started, placement),
            functools.partial(state.finished, placement),
            headers,
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
