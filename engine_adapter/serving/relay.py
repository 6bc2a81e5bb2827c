"""The one HTTP relay of the serving app: a request forwarded to an engine (a vLLM replica,
or SMG in front of them) and its answer streamed back as it comes.

* One `httpx.AsyncClient` per upstream base URL (`Upstreams`): httpx's connection pool
  walks all of its connections on every request, so one pool for a whole fleet costs
  milliseconds of CPU per request under load (encode/httpcore#1035).
* Idle upstream connections are dropped after `UPSTREAM_IDLE_S`, before the engines'
  own 5 s (see `keepalive`).
* `send` forwards method, path (exactly as given: the gateway admitted it in canonical
  form), query, body and the headers `forwarded_headers` keeps (never the client's API
  key, never hop-by-hop headers). A refused connection raises
  `httpx.ConnectError` to the caller, who may place the request elsewhere (nothing
  reached the engine); any other failure on the way answers 502 in OpenAI's error
  shape, naming the upstream and the reason.
* `relay_answer` streams the answer chunk by chunk, never buffered whole. However the
  relay ends (answered, broken off by the engine, cancelled because the client hung up),
  the upstream response is closed, so the engine stops generating for nobody. A stream the engine breaks off reaches the client
  broken, never as a clean, shorter answer.

Every error the serving app answers itself is `openai_error`: ``{"error": {"message",
"type", "code", "param"}}``, the shape the official clients parse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import anyio
import httpx
from starlette.responses import JSONResponse
from starlette.types import Send

from .keepalive import UPSTREAM_IDLE_S
from .refused import error_body

__all__ = ["Upstreams", "forwarded_headers", "openai_error", "relay_answer", "relayed_headers"]

_HOP_BY_HOP = frozenset(
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
_NOT_FORWARDED = _HOP_BY_HOP | {"host", "authorization", "x-api-key", "content-length"}
# what a tenant's request may tell the engine besides its body
_GATED_HEADERS = frozenset(
    {
        "content-type",
        "accept",
        "user-agent",
        "x-request-id",
        "anthropic-version",
        "anthropic-beta",
        "traceparent",
        "tracestate",
    }
)
_HEAD_BYTES = 4096
_TAIL_BYTES = 16384


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


def relayed_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The response headers the client gets back: the upstream's end-to-end ones."""
    return {k: v for k, v in headers if k.lower() not in _HOP_BY_HOP}


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

    async def send(
        self,
        base_url: str,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> httpx.Response:
        """Send a request to `base_url` and return the response with its body still
        streaming (close it, or hand it to `Relayed`). Raises `httpx.HTTPError`."""
        client = self.client(base_url)
        url = path + ("?" + query if query else "")
        request = client.build_request(method, url, headers=list(headers), content=body)
        return await client.send(request, stream=True)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def _nothing() -> None:
    return None


async def relay_answer(
    upstream: httpx.Response,
    send: Send,
    *,
    started: Callable[[], None] = _nothing,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """Pass an upstream answer to the client as it comes. `started` runs at its first
    chunk, and the upstream response is closed however the relay ends (answered, broken
    off, cancelled because the client left). Returns the answer's first and last few
    kilobytes (where its ``usage`` is)."""
    head = bytearray()
    tail = bytearray()
    try:
        response_headers = {**relayed_headers(upstream.headers.items()), **(headers or {})}
        await send(
            {
                "type": "http.response.start",
                "status": upstream.status_code,
                "headers": [(k.encode(), v.encode()) for k, v in response_headers.items()],
            }
        )
        first = True
        async for chunk in upstream.aiter_raw():
            if first:
                first = False
                started()
            if len(head) < _HEAD_BYTES:
                head += chunk[: _HEAD_BYTES - len(head)]
            tail += chunk
            del tail[:-_TAIL_BYTES]
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        with anyio.CancelScope(shield=True):
            await upstream.aclose()
    return bytes(head) + bytes(tail)
