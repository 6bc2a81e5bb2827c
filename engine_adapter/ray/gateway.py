"""The gateway as ASGI middleware, in front of Ray Serve LLM's OpenAI ingress.

Every request passes the same choke point as on the local backend
(`prefixkit.engine_adapter.serving.gateway.admit`, with the same `Tenants`): ``GET
/health`` is public, any other request needs a known key (401), a canonical request
target (400) and, for a tenant, a route of the tenant table (404); a body is admitted by
`serving.bodies.admit_body` (a JSON object, the tenant's salt on generation routes, a
client's ``cache_salt`` and pin field removed). A tenant's ``GET /metrics`` is its own
numbers; an operator's is every tenant's and, with the prefixkit router, the router's
decisions and tokenizations (the engines' metrics are Ray's, on its own metrics port), in
the same names as on the local backend (`serving.metrics`), summed over the ingress
replicas (`counters.ActorCounters`). A streamed Chat Completions or Completions
request asks the engine for its usage chunk, which a client that did not ask for it never
gets (`serving.tenant_usage.asking_stream_usage`). `Limits` bound a body's size, read
time and nesting and a tenant's requests in flight as on the local backend; what Ray
Serve's proxy bounds before the gateway sees a request (and what it does not) is in
docs/self-hosting/ray.md.

With the prefixkit router, an operator's ``x-prefixkit-replica: I`` (`PIN_HEADER`) pins a
request to the I-th replica (warm-up); it travels in the body as ``prefixkit_replica``
(`PIN_FIELD`), which the gateway removes from every body before it sets it.

A tenant's generation request gets a ``request_id`` of the gateway's own in its body. Ray
Serve LLM names the engine's request after the body's ``request_id``, else after Ray
Serve's request id, which Ray's proxy takes from the client's ``x-request-id``; vLLM
aborts every request of a name when one's client hangs up, so a tenant that named its
request after another tenant's could cancel it.

Nothing is sent again: Ray Serve itself retries a request whose replica never accepted
it (unavailable, rejected); a replica that dies with a request it accepted answers 500,
and that request is never sent on to another engine (it may be what killed the first).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..serving.bodies import BodyWorkers
from ..serving.gateway import Admitted, admit_scope, body_admission
from ..serving.limits import Limits, TenantSlots, read_body
from ..serving.metrics import Counters, RouterCounters
from ..serving.refused import Refused
from ..serving.relay import openai_error
from ..serving.routes import RouteUse
from ..serving.tenant_usage import (
    PROMETHEUS_TEXT,
    TenantUsage,
    asking_stream_usage,
    usage_of,
    without_usage_chunk,
)
from ..serving.tenants import Tenants

__all__ = ["TenantGateway", "tenants_loader"]

_KEPT_BYTES = 16384


class TenantGateway:
    """ASGI middleware: admit, salt, count. `tenants` and `counters` are called once, where
    the app runs (the ingress replica): the tenants, and where the counts are kept (this
    process's memory by default); `routed`: the router's counts are shown too."""

    def __init__(
        self,
        app: ASGIApp,
        tenants: Callable[[], Tenants],
        limits: Limits | None = None,
        counters: Callable[[], Counters] = Counters,
        routed: bool = False,
    ) -> None:
        self.app = app
        self.tenants = tenants()
        self.limits = limits or Limits()
        self.bodies = BodyWorkers(self.limits.body_workers)
        self.usage = TenantUsage(counters())
        self.router_counts = RouterCounters(self.usage.counters) if routed else None
        self.slots = TenantSlots(self.limits.max_inflight_per_tenant)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers, decision = admit_scope(scope, self.tenants)
        if isinstance(decision, Refused):
            await decision.response()(scope, receive, send)
            return
        if decision.use is RouteUse.GATEWAY and decision.path != "/health":
            await (await self._metrics(decision))(scope, receive, send)
            return
        if scope["method"] != "POST" or not decision.gated:
            await self.app(_exact(scope, decision, None), receive, send)
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
            options = body_admission(
                decision, headers, self.limits.max_json_depth, pin_in_body=True
            )
            if decision.limited_tenant is not None and decision.use is RouteUse.SALTED:
                options["fields"]["request_id"] = f"prefixkit-{uuid.uuid4().hex}"
            admitted = await self.bodies.admit(raw, **options)
        except Refused as refused:
            await refused.response()(scope, receive, send)
            return
        body = admitted.body
        recorded = decision.tenant is not None and decision.use is RouteUse.SALTED
        asked = asking_stream_usage(decision.path, body, admitted.view)
        if recorded and asked is not None:  # the engine says the usage; the client never asked
            body = asked
            send = without_usage_chunk(send)
        kept = bytearray()

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.body":
                kept.extend(message.get("body", b""))
                del kept[:-_KEPT_BYTES]
            await send(message)

        try:
            await self.app(_exact(scope, decision, len(body)), _replay(body, receive), counted)
        finally:  # a request whose client left counts too, as on the local backend
            if recorded and decision.tenant is not None:
                self.usage.record(decision.tenant, usage_of(bytes(kept)))

    async def _metrics(self, decision: Admitted) -> Response:
        caller = decision.caller
        if decision.path != "/metrics":
            return openai_error(404, "this deployment has no precise router state", "not_found")
        await self.usage.counters.refresh()
        if caller is not None and not caller.operator:
            return Response(self.usage.exposition([caller.name]), media_type=PROMETHEUS_TEXT)
        text = self.usage.exposition(self.tenants.tenant_ids)
        if self.router_counts is not None:
            text += self.router_counts.exposition()
        return Response(text, media_type=PROMETHEUS_TEXT)


def _replay(body: bytes, client: Receive) -> Receive:
    """A receive that gives `body` once, then the client's own messages (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await client()

    return receive


def _exact(scope: Scope, decision: Admitted, length: int | None) -> Scope:
    """`scope` with the admitted path only (no query for a gated request), the gateway's
    headers and the client's key removed (and a gated request's ``x-request-id``, which
    vLLM names the request after: `relay`), and the body's new length."""
    dropped = (
        {b"authorization", b"x-api-key"}
        | ({b"content-length"} if length is not None else set())
        | ({b"x-request-id"} if decision.gated else set())
    )
    headers = [
        (k, v)
        for k, v in scope["headers"]
        if k.lower() not in dropped and not k.lower().startswith(b"x-prefixkit-")
    ]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    query = b"" if decision.gated else scope.get("query_string", b"")
    return {
        **scope,
        "path": decision.path,
        "raw_path": decision.path.encode(),
        "query_string": query,
        "headers": headers,
    }


def tenants_loader(
    path: str | None, environ: Mapping[str, str] | None = None
) -> Callable[[], Tenants]:
    """A loader of the tenants file `path` (and the environment), for `TenantGateway`."""

    def load() -> Tenants:
        return Tenants.load(path, environ)

    return load
