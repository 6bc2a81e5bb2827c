"""A conversation that grows by tool turns keeps every earlier block byte-identical (cache
markers aside) for every API, so the previous request stays a prefix of the next."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.sdk import (
    Prompt,
    Segment,
    Text,
    ToolCall,
    ToolResult,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)

from .prompts import LONG_INSTRUCTIONS
from .test_content_blocks import WEATHER_TOOL, without_markers

words = st.text(alphabet="abcdefgh \t\u0301é", min_size=1, max_size=12).filter(str.strip)
arguments = st.dictionaries(st.sampled_from(["city", "day", "unit"]), words, max_size=3)
turn = st.tuples(st.lists(arguments, min_size=1, max_size=3), words, st.booleans())


def wire(prompt: Prompt, api: str) -> list[Any]:
    if api == "anthropic":
        kwargs: Any = render_anthropic(prompt, model="claude-sonnet-5", max_tokens=8)
        return list(kwargs["messages"])
    if api == "chat":
        return list(render_openai_chat(prompt, model="gpt-5.6-sol")["messages"])
    return list(render_openai_responses(prompt, model="gpt-5.6-sol")["input"])


@settings(max_examples=15)
@given(
    turns=st.lists(turn, min_size=1, max_size=4),
    api=st.sampled_from(["anthropic", "chat", "responses"]),
)
def test_tool_turns_keep_earlier_blocks_byte_identical(
    turns: list[tuple[list[dict[str, str]], str, bool]], api: str
) -> None:
    prompt = Prompt(
        tools=[WEATHER_TOOL], system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("Plan my trip.")]
    )
    before = wire(prompt, api)
    for number, (calls, note, with_text) in enumerate(turns):
        tool_calls = [
            ToolCall(f"call_{number}_{i}", "get_weather", args) for i, args in enumerate(calls)
        ]
        reply = [Text(note), *tool_calls] if with_text else tool_calls
        results = [ToolResult(call.id, f"{note} {i}") for i, call in enumerate(tool_calls)]
        prompt = prompt.next_turn(reply, results)
        after = wire(prompt, api)
        # Anthropic groups consecutive user blocks into one message: compare blocks then.
        old = [json.dumps(without_markers(item)) for item in _flat(before, api)]
        new = [json.dumps(without_markers(item)) for item in _flat(after, api)]
        assert new[: len(old)] == old
        before = after


def _flat(items: list[Any], api: str) -> list[Any]:
    if api != "anthropic":
        return items
    return [[m["role"], block] for m in items for block in m["content"]]


def _marked(item: Any) -> bool:
    parts = item.get("output") if item.get("type") == "function_call_output" else item["content"]
    return isinstance(parts, list) and any("prompt_cache_breakpoint" in part for part in parts)


@settings(max_examples=15)
@given(
    turns=st.lists(turn, min_size=1, max_size=5),
    api=st.sampled_from(["chat", "responses"]),
)
def test_explicit_tool_turns_mark_the_new_end_and_the_previous_one_within_four(
    turns: list[tuple[list[dict[str, str]], str, bool]], api: str
) -> None:
    prompt = Prompt(
        tools=[WEATHER_TOOL], system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("Plan my trip.")]
    )
    before = wire(prompt, api)
    for number, (calls, note, with_text) in enumerate(turns):
        tool_calls = [
            ToolCall(f"call_{number}_{i}", "get_weather", args) for i, args in enumerate(calls)
        ]
        reply = [Text(note), *tool_calls] if with_text else tool_calls
        results = [ToolResult(call.id, f"{note} {i}") for i, call in enumerate(tool_calls)]
        prompt = prompt.next_turn(reply, results)
        after = wire(prompt, api)
        # The last result is written; the previous request's end, written then, is read now.
        assert _marked(after[-1]) and _marked(after[len(before) - 1])
        assert json.dumps(after).count("prompt_cache_breakpoint") <= 4
        before = after
