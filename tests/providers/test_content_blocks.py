"""Structured content through the official clients: tool loops, images, documents and
built-in tools, written in each SDK's documented request shapes, reach the wire unaltered
(only prefixkit's cache markers are added), and portable blocks render for every API."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import openai
import pytest
from prefixkit.sdk import (
    Document,
    Image,
    Prompt,
    RenderError,
    Segment,
    Text,
    ToolCall,
    ToolResult,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS, plain

CLAUDE = "claude-sonnet-5"
GPT = "gpt-4o"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZSAvQ2F0YWxvZz4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def without_markers(value: Any) -> Any:
    """`value` with every cache_control / prompt_cache_breakpoint removed."""
    if isinstance(value, dict):
        return {
            key: without_markers(item)
            for key, item in value.items()
            if key not in ("cache_control", "prompt_cache_breakpoint")
        }
    if isinstance(value, list):
        return [without_markers(item) for item in value]
    return value


# --- Anthropic Messages ---------------------------------------------------------------

ANTHROPIC_TOOL_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check both.", "citations": None},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "get_weather",
                "input": {"city": "Oslo"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18 C, sunny"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [{"type": "text", "text": "4 C, rain"}],
                "is_error": False,
            },
        ],
    },
]


def test_anthropic_tool_loop_blocks_reach_the_wire_unaltered(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    turns = copy.deepcopy(ANTHROPIC_TOOL_TURNS)
    prompt = Prompt(tools=[WEATHER_TOOL], system=LONG_INSTRUCTIONS, messages=turns)
    anthropic_client.messages.create(**render_anthropic(prompt, model=CLAUDE, max_tokens=64))
    first, *rest = without_markers(api.body["messages"])
    # text content is always sent as a text block, so a marker never changes its form
    assert first["content"] == [{"type": "text", "text": ANTHROPIC_TOOL_TURNS[0]["content"]}]
    assert rest == ANTHROPIC_TOOL_TURNS[1:]
    assert turns == ANTHROPIC_TOOL_TURNS  # the caller's dicts are not touched
    assert api.body["messages"][2]["content"][1]["cache_control"]["type"] == "ephemeral"


def test_anthropic_base64_image_and_pdf_document_are_sent_byte_for_byte(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "Invoice 42",
            "citations": {"enabled": True},
        },
        {"type": "text", "text": "Summarise the invoice and describe the image."},
    ]
    prompt = Prompt(
        system=LONG_INSTRUCTIONS, messages=[{"role": "user", "content": copy.deepcopy(content)}]
    )
    anthropic_client.messages.create(**render_anthropic(prompt, model=CLAUDE, max_tokens=64))
    assert without_markers(api.body["messages"][0]["content"]) == content
    assert PDF in api.requests[-1].content.decode()


def test_anthropic_server_tools_pass_unchanged_after_the_function_tools(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    execute = {"type": "code_execution_20250825", "name": "code_execution"}
    prompt = Prompt(
        tools=[search, WEATHER_TOOL, execute],
        system=LONG_INSTRUCTIONS,
        messages=[Segment.dynamic("Search the news.")],
    )
    anthropic_client.messages.create(**render_anthropic(prompt, model=CLAUDE, max_tokens=64))
    assert [without_markers(tool) for tool in api.body["tools"]] == [execute, WEATHER_TOOL, search]


def test_anthropic_response_content_objects_are_accepted_as_history(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    reply = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": CLAUDE,
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    prompt = Prompt(
        tools=[WEATHER_TOOL],
        system=LONG_INSTRUCTIONS,
        messages=[
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": reply.content},
            Segment.dynamic([ToolResult("toolu_9", "21 C")]),
        ],
    )
    anthropic_client.messages.create(**render_anthropic(prompt, model=CLAUDE, max_tokens=64))
    assert api.body["messages"][1]["content"][0]["input"] == {"city": "Rome"}
    assert api.body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_9",
        "content": "21 C",
    }


# --- OpenAI Chat ----------------------------------------------------------------------

CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CHAT_TURNS: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Where is this, and what is the weather there?"},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
            },
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
]


def test_chat_tool_loop_messages_reach_the_wire_unaltered(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    prompt = Prompt(tools=[CHAT_TOOL], system=LONG_INSTRUCTIONS, messages=copy.deepcopy(CHAT_TURNS))
    openai_client.chat.completions.create(**render_openai_chat(prompt, model=GPT))
    assert api.body["messages"][1:] == CHAT_TURNS
    assert api.body["tools"] == [CHAT_TOOL]


def test_chat_takes_responses_builtin_tools_nowhere_and_says_so() -> None:
    prompt = Prompt(
        tools=[{"type": "web_search"}], system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("q")]
    )
    with pytest.raises(RenderError, match=r"web_search.*render_openai_responses"):
        render_openai_chat(prompt, model=GPT)


# --- OpenAI Responses -----------------------------------------------------------------

RESPONSES_ITEMS: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Read the contract and the photo."},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "high"},
            {
                "type": "input_file",
                "filename": "contract.pdf",
                "file_data": f"data:application/pdf;base64,{PDF}",
            },
        ],
    },
    {
        "type": "function_call",
        "call_id": "call_7",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
        "id": "fc_7",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_7", "output": "4 C, rain"},
]


def test_responses_items_reach_the_wire_unaltered_with_builtin_tools(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    tools: list[dict[str, Any]] = [
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
    ]
    prompt = Prompt(tools=tools, system=LONG_INSTRUCTIONS, messages=copy.deepcopy(RESPONSES_ITEMS))
    openai_client.responses.create(**render_openai_responses(prompt, model=GPT))
    assert api.body["input"][1:] == RESPONSES_ITEMS
    assert sorted(json.dumps(t, sort_keys=True) for t in api.body["tools"]) == sorted(
        json.dumps(t, sort_keys=True) for t in tools
    )


def test_anthropic_server_tool_is_refused_on_responses_naming_it() -> None:
    prompt = Prompt(
        tools=[{"type": "web_search_20250305", "name": "web_search"}],
        system=LONG_INSTRUCTIONS,
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match=r"web_search_20250305.*Anthropic server tool"):
        render_openai_responses(prompt, model=GPT)


@pytest.mark.parametrize("tool", [{"name": "ping"}, {"name": "ping", "description": "Is it up?"}])
def test_a_tool_with_a_name_and_no_schema_is_a_function_without_arguments_everywhere(
    tool: dict[str, str],
) -> None:
    # no `type`, so not a built-in tool: each API gets a function taking no arguments
    prompt = Prompt(tools=[tool], system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("q")])
    empty = {"type": "object", "properties": {}}
    (anthropic_tool,) = plain(render_anthropic(prompt, model=CLAUDE, max_tokens=8))["tools"]
    (chat_tool,) = plain(render_openai_chat(prompt, model=GPT))["tools"]
    (responses_tool,) = plain(render_openai_responses(prompt, model=GPT))["tools"]
    assert anthropic_tool == {**tool, "input_schema": empty}
    assert chat_tool == {"type": "function", "function": {**tool, "parameters": empty}}
    assert responses_tool == {"type": "function", **tool, "parameters": empty}


# --- portable blocks: one conversation, every API -------------------------------------


def portable_prompt() -> Prompt:
    return Prompt(
        tools=[WEATHER_TOOL],
        system=LONG_INSTRUCTIONS,
        messages=[
            Segment.session(
                [
                    Text("What does this chart show, and what is the weather in Paris?"),
                    Image(data=PNG, media_type="image/png"),
                    Document(data=PDF, title="Report", filename="report.pdf"),
                ]
            ),
            Segment.session(
                [Text("Checking."), ToolCall("call_a", "get_weather", {"city": "Paris"})],
                role="assistant",
            ),
            Segment.dynamic([ToolResult("call_a", "18 C, sunny")]),
        ],
    )


def test_portable_blocks_render_as_anthropic_blocks(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    anthropic_client.messages.create(
        **render_anthropic(portable_prompt(), model=CLAUDE, max_tokens=64)
    )
    user, assistant, result = without_markers(api.body["messages"])
    assert [block["type"] for block in user["content"]] == ["text", "image", "document"]
    assert user["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": PNG,
    }
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "call_a",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert result == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_a", "content": "18 C, sunny"}],
    }


def test_portable_blocks_render_as_chat_messages(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    openai_client.chat.completions.create(**render_openai_chat(portable_prompt(), model=GPT))
    _, user, assistant, tool = api.body["messages"]
    assert [part["type"] for part in user["content"]] == ["text", "image_url", "file"]
    assert user["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert assistant["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert tool == {"role": "tool", "tool_call_id": "call_a", "content": "18 C, sunny"}


def test_portable_blocks_render_as_responses_items(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    openai_client.responses.create(**render_openai_responses(portable_prompt(), model=GPT))
    _, user, text, call, output = api.body["input"]
    assert [part["type"] for part in user["content"]] == ["input_text", "input_image", "input_file"]
    assert text == {"role": "assistant", "content": "Checking."}
    assert call == {
        "type": "function_call",
        "call_id": "call_a",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert output == {"type": "function_call_output", "call_id": "call_a", "output": "18 C, sunny"}


def test_anthropic_native_turns_render_for_chat_as_tool_calls_and_tool_messages() -> None:
    prompt = Prompt(system=LONG_INSTRUCTIONS, messages=copy.deepcopy(ANTHROPIC_TOOL_TURNS))
    messages = plain(render_openai_chat(prompt, model=GPT))["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["toolu_01", "toolu_02"]


# --- pairing --------------------------------------------------------------------------


@pytest.mark.parametrize("render", ["anthropic", "chat", "responses"])
def test_a_result_without_its_call_is_refused(render: str) -> None:
    prompt = Prompt(
        system=LONG_INSTRUCTIONS, messages=[Segment.dynamic([ToolResult("call_x", "42")])]
    )
    with pytest.raises(RenderError, match=r"call_x.*answers no earlier tool call"):
        _render(render, prompt)


@pytest.mark.parametrize("render", ["anthropic", "chat", "responses"])
def test_an_unanswered_call_is_refused_before_the_next_model_turn(render: str) -> None:
    prompt = Prompt(
        system=LONG_INSTRUCTIONS,
        messages=[
            {"role": "user", "content": "weather?"},
            Segment.session(
                [ToolCall("call_y", "get_weather", {"city": "Oslo"})], role="assistant"
            ),
            Segment.dynamic("never mind"),
        ],
    )
    with pytest.raises(RenderError, match=r"get_weather \(call_y\) have no result"):
        _render(render, prompt)


def _render(api: str, prompt: Prompt) -> object:
    if api == "anthropic":
        return render_anthropic(prompt, model=CLAUDE, max_tokens=8)
    if api == "chat":
        return render_openai_chat(prompt, model=GPT)
    return render_openai_responses(prompt, model=GPT)


def test_block_digest_does_not_depend_on_dict_key_order() -> None:
    one = Segment.session([{"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1, "b": 2}}])
    two = Segment.session([{"input": {"b": 2, "a": 1}, "name": "f", "id": "t", "type": "tool_use"}])
    assert one.digest == two.digest


def test_unknown_block_type_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="'imagee'"):
        Prompt(messages=[{"role": "user", "content": [{"type": "imagee", "data": "x"}]}])


def test_anthropic_system_text_blocks_keep_their_own_markers(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    marker = {"type": "ephemeral", "ttl": "1h"}
    prompt = Prompt(
        system=[{"type": "text", "text": LONG_INSTRUCTIONS, "cache_control": marker}],
        messages=[Segment.dynamic("q")],
    )
    anthropic_client.messages.create(**render_anthropic(prompt, model=CLAUDE, max_tokens=8))
    assert api.body["system"] == [
        {"type": "text", "text": LONG_INSTRUCTIONS.rstrip(), "cache_control": marker}
    ]
