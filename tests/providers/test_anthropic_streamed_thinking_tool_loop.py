"""An Anthropic agent that streams every turn with extended thinking: the app renders each
request with `render_anthropic`, streams it with the official client's `messages.stream`,
feeds `get_final_message()` back with `Prompt.next_turn`, and answers the model's parallel
tool calls. What such a user expects: each request is the previous one plus the new turn,
the thinking blocks go back exactly as streamed (signature included) and never carry a
marker, the thinking and tool_choice parameters never change, at most 4 breakpoints, the
results of parallel calls in one user turn in call order, and each turn reads the previous
request from the cache."""

from __future__ import annotations

import itertools
import json
from typing import Any

from prefixkit.sdk import CacheStats, Prompt, Segment, ToolResult, render_anthropic
from prefixkit.testing.providers import MockProvider

from .anthropic_tool_answers import ScriptedAnthropic, by_step
from .prompts import LONG_INSTRUCTIONS

MODEL = "claude-sonnet-5"
THINKING = {"type": "enabled", "budget_tokens": 2048}
TOOL_CHOICE = {"type": "auto", "disable_parallel_tool_use": False}
TOOLS = [
    {
        "name": "search_flights",
        "description": "Flights between two airports on a date.",
        "input_schema": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "date": {"type": "string", "format": "date"},
            },
            "required": ["origin", "destination", "date"],
        },
    },
    {
        "name": "get_weather",
        "description": "Forecast for a city on a date.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "date": {"type": "string"}},
            "required": ["city", "date"],
        },
    },
    {
        "name": "hold_seat",
        "description": "Hold a seat on a flight for 20 minutes.",
        "input_schema": {
            "type": "object",
            "properties": {"flight": {"type": "string"}},
            "required": ["flight"],
        },
    },
]


def thinking(n: int) -> dict[str, Any]:
    return {
        "type": "thinking",
        "thinking": f"Step {n}: weigh price, time, weather.",
        "signature": f"EqQBCkYIBxgCKkB{n}sig==",
    }


SCRIPT = by_step(
    [
        thinking(1),
        {"type": "text", "text": "Let me look up flights and the weather."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "search_flights",
            "input": {"origin": "LIS", "destination": "OSL", "date": "2026-12-04"},
        },
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "get_weather",
            "input": {"city": "Oslo", "date": "2026-12-04"},
        },
    ],
    [
        thinking(2),
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"},
        {"type": "tool_use", "id": "toolu_03", "name": "hold_seat", "input": {"flight": "TP1254"}},
    ],
    [thinking(3), {"type": "text", "text": "Held TP1254 at 07:10; pack for -4 C and snow."}],
)


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    answers = {
        "search_flights": [{"flight": "TP1254", "departs": "07:10", "eur": 212}],
        "get_weather": {"celsius": -4, "sky": "snow"},
        "hold_seat": {"held": arguments.get("flight"), "minutes": 20},
    }
    return json.dumps(answers[name])


def streamed_loop() -> tuple[list[CacheStats], list[Any], MockProvider]:
    """The app: stream each turn, answer its tool calls, until an answer."""
    mock = MockProvider()
    prompt = Prompt(
        tools=TOOLS,
        system=[Segment.static(LONG_INSTRUCTIONS, name="travel")],
        messages=[Segment.dynamic("Find me a morning flight Lisbon-Oslo on 4 Dec and hold it.")],
    )
    stats: list[CacheStats] = []
    messages: list[Any] = []
    with ScriptedAnthropic(mock, SCRIPT).client() as client:
        for _ in range(5):
            request = render_anthropic(
                prompt, model=MODEL, max_tokens=8192, thinking=THINKING, tool_choice=TOOL_CHOICE
            )
            with client.messages.stream(**request) as stream:
                message = stream.get_final_message()
            messages.append(message)
            stats.append(CacheStats.from_usage(message.usage, model=MODEL))
            results = [
                ToolResult(block.id, run_tool(block.name, dict(block.input)))
                for block in message.content
                if block.type == "tool_use"
            ]
            prompt = prompt.next_turn(message, Segment.session(results) if results else None)
            if message.stop_reason != "tool_use":
                break
    return stats, messages, mock


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.path.endswith("/messages") and r.body]


