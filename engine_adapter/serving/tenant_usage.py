"""Per-tenant numbers the gateway keeps: requests, prompt tokens, cached prompt tokens.

A tenant's ``GET /metrics`` shows its own numbers and nothing else (never the engines'
metrics, which count every tenant's requests); an operator's shows every tenant's beside
the engines'. The token counts come from the ``usage`` object of each answer the relay
passed through (`usage_of`: the last one in the answer's first and last bytes, so a
stream's final usage chunk counts), in OpenAI's, the Responses API's and Anthropic's
shapes.

A streamed Chat Completions or Completions answer says its usage only in a last chunk the
client asks for (``stream_options: {"include_usage": true}``): the gateway asks the engine
for it on every such request (`asking_stream_usage`), and a client that did not ask
itself gets the stream without that chunk (`UsageChunkLeftOut`; `without_usage_chunk`
for an ASGI ``send``), every other byte as it came.

The counts are kept in `metrics.Counters` (shared by the router workers with
`metrics.SharedCounters`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Message, Send

from .metrics import TENANT_COUNTS, Counters, exposition

__all__ = [
    "PROMETHEUS_TEXT",
    "STREAM_USAGE_PATHS",
    "TenantUsage",
    "Usage",
    "UsageChunkLeftOut",
    "asking_stream_usage",
    "usage_of",
    "without_usage_chunk",
]

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the exposition's media type

# a "usage" object with objects one level inside it (prompt_tokens_details)
_USAGE = re.compile(rb'"usage"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})')
# the routes whose streams carry usage only when asked (`stream_options.include_usage`)
STREAM_USAGE_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})
_HELP = {
    "requests": "Generation requests of the tenant the gateway admitted",
    "prompt_tokens": "Prompt tokens of the tenant's answered requests",
    "cached_tokens": "Prompt tokens served from the prefix cache",
}


@dataclass
class Usage:
    """One tenant's counts (or one answer's, for `usage_of`)."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0


def usage_of(data: bytes) -> Usage | None:
    """The prompt and cached tokens of an answer from the last ``usage`` object in `data`
    that counts prompt tokens (None: no such object)."""
    at = len(data)
    while (at := data.rfind(b'"usage"', 0, at)) >= 0:  # from the end, where the usage is
        match = _USAGE.match(data, at)
        if match is None:  # "usage": null, or not an object
            continue
        try:
            usage = json.loads(match.group(1))
        except ValueError:
            continue
        counted = _counted(usage)
        if counted is not None:
            return counted
    return None


