"""Tool schemas reach every API with their keys in the order written.

A strict tool's arguments are generated in its schema's `properties` order
(reasoning before decision), so reordering the keys changes what the model does.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.sdk import (
    Prompt,
    Segment,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider

WRITTEN = ["reasoning", "decision", "amount"]


def refund_tool() -> dict[str, Any]:
    return {
        "name": "decide_refund",
        "description": "Decide a refund",
        "strict": True,
        "input_schema": {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "decision": {"type": "string", "enum": ["approve", "deny"]},
                "amount": {"type": "number"},
            },
            "required": ["reasoning", "decision", "amount"],
            "additionalProperties": False,
        },
    }


def prompt(*tools: dict[str, Any], sort_tools: bool = True) -> Prompt:
    return Prompt(
        tools=list(tools),
        system=[Segment.static("You decide refunds.")],
        messages=[Segment.dynamic("Order 17 arrived broken.")],
        sort_tools=sort_tools,
    )


@pytest.fixture
def api() -> Iterator[MockProvider]:
    yield MockProvider()


def sent_anthropic(api: MockProvider, request: Prompt) -> dict[str, Any]:
    with api.anthropic_client() as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client.messages.create(
            **render_anthropic(request, model="claude-sonnet-4-5", max_tokens=64)
        )
    tool: dict[str, Any] = api.body["tools"][0]
    return tool


def sent_chat(api: MockProvider, request: Prompt) -> dict[str, Any]:
    with api.openai_client() as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client.chat.completions.create(**render_openai_chat(request, model="gpt-4o"))
    tool: dict[str, Any] = api.body["tools"][0]
    return tool


def sent_responses(api: MockProvider, request: Prompt) -> dict[str, Any]:
    with api.openai_client() as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client.responses.create(**render_openai_responses(request, model="gpt-4o"))
    tool: dict[str, Any] = api.body["tools"][0]
    return tool


def test_anthropic_receives_properties_in_the_order_written(api: MockProvider) -> None:
    tool = sent_anthropic(api, prompt(refund_tool()))
    assert list(tool["input_schema"]["properties"]) == WRITTEN
    assert list(tool["input_schema"]) == ["type", "properties", "required", "additionalProperties"]


def test_openai_chat_receives_properties_in_the_order_written(api: MockProvider) -> None:
    tool = sent_chat(api, prompt(refund_tool()))
    assert list(tool["function"]["parameters"]["properties"]) == WRITTEN


def test_openai_responses_receives_properties_in_the_order_written(api: MockProvider) -> None:
    tool = sent_responses(api, prompt(refund_tool()))
    assert list(tool["parameters"]["properties"]) == WRITTEN


def test_unsorted_tool_lists_keep_the_schema_key_order_too(api: MockProvider) -> None:
    tool = sent_anthropic(api, prompt(refund_tool(), sort_tools=False))
    assert list(tool["input_schema"]["properties"]) == WRITTEN


def test_the_tool_sent_equals_the_tool_written(api: MockProvider) -> None:
    assert sent_anthropic(api, prompt(refund_tool())) == refund_tool()


property_names = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8),
    min_size=1,
    max_size=6,
    unique=True,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=property_names, added=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=8))
def test_a_tool_mutated_in_place_after_a_render_sends_its_new_content(
    api: MockProvider, names: list[str], added: str
) -> None:
    tool = refund_tool()
    tool["input_schema"]["properties"] = {name: {"type": "string"} for name in names}
    sent_anthropic(api, prompt(tool))
    tool["input_schema"]["properties"]["zz_" + added] = {"type": "integer"}
    tool["description"] = f"Decide a refund ({added})"
    before = copy.deepcopy(tool)
    sent = sent_anthropic(api, prompt(tool))
    assert sent == before
    assert list(sent["input_schema"]["properties"]) == [*names, "zz_" + added]
