"""OpenAI-compatible answers, whole or as the server-sent events of a stream, in the shapes
the official ``openai`` client parses (its stream helpers included): Chat Completions,
Completions and Responses. Shared by `prefixkit.testing.providers` (the provider mock)
and `prefixkit.testing.fake_vllm` (the fake vLLM replica), which say what the model
"said" (`Reply`) and what the prompt cost (``usage``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CREATED",
    "Event",
    "Reply",
    "chat_completion",
    "chat_events",
    "completion",
    "completion_events",
    "response_object",
    "responses_events",
    "sse",
]

CREATED = 1763700000  # a fixed timestamp keeps answers reproducible
Event = tuple[str | None, dict[str, Any] | str]  # (SSE event name, data) of a stream


@dataclass(frozen=True)
class Reply:
    """What the model answered: its pieces (one stream delta each) and why it stopped."""

    pieces: Sequence[str]
    finish_reason: str = "stop"

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def chat_completion(model: str, ident: str, usage: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A ``chat.completion`` (id ``chatcmpl-<ident>``)."""
    return {
        "id": f"chatcmpl-{ident}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text, "refusal": None},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage,
        "system_fingerprint": "fp_prefixkit_testing",
    }


def completion(model: str, ident: str, usage: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A ``text_completion`` (id ``cmpl-<ident>``)."""
    return {
        "id": f"cmpl-{ident}",
        "object": "text_completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": reply.text,
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def response_object(model: str, ident: str, usage: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A completed ``response`` (id ``resp_<ident>``, its message ``msg_<ident>``)."""
    return {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": f"msg_{ident}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def _chunks(
    body: dict[str, Any], usage: dict[str, Any], base: dict[str, Any], choices: list[dict[str, Any]]
) -> list[Event]:
    """Stream chunks of Chat or Completions: `choices` one per chunk, then the usage chunk
    when the request asked for it (``stream_options.include_usage``), then ``[DONE]``."""
    events: list[Event] = [(None, {**base, "choices": [choice]}) for choice in choices]
    stream_options = body.get("stream_options") or {}
    if isinstance(stream_options, dict) and stream_options.get("include_usage"):
        events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return events


def chat_events(
    body: dict[str, Any], ident: str, usage: dict[str, Any], reply: Reply
) -> list[Event]:
    """The ``chat.completion.chunk`` stream of a Chat Completions request `body`."""
    base = {
        "id": f"chatcmpl-{ident}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": body["model"],
    }
    choices: list[dict[str, Any]] = [{"index": 0, "delta": {"role": "assistant", "content": ""}}]
    choices += [{"index": 0, "delta": {"content": piece}} for piece in reply.pieces]
    choices.append({"index": 0, "delta": {}, "finish_reason": reply.finish_reason})
    return _chunks(body, usage, base, choices)


def completion_events(
    body: dict[str, Any], ident: str, usage: dict[str, Any], reply: Reply
) -> list[Event]:
    """The ``text_completion`` stream of a Completions request `body`."""
    base = {
        "id": f"cmpl-{ident}",
        "object": "text_completion",
        "created": CREATED,
        "model": body["model"],
    }
    choices: list[dict[str, Any]] = [
        {"index": 0, "text": piece, "finish_reason": None, "logprobs": None}
        for piece in reply.pieces
    ]
    choices.append({"index": 0, "text": "", "finish_reason": reply.finish_reason, "logprobs": None})
    return _chunks(body, usage, base, choices)


def responses_events(response: dict[str, Any], reply: Reply) -> list[Event]:
    """The stream of a Responses request answered by `response`: created, in progress,
    the message item and its text part added, the deltas, done events, completed."""
    item = response["output"][0]
    where = {"item_id": item["id"], "output_index": 0}
    empty_part = {"type": "output_text", "text": "", "annotations": []}
    in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": in_progress},
        {"type": "response.in_progress", "response": in_progress},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **where, "content_index": 0, "part": empty_part},
    ]
    events += [
        {
            "type": "response.output_text.delta",
            **where,
            "content_index": 0,
            "delta": piece,
            "logprobs": [],
        }
        for piece in reply.pieces
    ]
    events += [
        {
            "type": "response.output_text.done",
            **where,
            "content_index": 0,
            "text": reply.text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            **where,
            "content_index": 0,
            "part": item["content"][0],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]
    return [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]


def sse(events: Sequence[Event]) -> list[bytes]:
    """`events` as server-sent events, one ``bytes`` each (a blank line ends each)."""
    encoded = []
    for name, data in events:
        line = f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        encoded.append((f"event: {name}\n" if name is not None else "").encode() + line.encode())
    return encoded
