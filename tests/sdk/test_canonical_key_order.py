"""Canonical JSON of what is sent keeps key order; the hashing form sorts it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import (
    Prompt,
    Segment,
    ToolCall,
    ToolResult,
    canonical_json,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def test_send_form_keeps_properties_in_the_order_written() -> None:
    schema = {"type": "object", "properties": {"reasoning": {}, "decision": {}, "amount": {}}}
    text = canonical_json(schema, sort_keys=False)
    assert list(json.loads(text)["properties"]) == ["reasoning", "decision", "amount"]


def test_hashing_form_sorts_keys_by_default() -> None:
    assert canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_send_form_uses_fixed_separators_and_keeps_utf8() -> None:
    assert canonical_json({"b": [1, 2], "a": "é"}, sort_keys=False) == '{"b":[1,2],"a":"é"}'


@given(value=json_values)
def test_send_form_round_trips_with_the_same_key_order(value: Any) -> None:
    text = canonical_json(value, sort_keys=False)
    assert json.dumps(json.loads(text)) == json.dumps(value)


def test_a_static_json_segment_keeps_the_key_order_written() -> None:
    segment = Segment.static({"z": 1, "a": {"y": 2, "b": 3}})
    assert segment.text == '{"z":1,"a":{"y":2,"b":3}}'


@given(
    arguments=st.dictionaries(st.text(min_size=1, max_size=6), json_values, min_size=1, max_size=5)
)
def test_a_tool_calls_arguments_are_sent_in_the_order_written_to_every_api(
    arguments: dict[str, Any],
) -> None:
    # a strict tool's arguments come in its schema's order: Chat, Responses and vLLM get
    # the same order as Anthropic's tool_use input
    call = ToolCall("call_1", "decide", arguments)
    prompt = Prompt(
        system=["You decide refunds. " * 600],  # past every provider's caching minimum
        messages=[
            Segment.session("Refund?"),
            Segment.session([call], role="assistant"),
            Segment.session([ToolResult("call_1", "done")]),
            Segment.dynamic("And now?"),
        ],
    )
    chat: Any = render_openai_chat(prompt, model="gpt-4.1")["messages"][2]
    responses: list[Any] = list(render_openai_responses(prompt, model="gpt-4.1")["input"])
    (function_call,) = [item for item in responses if item.get("type") == "function_call"]
    anthropic: Any = render_anthropic(prompt, model="claude-sonnet-4-5", max_tokens=5)
    written = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    assert chat["tool_calls"][0]["function"]["arguments"] == written
    assert function_call["arguments"] == written
    assert list(anthropic["messages"][1]["content"][0]["input"]) == list(arguments)
