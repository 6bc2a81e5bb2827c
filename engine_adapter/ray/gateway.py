"""The gateway as ASGI middleware, in front of Ray Serve LLM's OpenAI ingress.

The checks are the serving app's gateway stage (`prefixkit.engine_adapter.serving.gateway`),
through the same `Tenants` object: every request except ``GET /health`` needs a known key,
else 401 in OpenAI's error shape; a client's ``cache_salt`` is removed from every JSON
object body and, on the generation endpoints (`SALTED_PATHS`), replaced by the tenant's
own (`Tenants.forwarded`, the HMAC of the tenant id under the deployment's secret).

A generation request whose replica failed before answering (its actor died: Serve
answers 500 before any byte) is sent again, up to `RETRIES` times, after `RETRY_DELAY_S`:
nothing reached the client, and Serve places it on a live replica. With the prefixkit
router, the header ``x-prefixkit-replica: I`` (`PIN_HEADER`) pins a request to the I-th
replica (for warm-up); it travels in the body as ``prefixkit_replica`` (`PIN_FIELD`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..serving.gateway import PIN_HEADER, SALTED_PATHS, Tenants, unauthorized

__all__ = ["PIN_FIELD", "RETRIES", "TenantGateway", "tenants_loader"]

PIN_FIELD = "prefixkit_replica"
RETRIES = 5
RETRY_DELAY_S = 2.0


class TenantGateway:
    """ASGI middleware: authenticate, salt, and send again what a dead replica dropped.
    `tenants` is called once, where the app runs (the ingress replica), to load them."""

    def __init__(self, app: ASGIApp, tenants: Callable[[], Tenants]) -> None:
        self.app = app
        self.tenants = tenants()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["path"] == "/health" and scope["method"] == "GET"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        tenant = self.tenants.tenant_of_request(headers)
        if tenant is None:
            await unauthorized()(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = self.tenants.forwarded("POST", scope["path"], await _read_body(receive), tenant)
        generation = scope["path"] in SALTED_PATHS
        pin = headers.get(PIN_HEADER)
        if body and pin is not None and generation:
            body = _pinned(body, pin)
        scope = _with_length(scope, len(body))
        for attempt in range(RETRIES + 1):
            retry = attempt < RETRIES and generation
            if not await _answer(self.app, scope, body, receive, send, hold_failure=retry):
                return
            await asyncio.sleep(RETRY_DELAY_S)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _pinned(body: bytes, pin: str) -> bytes:
    try:
        payload = json.loads(body)
        index = int(pin)
    except ValueError:
        return body
    if not isinstance(payload, dict):
        return body
    payload[PIN_FIELD] = index
    return json.dumps(payload, ensure_ascii=False).encode()


def _with_length(scope: Scope, length: int) -> Scope:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(length).encode()))
    return {**scope, "headers": headers}


async def _answer(
    app: ASGIApp, scope: Scope, body: bytes, client: Receive, send: Send, hold_failure: bool
) -> bool:
    """Run `app` on `body`; True when it failed with a 5xx before anything reached the
    client and `hold_failure` asked to keep such an answer back (to try again)."""
    sent = False
    held: list[Message] = []

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await client()  # the client's own disconnect

    async def relay(message: Message) -> None:
        if held or (
            hold_failure and message["type"] == "http.response.start" and message["status"] >= 500
        ):
            held.append(message)
            return
        await send(message)

    await app(scope, receive, relay)
    return bool(held)


def tenants_loader(
    path: str | None, environ: Mapping[str, str] | None = None
) -> Callable[[], Tenants]:
    """A loader of the tenants file `path` (and the environment), for `TenantGateway`."""

    def load() -> Tenants:
        return Tenants.load(path, environ)

    return load
