"""A research assistant on Anthropic that reads a PDF the user attached (a `document` block
with citations), fans out twelve knowledge-base searches at once, gets `search_result`
blocks (citations enabled) and a chart image back in the tool results, answers with cited
text, then takes a follow-up question with `LoopResult.next_question`. What such a user
expects: each request reads the previous one from the cache although a turn adds more
than 20 blocks (Anthropic's read looks back at most 20 blocks from a breakpoint), at most
4 breakpoints, the cited answer goes back as the anthropic SDK sends its own message, and
the document, images and search results reach the API unchanged."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable
from typing import Any

import anthropic
from prefixkit.sdk import (
    AnthropicClient,
    Image,
    LoopResult,
    Native,
    Prompt,
    Segment,
    Text,
    run_tool_loop,
)
from prefixkit.testing.providers import MockProvider

from .anthropic_tool_answers import ScriptedAnthropic
from .prompts import LONG_INSTRUCTIONS

MODEL = "claude-sonnet-5"
FAN_OUT = 12
PDF = base64.b64encode(b"%PDF-1.7 quarterly report: revenue 12.4M, churn 3.1%").decode()
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n chart of churn by month").decode()
TOOLS = [
    {
        "name": "search_kb",
        "description": "Search the knowledge base; returns passages with their sources.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
    {
        "name": "churn_chart",
        "description": "A chart of churn by month, as an image.",
        "input_schema": {"type": "object", "properties": {}},
    },
]
TOPICS = ["pricing", "churn", "support", "onboarding", "billing", "sla"]


def cited_answer(turn: int) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": f"Answer {turn}: ", "citations": None},
        {
            "type": "text",
            "text": "churn fell to 3.1%",
            "citations": [
                {
                    "type": "search_result_location",
                    "cited_text": "Churn fell to 3.1% in Q3.",
                    "search_result_index": 1,
                    "source": "kb://churn/0",
                    "title": "churn 0",
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        },
    ]


def fan_out(turn: int) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = [
        {
            "type": "tool_use",
            "id": f"toolu_{turn}_{n}",
            "name": "search_kb",
            "input": {"query": f"{TOPICS[n % len(TOPICS)]} q{turn}-{n}"},
        }
        for n in range(FAN_OUT - 1)
    ]
    calls.append(
        {"type": "tool_use", "id": f"toolu_{turn}_chart", "name": "churn_chart", "input": {}}
    )
    return [{"type": "text", "text": "Searching.", "citations": None}, *calls]


def script(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Each question: one fan-out, then a cited answer."""
    assistant = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return fan_out(assistant) if assistant % 2 == 0 else cited_answer(assistant)


def search_result(topic: str, n: int) -> dict[str, Any]:
    return {
        "type": "search_result",
        "source": f"kb://{topic}/{n}",
        "title": f"{topic} {n}",
        "content": [{"type": "text", "text": f"{topic.title()} passage {n}: " + "detail " * 40}],
        "citations": {"enabled": True},
    }


def search_kb(query: str) -> list[Native]:
    """Anthropic's own search_result blocks (citations enabled), sent back as blocks."""
    topic = query.split()[0]
    return [Native(search_result(topic, n), "anthropic") for n in range(2)]


def churn_chart() -> tuple[Image, Text]:
    """A portable image and its caption."""
    return Image(data=PNG, media_type="image/png"), Text("Churn by month, Jan-Sep.")


def first_prompt() -> Prompt:
    return Prompt(
        tools=TOOLS,
        system=[Segment.static(LONG_INSTRUCTIONS, name="analyst")],
        messages=[
            Segment.dynamic(
                [
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                        "title": "Q3 report",
                        "citations": {"enabled": True},
                    },
                    {"type": "text", "text": "Why did churn fall in Q3? Check the knowledge base."},
                ]
            )
        ],
    )


def research() -> tuple[list[LoopResult], MockProvider]:
    mock = MockProvider()
    tools: dict[str, Callable[..., Any]] = {"search_kb": search_kb, "churn_chart": churn_chart}
    with ScriptedAnthropic(mock, script).client() as raw:
        client = AnthropicClient(raw)
        first = run_tool_loop(client, first_prompt(), tools, model=MODEL, max_tokens=2048)
        follow = first.next_question("And what does that mean for Q4 revenue?")
        second = run_tool_loop(client, follow, tools, model=MODEL, max_tokens=2048)
    return [first, second], mock


def bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.path.endswith("/v1/messages") and r.body]


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def test_each_question_takes_a_fan_out_then_a_cited_answer() -> None:
    results, mock = research()
    assert [r.stopped for r in results] == ["answer", "answer"]
    assert [len(t.tool_calls) for r in results for t in r.turns] == [FAN_OUT, 0, FAN_OUT, 0]
    assert results[1].text.startswith("Answer 3:")
    assert len(bodies(mock)) == 4


def test_a_turn_adds_more_blocks_than_one_lookback_window() -> None:
    _, mock = research()
    first, second = bodies(mock)[:2]
    added = sum(len(m["content"]) for m in second["messages"][len(first["messages"]) - 1 :])
    assert added > 20


def test_each_request_reads_the_previous_one_from_the_cache() -> None:
    results, _ = research()
    turns = [t for r in results for t in r.turns]
    prompts = [t.stats.input_tokens for t in turns]
    cached = [t.stats.cached_tokens for t in turns]
    assert cached[0] == 0
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.9 * before, (prompts, cached)


def test_breakpoints_stay_within_four() -> None:
    _, mock = research()
    for body in bodies(mock):
        assert 1 <= json.dumps(body).count('"cache_control"') <= 4


def test_each_request_is_the_previous_one_plus_the_new_turn() -> None:
    _, mock = research()
    for before, after in itertools.pairwise(bodies(mock)):
        assert json.dumps(unmarked(after["system"])) == json.dumps(unmarked(before["system"]))
        old = [json.dumps(unmarked(m)) for m in before["messages"]]
        assert [json.dumps(unmarked(m)) for m in after["messages"]][: len(old)] == old


def test_the_cited_answer_goes_back_as_the_anthropic_sdk_sends_its_own_message() -> None:
    """The oracle: the official client given the parsed message's content itself."""
    _, mock = research()
    message = bodies(mock)[-1]["messages"][3]
    assert message["role"] == "assistant"
    parsed = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": cited_answer(1),
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    oracle = MockProvider()
    with oracle.anthropic_client() as client:
        client.messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": parsed.content},
            ],
        )
    assert unmarked(message) == oracle.body["messages"][1]


def test_document_images_and_search_results_reach_the_api_unchanged() -> None:
    _, mock = research()
    last = bodies(mock)[-1]["messages"]
    assert unmarked(last[0]["content"][0]) == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "Q3 report",
        "citations": {"enabled": True},
    }
    results = [
        b for m in last if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"
    ]
    chart = [unmarked(b["content"]) for b in results if b["tool_use_id"].endswith("_chart")]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    caption = {"type": "text", "text": "Churn by month, Jan-Sep."}
    assert chart == [[image, caption], [image, caption]]
    searches = [unmarked(b["content"]) for b in results if not b["tool_use_id"].endswith("_chart")]
    assert searches[0] == [search_result("pricing", 0), search_result("pricing", 1)]
    assert all(b.get("is_error") is not True for b in results)
