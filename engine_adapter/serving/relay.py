"""The one HTTP relay of the serving app: a request forwarded to an engine (a vLLM replica,
or SMG in front of them) and its answer streamed back as it comes.

* One `httpx.AsyncClient` per upstream base URL (`Upstreams`): httpx's connection pool
  walks all of its connections on every request, so one pool for a whole fleet costs
  milliseconds of CPU per request under load (encode/httpcore#1035).
* Idle upstream connections are dropped after `UPSTREAM_IDLE_S`, before the engines'
  own 5 s (see `keepalive`).
* `send` forwards method, path, query, body and the end-to-end headers (never the
  client's API key, never hop-by-hop headers). A refused connection raises
  `httpx.ConnectError` to the caller, who may place the request elsewhere (nothing
  reached the engine); any other failure on the way answers 502 in OpenAI's error
  shape, naming the upstream and the reason.
* `Relayed` streams the answer chunk by chunk, never buffered whole. However the relay
  ends (answered, broken off by the engine, the client hung up before or after the
  first chunk, under ASGI 2.4 too), its `ended` callback runs once and the upstream
  response is closed, so the engine stops generating for nobody. A stream the engine
  breaks off reaches the client broken, never as a clean, shorter answer.

Every error the serving app answers itself is `openai_error`: ``{"error": {"message",
"type", "code", "param"}}``, the shape the official clients parse.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping

import anyio
import httpx
from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from .keepalive import UPSTREAM_IDLE_S

__all__ = ["Relayed", "Upstreams", "forwarded_headers", "openai_error", "relayed_headers"]

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


def openai_error(status: int, message: str, code: str, param: str | None = None) -> JSONResponse:
    """An error answer in OpenAI's shape, which the official clients raise as `APIError`."""
    return JSONResponse(
        {"error": {"message": message, "type": code, "code": code, "param": param}},
        status_code=status,
    )


def forwarded_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The request headers an upstream gets: end-to-end ones, without the client's key."""
    return [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED]


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


class Relayed(StreamingResponse):
    """An upstream answer passed through as it comes. `started` runs at its first chunk,
    `ended` once however the relay ends, and the upstream response is always closed.
    (A background task would not do: Starlette skips it when the stream raises, and
    under ASGI 2.4 when the client is gone before the response starts.)"""

    def __init__(
        self,
        upstream: httpx.Response,
        *,
        started: Callable[[], None] = _nothing,
        ended: Callable[[], None] = _nothing,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            first = True
            async for chunk in upstream.aiter_raw():
                if first:
                    first = False
                    started()
                yield chunk

        super().__init__(
            chunks(),
            status_code=upstream.status_code,
            headers={**relayed_headers(upstream.headers.items()), **(headers or {})},
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
