"""The log of every HTTP request a test server received, as it arrived: `ReceivedRequest`
(method, paths, query, headers, whole body), recorded by `logged` before the app routes it,
kept by `RequestLog`, which the server's thread appends to while a test reads it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ReceivedRequest", "RequestLog", "logged"]


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP request as the server received it, before routing: `path` as routed
    (percent-decoded), `raw_path` the bytes on the wire (without the query), `query` the query
    string, `headers` as (lower-case name, value) pairs in order, `body` whole."""

    method: str
    path: str
    raw_path: bytes
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def cache_salt(self) -> str | None:
        """The top-level ``cache_salt`` of a JSON object body; None without one (or when it
        is not a string, which vLLM refuses)."""
        try:
            body = json.loads(self.body)
        except ValueError:
            return None
        salt = body.get("cache_salt") if isinstance(body, dict) else None
        return salt if isinstance(salt, str) else None


class RequestLog:
    """Received requests in order of arrival, safe to append to and read from two threads."""

    def __init__(self) -> None:
        self._requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()

    def append(self, request: ReceivedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def snapshot(self) -> list[ReceivedRequest]:
        """The requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)


def logged(app: ASGIApp, log: RequestLog) -> ASGIApp:
    """`app`, each HTTP request appended to `log` with its whole body before `app` sees it."""

    async def logging_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            received = await receive()
            if received["type"] != "http.request":
                break
            chunks.append(received.get("body", b""))
            if not received.get("more_body", False):
                break
        body = b"".join(chunks)
        log.append(_received(scope, body))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return logging_app


def _received(scope: Scope, body: bytes) -> ReceivedRequest:
    return ReceivedRequest(
        method=scope["method"],
        path=scope["path"],
        raw_path=scope.get("raw_path") or scope["path"].encode(),
        query=scope.get("query_string", b"").decode("latin-1"),
        headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]),
        body=body,
    )
