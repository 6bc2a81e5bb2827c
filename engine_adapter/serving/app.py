"""The serving app: one ASGI app in front of the replicas, the gateway stage then a routing
stage, relayed to the engines.

    app = serving_app(PreciseRoute(RouterState(settings)), Tenants.load(path))
    served(app, "127.0.0.1", 8000).run()        # from prefixkit.engine_adapter.serving.keepalive

The gateway stage (`gateway`, when `tenants` is given): every request except
``GET /health`` needs a known key, else 401; a client's ``cache_salt`` is removed, and on
the generation endpoints (``/v1/completions``, ``/v1/chat/completions``,
``/v1/responses``) the tenant's own is set. The API key is never forwarded.

The routing stage (`router`) says where each request goes; the relay (`relay`) sends
it there and streams the answer back. Routes, the same through every routing stage:

* ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/responses``: placed by the
  routing stage, streamed back as they are generated;
* ``GET /v1/models``, ``POST /tokenize``, any other path: relayed to a replica (or SMG);
* ``GET /health``: the routing stage's answer (the precise router's replica health) or
  its upstream's;
* ``GET /metrics``: every replica's Prometheus metrics in one exposition, each sample
  labelled with its ``replica`` (`merge_replica_metrics`);
* ``GET /router/state``: the precise router's routed counts, requests in flight, held
  and coming blocks, health (404 without that router).

Errors the app answers itself are in OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine.metrics import merge_replica_metrics
from .gateway import SALTED_PATHS, Tenants, unauthorized
from .relay import Relayed, Upstreams, forwarded_headers, openai_error
from .router import Refusal, Routing, Target

__all__ = ["GENERATION_PATHS", "serving_app"]

log = logging.getLogger(__name__)

GENERATION_PATHS = tuple(sorted(SALTED_PATHS))
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def serving_app(
    routing: Routing,
    tenants: Tenants | None = None,
    *,
    connect_timeout: float = 10.0,
    read_timeout: float = 600.0,
) -> Starlette:
    """The ASGI app (see the module docstring); its lifespan starts the routing stage."""
    upstreams = Upstreams(connect_timeout=connect_timeout, read_timeout=read_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            await routing.start(upstreams)
            yield
        finally:
            await routing.stop()
            await upstreams.aclose()

    def refused(request: Request) -> Response | None:
        """401 unless the request carries a known key (when there is a gateway stage)."""
        if tenants is None or tenants.tenant_of_request(request.headers) is not None:
            return None
        return unauthorized()

    async def body_of(request: Request) -> bytes:
        """The body to forward (the gateway's, for a request `refused` let through)."""
        raw = await request.body()
        tenant = None if tenants is None else tenants.tenant_of_request(request.headers)
        if tenants is None or tenant is None:
            return raw
        return tenants.forwarded(request.method, request.url.path, raw, tenant)

    async def forward(request: Request, body: bytes, target: Target) -> Response:
        while True:
            try:
                upstream = await upstreams.send(
                    target.url,
                    request.method,
                    request.url.path,
                    query=request.url.query,
                    headers=forwarded_headers(request.headers.items()),
                    body=body,
                )
                break
            except httpx.ConnectError as exc:  # nothing reached the upstream
                replacement = routing.replace(target)
                if replacement is None:
                    target.ended()
                    return openai_error(
                        502,
                        f"{target.name}: {exc}; no healthy replica left",
                        "upstream_unreachable",
                    )
                target = replacement
            except httpx.HTTPError as exc:
                target.ended()
                return openai_error(502, f"{target.name}: {exc!r}", "upstream_error")
        return Relayed(upstream, started=target.started, ended=target.ended, headers=target.headers)

    async def generation(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        body = await body_of(request)
        try:
            target = await routing.place(request.url.path, body)
        except Refusal as refusal:
            return refusal.response
        return await forward(request, body, target)

    async def health(request: Request) -> Response:
        answer = routing.health()
        if answer is not None:
            return answer
        return await forward(request, b"", routing.utility("/health"))

    async def metrics(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer

        async def scrape(url: str) -> str | None:
            try:
                response = await upstreams.client(url).get("/metrics", timeout=5.0)
                response.raise_for_status()
            except httpx.HTTPError as exc:
                log.warning("no metrics from %s: %r", url, exc)
                return None
            return response.text

        texts = await asyncio.gather(*(scrape(url) for url in routing.replica_urls))
        return Response(
            merge_replica_metrics(texts), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def router_state(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        state = routing.state()
        if state is None:
            return openai_error(404, "this deployment has no precise router", "not_found")
        replicas = range(len(routing.replica_urls))
        return JSONResponse(
            {
                "routed": state.routed,
                "inflight": state.inflight,
                "held_blocks": [state.index.held(r) for r in replicas],
                "coming_blocks": [state.index.coming_unheld(r) for r in replicas],
                "healthy": state.healthy,
            }
        )

    async def other(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        body = await body_of(request)
        return await forward(request, body, routing.utility(request.url.path))

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/router/state", router_state, methods=["GET"]),
            *(Route(path, generation, methods=["POST"]) for path in GENERATION_PATHS),
            Route("/{path:path}", other, methods=_METHODS),
        ],
        lifespan=lifespan,
    )
    app.state.router = routing.state()
    return app
