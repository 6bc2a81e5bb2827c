"""The provider mock answering Anthropic Messages requests with scripted content blocks (the
mock itself always answers with text): the `MockProvider` simulates the usage and records
the request, then the answer's content is replaced by what `script(body)` returns for that
request, whole or streamed as the Messages API streams it (thinking with its signature,
text, tool_use input as JSON deltas)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import httpx2
from prefixkit.testing.openai_answers import Event, sse
from prefixkit.testing.providers import MockProvider

Script = Callable[[dict[str, Any]], Sequence[dict[str, Any]] | None]
"""The content blocks answering a request body (None: the mock's own text answer)."""


def by_step(*turns: Sequence[dict[str, Any]]) -> Script:
    """Answer the request with `turns[n]`, n its assistant turns so far (one conversation);
    after the last, the mock's text."""

    def script(body: dict[str, Any]) -> Sequence[dict[str, Any]] | None:
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return turns[step] if step < len(turns) else None

    return script


class ScriptedAnthropic:
    """`mock`, whose Messages answers carry the blocks `script` gives for each request."""

    def __init__(self, mock: MockProvider, script: Script) -> None:
        self.mock = mock
        self.script = script

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        answer = self.mock.handle(request)
        if answer.status_code != 200 or not request.url.path.endswith("/messages"):
            return answer
        content = self.script(json.loads(request.content))
        if content is None:
            return answer
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        headers = {"request-id": answer.headers.get("request-id", "req")}
        if not answer.headers.get("content-type", "").startswith("text/event-stream"):
            body = json.loads(answer.content)
            body.update(content=list(content), stop_reason=stop)
            return httpx2.Response(200, json=body, headers=headers)
        events = _events(answer.content, content, stop)
        return httpx2.Response(
            200,
            headers={**headers, "content-type": "text/event-stream"},
            content=b"".join(sse(events)),
        )

    def client(self) -> anthropic.Anthropic:
        http = anthropic.DefaultHttpxClient(transport=httpx2.MockTransport(self.handle))
        return anthropic.Anthropic(api_key="sk-ant-test", http_client=http, max_retries=0)

    def async_client(self) -> anthropic.AsyncAnthropic:
        http = anthropic.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(self.handle))
        return anthropic.AsyncAnthropic(api_key="sk-ant-test", http_client=http, max_retries=0)


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    """A content block as its start, deltas and stop events."""
    kind = block["type"]
    start: dict[str, Any]
    deltas: list[dict[str, Any]]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    elif kind == "text":
        start = {"type": "text", "text": ""}
        half = len(block["text"]) // 2
        deltas = [
            {"type": "text_delta", "text": piece}
            for piece in (block["text"][:half], block["text"][half:])
        ]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        half = len(arguments) // 2
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in (arguments[:half], arguments[half:])
        ]
    else:  # redacted_thinking and other whole blocks
        start, deltas = block, []
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _events(streamed: bytes, content: Sequence[dict[str, Any]], stop: str) -> list[Event]:
    """The mock's stream (its `message_start` and usage kept) carrying `content` instead."""
    data = [
        json.loads(line[len("data: ") :])
        for line in streamed.decode().splitlines()
        if line.startswith("data: ")
    ]
    start = next(event for event in data if event["type"] == "message_start")
    delta = next(event for event in data if event["type"] == "message_delta")
    events: list[dict[str, Any]] = [start]
    for index, block in enumerate(content):
        events += _block_events(index, block)
    events.append({**delta, "delta": {"stop_reason": stop, "stop_sequence": None}})
    events.append({"type": "message_stop"})
    return [(event["type"], event) for event in events]
