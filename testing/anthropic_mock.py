"""The Anthropic half of `prefixkit.testing.providers.MockProvider`: Messages and token
counting, with Anthropic's prompt caching simulated (see that module's docstring)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prefixkit.sdk import model_info, provider_limits

from .mock_bodies import (
    UNKNOWN_MODEL_MIN_TOKENS,
    Answer,
    _BadRequest,
    _counter,
    _digest,
    _optional_list,
    _pieces,
    _require,
    _streamed,
)
from .openai_answers import Event

__all__ = ["ANTHROPIC_USAGE", "AnthropicMock"]

ANTHROPIC_USAGE: dict[str, Any] = {
    "input_tokens": 21,
    "output_tokens": 64,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 3584,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "service_tier": "standard",
}
"""A Messages usage payload: a 3,584-token cache read, nothing written."""


class AnthropicMock:
    """The mock's Anthropic Messages routes (a part of `MockProvider`)."""

    anthropic_usage: Mapping[str, Any] | None
    reply: str
    _anthropic_entries: set[str]

    def _messages(self, body: dict[str, Any], number: int) -> Answer:
        _require(body, "max_tokens", int)
        stream = _streamed(body)
        prompt = _anthropic_prompt(body)
        if self.anthropic_usage is not None:
            usage = copy.deepcopy(dict(self.anthropic_usage))
        else:
            usage = self._anthropic_cache(prompt)
            usage["output_tokens"] = _counter().count(self.reply)
        message = _anthropic_message(body["model"], number, usage, self.reply)
        return _anthropic_events(message, self.reply) if stream else message

    def _count_tokens(self, body: dict[str, Any], number: int) -> Answer:
        return {"input_tokens": sum(_anthropic_prompt(body).counts)}

    def _anthropic_cache(self, prompt: _AnthropicPrompt) -> dict[str, Any]:
        limits = provider_limits("anthropic")
        lookback = limits.lookback_blocks or 20
        info = model_info("anthropic", prompt.model)
        minimum = (info.min_cache_tokens if info else None) or UNKNOWN_MODEL_MIN_TOKENS
        ends = [sum(prompt.counts[: i + 1]) for i in range(len(prompt.counts))]
        read_end = -1
        for end, _ in prompt.marks:
            for candidate in range(end, max(end - lookback, -1), -1):
                if prompt.digests[candidate] in self._anthropic_entries:
                    read_end = max(read_end, candidate)
                    break
        written = {"5m": 0, "1h": 0}
        last_written = read_end
        for end, ttl in prompt.marks:
            if end > last_written and ends[end] >= minimum:
                written[ttl] += ends[end] - (ends[last_written] if last_written >= 0 else 0)
                self._anthropic_entries.add(prompt.digests[end])
                last_written = end
        cached = ends[read_end] if read_end >= 0 else 0
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": (ends[-1] if ends else 0) - cached - creation,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": creation,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }


@dataclass(frozen=True)
class _AnthropicPrompt:
    """A Messages request as cacheable blocks in prefix order (tools, system, messages)."""

    model: str
    texts: list[str]
    counts: list[int]
    digests: list[str]  # digests[i] identifies the prefix ending with block i
    marks: list[tuple[int, str]]  # (block index, ttl) of each breakpoint


def _anthropic_prompt(body: dict[str, Any]) -> _AnthropicPrompt:
    model = _require(body, "model", str)
    blocks: list[tuple[str, Any]] = []
    for index, tool in enumerate(_optional_list(body, "tools")):
        if not isinstance(tool, dict):
            raise _BadRequest(f"tools.{index}: expected an object", "tools")
        rest = {k: v for k, v in tool.items() if k != "cache_control"}
        blocks.append((json.dumps(rest), tool.get("cache_control")))
    system = body.get("system")
    system_blocks = (
        [{"type": "text", "text": system}]
        if isinstance(system, str)
        else _optional_list(body, "system")
    )
    for index, block in enumerate(system_blocks):
        blocks.append((_anthropic_text(block, f"system.{index}"), block.get("cache_control")))
    messages = _require(body, "messages", list)
    if not messages:
        raise _BadRequest("messages: at least one message is required", "messages")
    for m, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _BadRequest(f"messages.{m}: expected an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _BadRequest(f"messages.{m}.content: expected a string or a list", "messages")
        for b, block in enumerate(content):
            text = _anthropic_text(block, f"messages.{m}.content.{b}")
            blocks.append((message["role"] + ":" + text, block.get("cache_control")))
    limits = provider_limits("anthropic")
    marks: list[tuple[int, str]] = []
    for index, (_, marker) in enumerate(blocks):
        if marker is not None:
            marks.append((index, _ttl(marker, limits.ttls, limits.default_ttl)))
    if body.get("cache_control") is not None and blocks:
        marks.append(
            (len(blocks) - 1, _ttl(body["cache_control"], limits.ttls, limits.default_ttl))
        )
    if len(marks) > limits.max_breakpoints:
        raise _BadRequest(
            f"A maximum of {limits.max_breakpoints} blocks with cache_control may be "
            f"provided. Found {len(marks)}."
        )
    texts = [text for text, _ in blocks]
    digests: list[str] = []
    for text in texts:
        digests.append(_digest([model, digests[-1] if digests else "", text]))
    return _AnthropicPrompt(model, texts, [_counter().count(t) for t in texts], digests, marks)


def _anthropic_text(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _BadRequest(f"{where}: expected a content block with a type")
    if block["type"] == "text":
        if not isinstance(block.get("text"), str):
            raise _BadRequest(f"{where}.text: expected a string")
        text: str = block["text"]
        return text
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"})


def _ttl(marker: Any, ttls: tuple[str, ...], default: str) -> str:
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
        raise _BadRequest('cache_control: expected {"type": "ephemeral"} with an optional ttl')
    ttl = marker.get("ttl", default)
    if ttl not in ttls:
        raise _BadRequest(f"cache_control.ttl: expected one of {', '.join(ttls)}, got {ttl!r}")
    return str(ttl)


def _anthropic_message(model: str, number: int, usage: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"msg_mock{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _anthropic_events(message: dict[str, Any], text: str) -> list[Event]:
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
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
    for piece in _pieces(text):
        delta = {"type": "text_delta", "text": piece}
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": message["usage"].get("output_tokens", 0)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events
