"""The providers' HTTP APIs as a recording httpx2 MockTransport handler.

anthropic 2.11 and openai 3.52 are built on `httpx2` (the successor of httpx),
so the mock transport is `httpx2.MockTransport`. `Wire` records every request
body and answers like the real API: JSON bodies with realistic usage, or the
server-sent events of a stream (Anthropic `message_start` ... `message_stop`,
OpenAI chat chunks with a final usage chunk, Responses events ending in
`response.completed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2
from prefixkit.sdk import Prompt, Segment

ANTHROPIC_USAGE: dict[str, Any] = {
    "input_tokens": 21,
    "output_tokens": 64,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 3584,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "service_tier": "standard",
}
CHAT_USAGE: dict[str, Any] = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
RESPONSES_USAGE: dict[str, Any] = {
    "input_tokens": 2006,
    "input_tokens_details": {
        "cached_tokens": 1792,
        "cache_write_tokens": 128,
        "cache_write_tokens_details": {"ttl_30m_tokens": 128, "ttl_12h_tokens": 0},
    },
    "output_tokens": 300,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 2306,
}


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def anthropic_message(
    usage: dict[str, Any], text: str = "Egress costs $0.09/GB."
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def chat_completion(usage: dict[str, Any], text: str = "Egress costs $0.09/GB.") -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1763700000,
        "model": "gpt-5.6-sol",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
        "system_fingerprint": "fp_44709d6fcb",
    }


def response_object(usage: dict[str, Any], text: str = "Egress costs $0.09/GB.") -> dict[str, Any]:
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1763700000,
        "status": "completed",
        "model": "gpt-5.6-sol",
        "output": [
            {
                "type": "message",
                "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


@dataclass
class Wire:
    """A recording fake of the providers' HTTP APIs (one instance per test)."""

    anthropic_usage: dict[str, Any] = field(default_factory=lambda: dict(ANTHROPIC_USAGE))
    chat_usage: dict[str, Any] = field(default_factory=lambda: dict(CHAT_USAGE))
    responses_usage: dict[str, Any] = field(default_factory=lambda: dict(RESPONSES_USAGE))
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @property
    def body(self) -> dict[str, Any]:
        """The last request body."""
        return self.bodies[-1]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.paths.append(request.url.path)
        path = request.url.path
        stream = bool(body.get("stream"))
        if path.endswith("/messages"):
            if stream:
                return self._stream(self._anthropic_events())
            return httpx2.Response(200, json=anthropic_message(self.anthropic_usage))
        if path.endswith("/chat/completions"):
            if stream:
                return self._stream(self._chat_events(body))
            return httpx2.Response(200, json=chat_completion(self.chat_usage))
        if path.endswith("/responses"):
            if stream:
                return self._stream(self._responses_events())
            return httpx2.Response(200, json=response_object(self.responses_usage))
        if path.endswith("/completions"):
            completion = chat_completion(self.chat_usage)
            completion.update(
                object="text_completion",
                choices=[{"index": 0, "text": "ok", "finish_reason": "stop", "logprobs": None}],
            )
            return httpx2.Response(200, json=completion)
        return httpx2.Response(404, json={"error": {"message": f"no route {path}"}})

    @staticmethod
    def _stream(payload: bytes) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=payload)

    def _anthropic_events(self) -> bytes:
        start = anthropic_message({**self.anthropic_usage, "output_tokens": 1}, "")
        start["content"] = []
        start["stop_reason"] = None
        return _sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Egress costs "},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "$0.09/GB."},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": self.anthropic_usage["output_tokens"]},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    def _chat_events(self, body: dict[str, Any]) -> bytes:
        base = {
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 1763700000,
            "model": body["model"],
        }
        chunks: list[tuple[str | None, dict[str, Any] | str]] = [
            (
                None,
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            ),
            (None, {**base, "choices": [{"index": 0, "delta": {"content": "Egress costs "}}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {"content": "$0.09/GB."}}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ]
        if body.get("stream_options", {}).get("include_usage"):
            chunks.append((None, {**base, "choices": [], "usage": self.chat_usage}))
        chunks.append((None, "[DONE]"))
        return _sse(chunks)

    def _responses_events(self) -> bytes:
        final = response_object(self.responses_usage)
        created = {**final, "status": "in_progress", "output": [], "usage": None}
        return _sse(
            [
                (
                    "response.created",
                    {"type": "response.created", "sequence_number": 0, "response": created},
                ),
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": 1,
                        "item_id": "msg_1",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": "Egress costs ",
                        "logprobs": [],
                    },
                ),
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": 2,
                        "item_id": "msg_1",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": "$0.09/GB.",
                        "logprobs": [],
                    },
                ),
                (
                    "response.completed",
                    {"type": "response.completed", "sequence_number": 3, "response": final},
                ),
            ]
        )


LONG_INSTRUCTIONS = (
    "You are the support assistant of Nimbus Storage. Answer from the price list and the "
    "documents only, show the arithmetic, quote the relevant line, and never invent a limit "
    "or a command. "
) * 60


def support_prompt(question: str = "How much is 500 GB of egress?") -> Prompt:
    """A realistic layout: a tool, long static instructions, a versioned policy, a document."""
    return Prompt(
        tools=[
            {
                "name": "lookup_invoice",
                "description": "Fetch an invoice by id.",
                "input_schema": {
                    "type": "object",
                    "properties": {"invoice_id": {"type": "string"}},
                    "required": ["invoice_id"],
                },
            }
        ],
        system=[
            Segment.static(LONG_INSTRUCTIONS, name="instructions"),
            Segment.versioned("Refund policy: refunds within 30 days.", version="3", name="policy"),
        ],
        context=["Price list: egress $0.09/GB, storage $0.02/GB-month."],
        messages=[Segment.dynamic(question)],
        name="support",
    )
