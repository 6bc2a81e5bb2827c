"""A chat app that shows every reply while it streams runs its tool loop with `on_text`:
each request streams through the client's streaming method, text deltas reach the app as
they arrive, and the loop sends exactly what the unstreamed loop sends (apart from the
stream itself) and reads the same cache statistics. A Responses stream that ends
incomplete (max_output_tokens) still has its response and usage."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx2
import openai
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncOpenAIClient,
    LoopResult,
    OpenAIClient,
    arun_tool_loop,
    run_tool_loop,
)
from prefixkit.testing.providers import MockProvider

from .anthropic_tool_answers import ScriptedAnthropic, by_step
from .openai_tool_answers import ToolCallingProvider
from .prompts import support_prompt

QUESTION = "Why was I charged twice in March?"
STREAM_FIELDS = {"stream", "stream_options"}


def lookup_invoice(invoice_id: str) -> str:
    return f"{invoice_id}: 42.00 EUR, paid twice on 2026-03-03"


def anthropic_loop(on_text: Any) -> tuple[LoopResult, MockProvider]:
    mock = MockProvider()
    turn: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "lookup_invoice",
            "input": {"invoice_id": "INV-1"},
        },
    ]
    with ScriptedAnthropic(mock, by_step(turn)).client() as raw:
        result = run_tool_loop(
            AnthropicClient(raw),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model="claude-sonnet-5",
            max_tokens=512,
            on_text=on_text,
        )
    return result, mock


def openai_loop(api: Any, on_text: Any) -> tuple[LoopResult, MockProvider]:
    provider = ToolCallingProvider(MockProvider(), calls=2)
    with provider.openai_client() as raw:
        result = run_tool_loop(
            OpenAIClient(raw),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model="gpt-5.6-sol",
            api=api,
            on_text=on_text,
        )
    return result, provider.mock


def loop(kind: str, on_text: Any) -> tuple[LoopResult, MockProvider]:
    return anthropic_loop(on_text) if kind == "anthropic" else openai_loop(kind, on_text)


def unstreamed(mock: MockProvider) -> list[dict[str, Any]]:
    """The requests without their stream fields (and the item ids of the scripted answers,
    which the test double names differently when it streams)."""
    return [
        json.loads(
            re.sub(
                r'"id": "fc_\w+"',
                '"id": "fc"',
                json.dumps({k: v for k, v in r.body.items() if k not in STREAM_FIELDS}),
            )
        )
        for r in mock.requests
        if r.body and not r.path.endswith("/count_tokens")
    ]


KINDS = ["anthropic", "chat", "responses"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_streamed_loop_sends_what_the_unstreamed_loop_sends(kind: str) -> None:
    pieces: list[str] = []
    streamed, streamed_mock = loop(kind, pieces.append)
    whole, whole_mock = loop(kind, None)
    assert all(r.body and r.body.get("stream") for r in streamed_mock.requests if r.body)
    assert unstreamed(streamed_mock) == unstreamed(whole_mock)
    assert streamed.stopped == whole.stopped == "answer"
    assert [t.tool_calls for t in streamed.turns] == [t.tool_calls for t in whole.turns]
    for result in (streamed, whole):
        prompts = [t.stats.input_tokens for t in result.turns]
        cached = [t.stats.cached_tokens for t in result.turns]
        assert cached[0] == 0
        for before, now in zip(prompts, cached[1:], strict=False):
            assert now >= 0.95 * before, (prompts, cached)


@pytest.mark.parametrize("kind", KINDS)
def test_the_app_sees_every_replys_text_as_it_streams(kind: str) -> None:
    pieces: list[str] = []
    result, _ = loop(kind, pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == "".join(turn.text for turn in result.turns)
    assert result.text and "".join(pieces).endswith(result.text)


def test_an_async_loop_streams_with_on_text() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)
    pieces: list[str] = []

    async def run() -> LoopResult:
        async with provider.async_openai_client() as raw:
            return await arun_tool_loop(
                AsyncOpenAIClient(raw),
                support_prompt(QUESTION),
                {"lookup_invoice": lookup_invoice},
                model="gpt-5.6-sol",
                on_text=pieces.append,
            )

    result = asyncio.run(run())
    assert result.stopped == "answer" and "".join(pieces) == result.text
    assert [r.body["stream"] for r in provider.mock.requests if r.body] == [True, True]


def test_a_stream_that_ends_incomplete_keeps_its_response_and_usage() -> None:
    mock = MockProvider()

    def incomplete(request: httpx2.Request) -> httpx2.Response:
        answer = mock.handle(request)
        content = answer.content.decode()
        content = content.replace('"response.completed"', '"response.incomplete"').replace(
            '"status": "completed"', '"status": "incomplete"'
        )
        return httpx2.Response(200, headers=answer.headers, content=content.encode())

    http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(incomplete))
    with openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0) as raw:
        streamed = OpenAIClient(raw).stream_responses(
            support_prompt(QUESTION), model="gpt-5.6-sol", max_output_tokens=16
        )
    assert streamed.response is not None and streamed.response.status == "incomplete"
    assert streamed.stats.input_tokens > 0
    assert json.loads(mock.requests[-1].content)["max_output_tokens"] == 16
