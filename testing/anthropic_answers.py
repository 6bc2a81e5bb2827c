"""Anthropic Messages answers as vLLM's ``/v1/messages`` gives them, whole or as the
server-sent events of a stream, in the shapes the official ``anthropic`` client parses; and a
Messages request as the chat messages vLLM renders it from. Used by
`prefixkit.testing.fake_vllm`, which says what the model "said" (`Reply`) and what the prompt
cost (`anthropic_usage`).
"""

from __future__ import annotations

from typing import Any

from .openai_answers import Event, Reply

__all__ = [
    "anthropic_error",
    "anthropic_message",
    "anthropic_usage",
    "chat_messages",
    "message_events",
    "token_count",
]

_STOP_REASONS = {"length": "max_tokens", "stop": "end_turn", "tool_calls": "tool_use"}
_BILLING_HEADER = "x-anthropic-billing-header"  # vLLM drops it: it would defeat prefix caching


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a Messages request `body` as vLLM converts them: the top-level
    ``system`` (a string or text blocks) first as one system message, then each message with
    its text blocks."""
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(
            str(block.get("text", ""))
            for block in system
            if isinstance(block, dict)
            and block.get("type") == "text"
            and not str(block.get("text", "")).startswith(_BILLING_HEADER)
        )
    converted = [{"role": "system", "content": system}] if system else []
    return converted + [
        {"role": m.get("role"), "content": m.get("content")}
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]


def anthropic_usage(prompt: int, cached: int, created: int, output: int) -> dict[str, Any]:
    """vLLM's Messages ``usage``: of its `prompt` tokens, `cached` read from the prefix cache
    and `created` written to it; ``input_tokens`` is the rest (Anthropic counts the three
    apart)."""
    return {
        "input_tokens": max(0, prompt - cached - created),
        "output_tokens": output,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": cached,
    }


def anthropic_message(
    model: str, ident: str, usage: dict[str, Any], reply: Reply
) -> dict[str, Any]:
    """A whole ``message`` answer (id ``chatcmpl-<ident>``: vLLM keeps its chat id)."""
    return {
        "id": f"chatcmpl-{ident}",
        "type": "anthropic_message",
        "role": "assistant",
        "content": [{"type": "text", "text": reply.text}],
        "model": model,
        "stop_reason": _STOP_REASONS.get(reply.finish_reason),
        "usage": usage,
    }


def message_events(answer: dict[str, Any], reply: Reply) -> list[Event]:
    """The stream of a Messages request answered by `answer` as vLLM sends it:
    ``message_start`` (the prompt's usage), one text block started, its deltas and stopped,
    ``message_delta`` (the stop reason and the whole usage), ``message_stop``."""
    usage = answer["usage"]
    start = {
        **answer,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    events += [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            },
        )
        for piece in reply.pieces
    ]
    stop = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def token_count(tokens: int) -> dict[str, Any]:
    """The answer of ``/v1/messages/count_tokens`` for a prompt of `tokens`."""
    return {"input_tokens": tokens, "context_management": {"original_input_tokens": tokens}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """vLLM's error body on the Messages routes (Anthropic's shape)."""
    return {"type": "error", "error": {"type": kind, "message": message}}