def _counted(usage: dict[str, object]) -> Usage | None:
    def number(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def details(key: str) -> int:
        value = usage.get(key)
        return number(value.get("cached_tokens")) if isinstance(value, dict) else 0

    if "prompt_tokens" in usage:  # chat / completions
        return Usage(1, number(usage["prompt_tokens"]), details("prompt_tokens_details"))
    if "cache_read_input_tokens" in usage:  # Anthropic: input_tokens excludes the cache
        read = number(usage["cache_read_input_tokens"])
        prompt = number(usage.get("input_tokens")) + read
        return Usage(1, prompt + number(usage.get("cache_creation_input_tokens")), read)
    if "input_tokens" in usage:  # Responses
        return Usage(1, number(usage["input_tokens"]), details("input_tokens_details"))
    return None


class TenantUsage:
    """Counts per tenant (module docstring), in `counters` (this process's by default)."""

    def __init__(self, counters: Counters | None = None) -> None:
        self.counters = counters if counters is not None else Counters()

    def record(self, tenant: str, answer: Usage | None) -> None:
        """One request of `tenant` ended; `answer`: its usage, if it said."""
        self.counters.add(("tenant", tenant, "requests"))
        if answer is not None:
            self.counters.add(("tenant", tenant, "prompt_tokens"), answer.prompt_tokens)
            self.counters.add(("tenant", tenant, "cached_tokens"), answer.cached_tokens)

    def of(self, tenant: str) -> Usage:
        return Usage(*(self.counters.value(("tenant", tenant, count)) for count in TENANT_COUNTS))

    def exposition(self, tenants: Iterable[str]) -> str:
        """Prometheus text of the counts of `tenants` (each labelled with its id)."""
        shown = sorted(tenants)
        return "".join(
            exposition(
                f"prefixkit_tenant_{count}_total",
                "counter",
                _HELP[count],
                [
                    ({"tenant": tenant}, self.counters.value(("tenant", tenant, count)))
                    for tenant in shown
                ],
            )
            for count in TENANT_COUNTS
        )


def asking_stream_usage(path: str, body: bytes, view: Mapping[str, Any]) -> bytes | None:
    """The body to forward for a streamed Chat Completions or Completions request whose
    client did not ask for the usage chunk: `body` (the admitted body, compact JSON)
    asking the engine for it. None: nothing to change (not such a request, or its client
    asked itself). `view`: the admitted request as the routing stage reads it."""
    if path not in STREAM_USAGE_PATHS or view.get("stream") is not True:
        return None
    options = view.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return None
    if "stream_options" not in view:
        return body[:-1] + b',"stream_options":{"include_usage":true}}'
    if options is not None and not isinstance(options, dict):
        return None  # the engine says what is wrong with it
    payload = json.loads(body)
    # continuous usage stats apply only with include_usage: the client did not get them
    payload["stream_options"] = {
        **(options or {}),
        "include_usage": True,
        "continuous_usage_stats": False,
    }
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


class UsageChunkLeftOut:
    """An answer's body, piece by piece, for a request the gateway asked the usage chunk
    for: in an event stream (`streaming`), the event holding that chunk (``choices``
    empty, ``usage`` set) is left out; every other byte passes as it came, an event at a
    time (an event split over two pieces waits for its end). Any other body passes
    untouched."""

    def __init__(self, streaming: bool) -> None:
        self.streaming = streaming
        self._pending = b""

    @classmethod
    def of_answer(cls, headers: Iterable[tuple[bytes, bytes]]) -> UsageChunkLeftOut:
        """The filter for an answer with these headers (its ``content-type`` says whether
        it is an event stream)."""
        kinds = [v for k, v in headers if k.lower() == b"content-type"]
        return cls(any(v.startswith(b"text/event-stream") for v in kinds))

    def piece(self, body: bytes, more: bool) -> bytes | None:
        """What to pass on of `body` (`more`: pieces follow it): `body` itself when it
        passes whole, None when nothing is to be passed now (a last piece always passes,
        empty or not)."""
        if not self.streaming:
            return body
        pending = self._pending + body
        if more:
            cut = pending.rfind(b"\n\n")
            end = 0 if cut < 0 else cut + 2
        else:
            end = len(pending)
        events, self._pending = pending[:end], pending[end:]
        if _USAGE_OBJECT.search(events) is None:  # most pieces: no event to leave out
            kept = events
        else:
            kept = b"".join(event for event in _events(events) if not _usage_chunk(event))
        if kept and kept == body:
            return body  # the piece as it came
        if kept or not more:
            return kept
        return None


def without_usage_chunk(send: Send) -> Send:
    """`send` for an answer to a request the gateway asked the usage chunk for: its body
    through `UsageChunkLeftOut`."""
    left_out = UsageChunkLeftOut(False)

    async def sending(message: Message) -> None:
        nonlocal left_out
        if message["type"] == "http.response.start":
            left_out = UsageChunkLeftOut.of_answer(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            kept = left_out.piece(body, message.get("more_body", False))
            if kept is None:
                return
            if kept is not body:
                message = {**message, "body": kept}
        await send(message)

    return sending


def _events(data: bytes) -> list[bytes]:
    """`data` cut after each blank line (an event and its terminator each)."""
    parts = data.split(b"\n\n")
    events = [part + b"\n\n" for part in parts[:-1]]
    return [*events, parts[-1]] if parts[-1] else events


_USAGE_OBJECT = re.compile(rb'"usage"\s*:\s*\{')


def _usage_chunk(event: bytes) -> bool:
    """Whether `event` is the usage chunk of a Chat Completions or Completions stream."""
    if not event.startswith(b"data: {") or _USAGE_OBJECT.search(event) is None:
        return False  # every other chunk of such a stream says "usage": null
    try:
        chunk = json.loads(event[6:])
    except ValueError:
        return False
    return (
        isinstance(chunk, dict)
        and chunk.get("choices") == []
        and isinstance(chunk.get("usage"), dict)
    )
