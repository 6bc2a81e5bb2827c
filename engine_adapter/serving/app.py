"""The serving app: one ASGI app in front of the replicas. Every request passes the gateway
(`gateway.admit`, the one choke point), then a routing stage, then the relay.

    app = serving_app(PreciseRoute(RouterState(settings)), Tenants.load(path))
    served(app, "127.0.0.1", 8000).run()        # from prefixkit.engine_adapter.serving.keepalive

What the app does with an admitted request:

* ``GET /health``: the routing stage's answer from its last poll of the upstreams (200
  while one is healthy), in microseconds however busy they are; no key needed.
* ``GET /metrics``: a tenant's own numbers (`tenant_usage`); for an operator (or without
  tenants) every replica's Prometheus metrics in one exposition, each sample labelled
  with its ``replica`` (`merge_replica_metrics`), every tenant's numbers, the routing
  stage's decisions and tokenizations, and whether each replica answered (`metrics`).
  A streamed Chat Completions or Completions request is forwarded asking for the usage
  chunk, so that it counts; a client that did not ask for that chunk does not get it.
* ``GET /router/state`` (operators): the precise router's routed counts, requests in
  flight, held and coming blocks, health, and how many generation requests it
  tokenized itself or asked a replica to (404 without that router).
* a generation route (salted): the body admitted (`bodies`), placed by the routing stage,
  relayed and streamed back as it is generated;
* any other forwarded route: relayed to a replica (or SMG) the routing stage chooses.

Bounds (`limits.Limits`): a body is read whole within ``body_timeout_s`` and at most
``max_body_bytes``; a tenant has at most ``max_inflight_per_tenant`` requests in flight.
A client that hangs up, before or after the answer starts, streaming or not, cancels its
request: the connection to the engine is closed, and vLLM aborts a request whose client
is gone. Errors the app answers itself are in OpenAI's error shape, a failure of its
own (a 500) too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import httpx
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from ..engine.metrics import merge_replica_metrics
from .bodies import AdmittedBody, BodyWorkers
from .gateway import Admitted, admit_scope, body_admission
from .http_server import DIRECT_BODY
from .limits import Limits, TenantSlots, read_body
from .metrics import RouterCounters, replica_up
from .refused import Refused
from .relay import Upstreams, forwarded_headers, openai_error
from .router import Routing, Target
from .routes import RouteUse
from .tenant_usage import (
    PROMETHEUS_TEXT,
    TenantUsage,
    Usage,
    UsageChunkLeftOut,
    asking_stream_usage,
    usage_of,
)
from .tenants import Tenants
from .upstream import UpstreamPools, relay_answer

__all__ = ["ServingApp", "serving_app"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# the collector's thresholds while the app serves: a young collection after 20,000 new
# objects, not 700. With many requests in flight, a request's parsed body and its
# bookkeeping outlive a collection every few hundred objects and are promoted, to be
# scanned again in the older generations; at 20,000 most of them are gone by the next
# collection.
SERVING_GC_THRESHOLDS = (20_000, 20, 20)


def serving_app(
    routing: Routing, tenants: Tenants | None = None, limits: Limits | None = None
) -> ServingApp:
    """The ASGI app (see the module docstring); its lifespan starts the routing stage."""
    return ServingApp(routing, tenants, limits or Limits())


class ServingApp:
    """The serving app as an ASGI callable (module docstring)."""

    def __init__(self, routing: Routing, tenants: Tenants | None, limits: Limits) -> None:
        self.routing = routing
        self.tenants = tenants
        self.limits = limits
        self.usage = TenantUsage()
        self.router_counts = RouterCounters(self.usage.counters)
        self.slots = TenantSlots(limits.max_inflight_per_tenant)
        timeouts = {
            "connect_timeout": limits.upstream_connect_timeout_s,
            "read_timeout": limits.upstream_read_timeout_s,
        }
        self.upstreams = Upstreams(**timeouts)  # metrics, /tokenize
        self.pools = UpstreamPools(**timeouts)  # the requests relayed
        # health polls: connections of their own, never waiting behind relayed requests
        self.polls = UpstreamPools(connect_timeout=limits.upstream_connect_timeout_s)
        self.bodies = BodyWorkers(limits.body_workers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            started = False

            async def tracked(message: Message) -> None:
                nonlocal started
                started = started or message["type"] == "http.response.start"
                await send(message)

            try:
                await self._http(scope, receive, tracked)
            except Exception:
                if started:
                    raise  # the answer is under way: the client sees it broken off
                log.exception("the serving app failed on %s %s", scope["method"], scope["path"])
                await openai_error(500, "the gateway failed on this request", "server_error")(
                    scope, receive, send
                )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        try:
            async with anyio.create_task_group():
                pass  # anyio imports its asyncio backend on first use: here, not on a request
            await self.routing.start(self.upstreams, self.polls)
            # what startup made (modules, the tokenizer, the template) lives as long as the
            # app: out of the collector's sight, a full collection scans only what requests
            # made, not hundreds of thousands of objects
            gc.collect()
            gc.freeze()
            thresholds = gc.get_threshold()
            gc.set_threshold(*SERVING_GC_THRESHOLDS)
        except Exception as error:
            await send({"type": "lifespan.startup.failed", "message": repr(error)})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await self.routing.stop()
            self.pools.close()
            self.polls.close()
            await self.upstreams.aclose()
            await asyncio.to_thread(self.bodies.close)
        finally:
            gc.unfreeze()  # the process may go on (an app deployed from Python, a test)
            gc.set_threshold(*thresholds)
            await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers, decision = admit_scope(scope, self.tenants)
        if isinstance(decision, Refused):
            await decision.response()(scope, receive, send)
            return
        if decision.use is RouteUse.GATEWAY:
            await (await self._answer(decision))(scope, receive, send)
            return
        with self.slots.slot(decision.limited_tenant) as full:
            if full is not None:
                await full.response()(scope, receive, send)
                return
            await self._forward(decision, headers, scope, receive, send)

    async def _forward(
        self, decision: Admitted, headers: Headers, scope: Scope, receive: Receive, send: Send
    ) -> None:
        try:
            raw = await read_body(receive, headers, self.limits)
            admitted = await self._admitted(decision, headers, raw)
        except Refused as refused:
            await refused.response()(scope, receive, send)
            return
        counted = (
            decision.caller is not None
            and decision.use is RouteUse.SALTED
            and decision.tenant is not None
        )
        # the engine is asked for the usage chunk the client did not ask for
        asked = (
            asking_stream_usage(decision.path, admitted.body, admitted.view) if counted else None
        )
        if asked is not None:
            admitted = AdmittedBody(asked, admitted.view)
        usage_left_out = asked is not None
        answer = await until_disconnected(
            receive,
            lambda: self._relay(decision, headers, admitted, scope, send, usage_left_out),
        )
        if counted and decision.tenant is not None:
            self.usage.record(decision.tenant, answer)

    async def _admitted(self, decision: Admitted, headers: Headers, raw: bytes) -> AdmittedBody:
        """The body to forward and the routing stage's view of it."""
        if decision.method == "GET" or decision.method == "HEAD":
            return AdmittedBody(b"", {})
        parsed = decision.use in (RouteUse.SALTED, RouteUse.READ_ONLY)
        if not parsed:
            return AdmittedBody(raw, {})
        return await self.bodies.admit(
            raw, **body_admission(decision, headers, self.limits.max_json_depth)
        )

    async def _relay(
        self,
        decision: Admitted,
        headers: Headers,
        admitted: AdmittedBody,
        scope: Scope,
        send: Send,
        usage_left_out: bool,
    ) -> Usage | None:
        """Place the request, send it, stream the answer back (`usage_left_out`: without
        the usage chunk the gateway asked for); its usage, if it said."""
        try:
            if decision.use is RouteUse.SALTED:
                target = await self.routing.place(decision.path, admitted.view, decision.pin)
                self._count_decision(decision, target)
            else:
                target = self.routing.utility(decision.path, decision.pin)
        except Refused as refused:
            await _send_response(refused.response(), scope, send)
            return None
        gated = decision.gated
        query = b"" if gated else scope.get("query_string", b"")
        path = decision.path + "?" + query.decode("latin-1") if query else decision.path
        forwarded = forwarded_headers(headers.items(), gated=gated)
        try:
            while True:
                try:
                    upstream = await self.pools.send(
                        target.url, decision.method, path, forwarded, admitted.body
                    )
                    break
                except httpx.ConnectError as exc:  # nothing reached the upstream
                    replacement = self.routing.replace(target)
                    if replacement is None:
                        message = f"{target.name}: {exc}; no healthy replica left"
                        await _send_response(
                            openai_error(502, message, "upstream_unreachable"), scope, send
                        )
                        return None
                    target = replacement
                    if decision.use is RouteUse.SALTED and self.routing.state() is not None:
                        self.router_counts.decided("replaced")
                except httpx.HTTPError as exc:
                    message = f"{target.name}: {exc!r}"
                    await _send_response(openai_error(502, message, "upstream_error"), scope, send)
                    return None
            added = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in target.headers.items()]
            ends = await relay_answer(
                upstream,
                send,
                started=target.started,
                headers=added,
                kept=UsageChunkLeftOut.of_answer(upstream.headers).piece
                if usage_left_out
                else None,
                client=scope.get("extensions", {}).get(DIRECT_BODY),
            )
        finally:
            target.ended()  # once per placement, however the relay ended (cancelled too)
        return usage_of(ends) if upstream.status_code == 200 else None

    def _count_decision(self, decision: Admitted, target: Target) -> None:
        """Count how the routing stage placed a generation request, and its tokenizations
        (nothing without a precise router: one upstream decides nothing)."""
        state = self.routing.state()
        if state is None:
            return
        if decision.pin is not None:
            outcome = "pinned"
        elif target.placement is None:
            outcome = "smg"
        else:
            outcome = "prefix" if target.placement.run > 0 else "load"
        self.router_counts.decided(outcome)
        self.router_counts.tokenized(state.tokenized_here, state.tokenize_fallbacks)

    async def _answer(self, decision: Admitted) -> Response:
        """The gateway routes' answers: health, metrics, router state."""
        if decision.path == "/health":
            return self.routing.health()
        if decision.path == "/metrics":
            return await self._metrics(decision)
        return self._router_state()

    async def _metrics(self, decision: Admitted) -> Response:
        caller = decision.caller
        if caller is not None and not caller.operator:
            return Response(self.usage.exposition([caller.name]), media_type=PROMETHEUS_TEXT)

        async def scrape(url: str) -> str | None:
            try:
                response = await self.upstreams.client(url).get("/metrics", timeout=5.0)
                response.raise_for_status()
            except httpx.HTTPError as exc:
                log.warning("no metrics from %s: %r", url, exc)
                return None
            return response.text

        texts = await asyncio.gather(*(scrape(url) for url in self.routing.replica_urls))
        tenants = [] if self.tenants is None else self.tenants.tenant_ids
        router = "" if self.routing.state() is None else self.router_counts.exposition()
        return Response(
            merge_replica_metrics(texts)
            + self.usage.exposition(tenants)
            + router
            + replica_up([text is not None for text in texts]),
            media_type=PROMETHEUS_TEXT,
        )

    def _router_state(self) -> Response:
        state = self.routing.state()
        if state is None:
            return openai_error(404, "this deployment has no precise router", "not_found")
        replicas = range(len(self.routing.replica_urls))
        return JSONResponse(
            {
                "routed": state.routed,
                "inflight": state.inflight,
                "held_blocks": [state.index.held(r) for r in replicas],
                "coming_blocks": [state.index.coming_unheld(r) for r in replicas],
                "healthy": state.healthy,
                # generation requests tokenized in the router, and asked of a replica
                "tokenized_here": state.tokenized_here,
                "tokenize_fallbacks": state.tokenize_fallbacks,
            }
        )


async def until_disconnected(receive: Receive, work: Callable[[], Awaitable[_T]]) -> _T | None:
    """`work()`, cancelled when the client hangs up (None then). The request body must be
    read already: the next message a server sends is the client's disconnect.

    A plain asyncio task watches for the hang-up and cancels this one (an anyio task
    group costs several times more per request, on every request)."""
    task = asyncio.current_task()
    assert task is not None
    hung_up = False

    async def watch() -> None:
        nonlocal hung_up
        while (await receive())["type"] != "http.disconnect":
            pass
        hung_up = True
        task.cancel()

    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        return await work()
    except asyncio.CancelledError:
        if not hung_up or task.cancelling() > 1:
            raise  # cancelled from elsewhere too (the server shutting down)
        return None
    finally:
        watcher.cancel()
        if hung_up:  # this cancellation is spent, however the work ended
            task.uncancel()


async def _send_response(response: Response, scope: Scope, send: Send) -> None:
    async def nothing() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    with contextlib.suppress(OSError):
        await response(scope, nothing, send)
