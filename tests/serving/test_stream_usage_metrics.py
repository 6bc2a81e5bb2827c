"""The usage chunk of a streamed Chat Completions or Completions answer: the gateway asks
the engine for it when the client did not (so the request's tokens count), and leaves
that one event out of the stream the client gets, however the stream is cut into reads."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.serving.tenant_usage import (
    asking_stream_usage,
    usage_of,
    without_usage_chunk,
)
from starlette.types import Message

CHUNKS = [
    {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}}]},
    {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "ok"}}],
    },
]
USAGE = {
    "id": "c",
    "choices": [],
    "usage": {"prompt_tokens": 90, "prompt_tokens_details": {"cached_tokens": 64}},
}


def _event(data: object) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"


STREAM = b"".join([*map(_event, CHUNKS), _event(USAGE), _event(b"[DONE]")])
WITHOUT_USAGE = b"".join([*map(_event, CHUNKS), _event(b"[DONE]")])


def _relayed(pieces: list[bytes], content_type: bytes = b"text/event-stream") -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def relay() -> None:
        filtered = without_usage_chunk(send)
        await filtered(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type)],
            }
        )
        for piece in pieces:
            await filtered({"type": "http.response.body", "body": piece, "more_body": True})
        await filtered({"type": "http.response.body", "body": b"", "more_body": False})

    asyncio.run(relay())
    return sent


def _body(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_the_usage_event_is_left_out_however_the_stream_is_cut(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    sent = _relayed(pieces)
    assert _body(sent) == WITHOUT_USAGE
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_an_answer_that_is_not_an_event_stream_passes_untouched() -> None:
    error = json.dumps({"error": {"message": "bad", "usage": USAGE["usage"], "choices": []}})
    body = _event(json.loads(error))
    assert _body(_relayed([body], b"application/json")) == body


def test_the_usage_left_out_is_still_counted_from_the_engines_bytes() -> None:
    counted = usage_of(STREAM)
    assert counted is not None and (counted.prompt_tokens, counted.cached_tokens) == (90, 64)


def _asked(path: str, request: dict[str, Any]) -> dict[str, Any] | None:
    body = json.dumps(request, separators=(",", ":")).encode()
    asked = asking_stream_usage(path, body, request)
    return None if asked is None else json.loads(asked)


def test_a_streamed_request_without_stream_options_asks_for_the_usage() -> None:
    request = {"model": "m", "prompt": "p", "stream": True}
    assert _asked("/v1/completions", request) == {
        **request,
        "stream_options": {"include_usage": True},
    }


def test_a_request_that_asked_itself_or_does_not_stream_is_left_as_sent() -> None:
    asked = {
        "model": "m",
        "messages": [],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert _asked("/v1/chat/completions", asked) is None
    assert _asked("/v1/chat/completions", {"model": "m", "messages": []}) is None
    assert _asked("/v1/chat/completions", {"model": "m", "messages": [], "stream": False}) is None


def test_responses_and_messages_streams_are_left_as_sent() -> None:
    """Their streams say the usage in their last event whatever the client asked."""
    for path in ("/v1/responses", "/v1/messages"):
        assert _asked(path, {"model": "m", "input": "x", "stream": True}) is None
