"""The provider mock answering OpenAI requests with tool calls (the mock itself always
answers with text): each Chat or Responses answer of the `MockProvider` (its usage
simulated, its request recorded) is rewritten into one call of `name`, whole or streamed,
for the first `calls` requests."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
from prefixkit.testing.openai_answers import Event, sse
from prefixkit.testing.providers import MockProvider


class ToolCallingProvider:
    """`mock`, whose first `calls` Chat/Responses answers are a call of tool `name`.

    `reasoning`: Responses answers start with an encrypted reasoning item (what a
    reasoning model sends back with `include=["reasoning.encrypted_content"]`).
    """

    def __init__(
        self,
        mock: MockProvider,
        *,
        calls: int,
        name: str = "lookup_invoice",
        reasoning: bool = False,
    ) -> None:
        self.mock = mock
        self.left = calls
        self.name = name
        self.reasoning = reasoning
        self.answered = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        answer = self.mock.handle(request)
        path = request.url.path
        if answer.status_code != 200 or self.left == 0:
            return answer
        if not path.endswith(("/chat/completions", "/responses")):
            return answer
        self.left -= 1
        self.answered += 1
        call_id = f"call_{self.answered}"
        arguments = json.dumps({"invoice_id": f"INV-{self.answered}"})
        headers = {"x-request-id": answer.headers.get("x-request-id", "req")}
        if answer.headers.get("content-type", "").startswith("text/event-stream"):
            if path.endswith("/chat/completions"):
                events = _chat_call_events(answer.content, call_id, self.name, arguments)
            else:
                events = _responses_call_events(answer.content, call_id, self.name, arguments)
            return httpx2.Response(
                200,
                headers={**headers, "content-type": "text/event-stream"},
                content=b"".join(sse(events)),
            )
        body = json.loads(answer.content)
        if path.endswith("/chat/completions"):
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": self.name, "arguments": arguments},
            }
            body["choices"][0]["message"] = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [call],
            }
            body["choices"][0]["finish_reason"] = "tool_calls"
        else:
            output: list[dict[str, Any]] = []
            if self.reasoning:
                output.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{self.answered}",
                        "summary": [],
                        "encrypted_content": f"gAAAA-encrypted-{self.answered}",
                    }
                )
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{self.answered}",
                    "call_id": call_id,
                    "name": self.name,
                    "arguments": arguments,
                    "status": "completed",
                }
            )
            body["output"] = output
        return httpx2.Response(200, json=body, headers=headers)

    def openai_client(self, **options: Any) -> openai.OpenAI:
        http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(self.handle))
        return openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0, **options)

    def async_openai_client(self, **options: Any) -> openai.AsyncOpenAI:
        http = openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(self.handle))
        return openai.AsyncOpenAI(api_key="sk-test", http_client=http, max_retries=0, **options)


def _chat_call_events(content: bytes, call_id: str, name: str, arguments: str) -> list[Event]:
    """The mock's chat stream with its text chunks replaced by one streamed tool call."""
    chunks = [
        json.loads(line[len("data: ") :])
        for line in content.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    base = {k: v for k, v in chunks[0].items() if k != "choices"}
    usage = [chunk for chunk in chunks if chunk.get("usage")]
    opening = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ],
    }
    half = len(arguments) // 2
    deltas = [opening] + [
        {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        for piece in (arguments[:half], arguments[half:])
    ]
    events: list[Event] = [
        (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        for delta in deltas
    ]
    events.append(
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    )
    events += [(None, chunk) for chunk in usage]
    events.append((None, "[DONE]"))
    return events


def _responses_call_events(content: bytes, call_id: str, name: str, arguments: str) -> list[Event]:
    """The mock's Responses stream answered instead by one streamed function call."""
    completed = next(
        json.loads(line[len("data: ") :])
        for line in content.decode().splitlines()
        if line.startswith("data: ") and '"response.completed"' in line
    )
    response = completed["response"]
    item = {
        "type": "function_call",
        "id": "fc_stream",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
    where = {"item_id": item["id"], "output_index": 0}
    in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": in_progress},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"},
        },
        {"type": "response.function_call_arguments.delta", **where, "delta": arguments},
        {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {**response, "output": [item]}},
    ]
    return [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]
