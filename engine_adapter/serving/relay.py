"""What the serving app tells an engine, and its clients for the app's own requests.

* `forwarded_headers`: the request headers an upstream (a vLLM replica, or SMG in front
  of them) gets: never the client's API key, never hop-by-hop headers (`HOP_BY_HOP`).
* `Upstreams`: one `httpx.AsyncClient` per upstream base URL for the app's own requests
  (health polls, ``/metrics``, ``/tokenize``): httpx's connection pool walks all of its
  connections on every request, so one pool for a whole fleet costs milliseconds of CPU
  per request under load (encode/httpcore#1035). Idle connections are dropped after
  `UPSTREAM_IDLE_S`, before the engines' own 5 s (see `keepalive`). Relayed requests go
  through `upstream` instead.

Every error the serving app answers itself is `openai_error`: ``{"error": {"message",
"type", "code", "param"}}``, the shape the official clients parse.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx
from starlette.responses import JSONResponse

from .keepalive import UPSTREAM_IDLE_S
from .refused import error_body

__all__ = ["HOP_BY_HOP", "Upstreams", "forwarded_headers", "openai_error"]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "authorization", "x-api-key", "content-length"}
# what a tenant's request may tell the engine besides its body; not ``x-request-id``:
# vLLM names the request after it and aborts every request of that name when one's client
# hangs up, so a tenant that named its request after another tenant's could cancel it
_GATED_HEADERS = frozenset(
    {
        "content-type",
        "accept",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "traceparent",
        "tracestate",
    }
)


def openai_error(status: int, message: str, code: str, param: str | None = None) -> JSONResponse:
    """An error answer in OpenAI's shape, which the official clients raise as `APIError`."""
    return JSONResponse(error_body(message, code, param), status_code=status)


def forwarded_headers(
    headers: Iterable[tuple[str, str]], *, gated: bool = True
) -> list[tuple[str, str]]:
    """The request headers an upstream gets. A gated request (a tenant's, or an operator's
    on a route of the gateway's table): only `_GATED_HEADERS`, and answers uncompressed.
    Otherwise the end-to-end headers. Never the client's key, never the gateway's own."""
    if gated:
        kept = [(k, v) for k, v in headers if k.lower() in _GATED_HEADERS]
        return [*kept, ("accept-encoding", "identity")]
    return [
        (k, v)
        for k, v in headers
        if k.lower() not in _NOT_FORWARDED and not k.lower().startswith("x-prefixkit-")
    ]


class Upstreams:
    """An HTTP client per upstream base URL, made on first use, closed by `aclose`."""

    def __init__(self, *, connect_timeout: float = 10.0, read_timeout: float = 600.0) -> None:
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=60.0, pool=None
        )
        self._clients: dict[str, httpx.AsyncClient] = {}

    def client(self, base_url: str) -> httpx.AsyncClient:
        client = self._clients.get(base_url)
        if client is None:
            client = self._clients[base_url] = httpx.AsyncClient(
                base_url=base_url,
                timeout=self._timeout,
                limits=httpx.Limits(max_connections=256, keepalive_expiry=UPSTREAM_IDLE_S),
            )
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