def test_the_loop_streams_three_turns_and_ends_on_the_answer() -> None:
    _, messages, _ = streamed_loop()
    assert [m.stop_reason for m in messages] == ["tool_use", "tool_use", "end_turn"]
    assert messages[-1].content[-1].type == "text"


def test_each_request_is_the_previous_one_plus_the_new_turn() -> None:
    _, _, mock = streamed_loop()
    sent = bodies(mock)
    for before, after in itertools.pairwise(sent):
        assert json.dumps(unmarked(after["tools"])) == json.dumps(unmarked(before["tools"]))
        assert json.dumps(unmarked(after["system"])) == json.dumps(unmarked(before["system"]))
        old = [json.dumps(unmarked(m)) for m in before["messages"]]
        assert [json.dumps(unmarked(m)) for m in after["messages"]][: len(old)] == old


def test_thinking_blocks_go_back_exactly_as_streamed_and_unmarked() -> None:
    _, messages, mock = streamed_loop()
    last = bodies(mock)[-1]
    assistant = [m["content"] for m in last["messages"] if m["role"] == "assistant"]
    streamed = [[block.to_dict() for block in message.content] for message in messages[:2]]
    for sent_blocks, blocks in zip(assistant, streamed, strict=True):
        sent_thinking = [b for b in sent_blocks if "thinking" in b["type"]]
        assert sent_thinking == [b for b in blocks if "thinking" in b["type"]]
        assert all("cache_control" not in b for b in sent_thinking)
    assert assistant[1][1] == {
        "type": "redacted_thinking",
        "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw",
    }


def test_assistant_turns_go_back_as_the_anthropic_sdk_sends_its_own_message() -> None:
    """The oracle: the official client given `message.content` itself."""
    _, messages, mock = streamed_loop()
    prefixkit_sent = [m for m in bodies(mock)[-1]["messages"] if m["role"] == "assistant"]
    oracle = MockProvider()
    with oracle.anthropic_client() as client:
        for message in messages[:2]:
            client.messages.create(
                model=MODEL,
                max_tokens=16,
                messages=[
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": message.content},
                ],
            )
    sdk_sent = [body["messages"][1] for body in oracle.bodies if body]
    assert [unmarked(m) for m in prefixkit_sent] == sdk_sent


def test_thinking_and_tool_choice_are_the_same_in_every_request() -> None:
    _, _, mock = streamed_loop()
    sent = bodies(mock)
    assert len(sent) == 3
    assert all(b["thinking"] == THINKING and b["tool_choice"] == TOOL_CHOICE for b in sent)


def test_breakpoints_stay_within_four_and_off_thinking_blocks() -> None:
    _, _, mock = streamed_loop()
    for body in bodies(mock):
        marked = [
            block
            for part in (body["tools"], body["system"], *(m["content"] for m in body["messages"]))
            if isinstance(part, list)
            for block in part
            if "cache_control" in block
        ]
        assert 1 <= len(marked) <= 4
        assert not [b for b in marked if "thinking" in b.get("type", "")]


def test_parallel_results_go_back_in_one_user_turn_in_call_order() -> None:
    _, _, mock = streamed_loop()
    second = bodies(mock)[1]["messages"]
    results = second[-1]["content"]
    assert second[-1]["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "toolu_01"),
        ("tool_result", "toolu_02"),
    ]
    assert "TP1254" in json.dumps(results[0]) and "snow" in json.dumps(results[1])


def test_each_turn_reads_the_previous_request_from_the_cache() -> None:
    stats, _, _ = streamed_loop()
    prompts = [s.input_tokens for s in stats]
    assert stats[0].cached_tokens == 0 and stats[0].written_tokens > 0
    for before, now in zip(prompts, stats[1:], strict=False):
        assert now.cached_tokens >= 0.9 * before, (prompts, [s.cached_tokens for s in stats])


def test_cache_stats_read_the_streamed_usage_and_price_the_reads_below_the_uncached_cost() -> None:
    stats, messages, _ = streamed_loop()
    for turn, message in zip(stats, messages, strict=True):
        usage = message.usage
        assert turn.cached_tokens == usage.cache_read_input_tokens
        assert turn.written_tokens == usage.cache_creation_input_tokens
        assert turn.input_tokens == (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
    for turn in stats[1:]:
        assert turn.cost_usd is not None and turn.cost_without_cache_usd is not None
        assert turn.cost_usd < 0.5 * turn.cost_without_cache_usd
