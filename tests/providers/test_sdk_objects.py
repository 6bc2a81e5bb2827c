"""Replies of the official clients (`create`, `parse`, a stream's final result, for
Anthropic Messages, OpenAI Chat Completions and Responses) go back into the next request
exactly as their own SDK sends them back: the same items, without the fields the SDKs add
to parsed results (`parsed`, `parsed_arguments`, `parsed_output`), never as text."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from openai.types.responses.parsed_response import ParsedResponseFunctionToolCall
from prefixkit.sdk import (
    CanonicalError,
    Prompt,
    Segment,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider
from pydantic import BaseModel

from .prompts import LONG_INSTRUCTIONS

CLAUDE = "claude-sonnet-5"
GPT = "gpt-4o"
SDK_ONLY = {"parsed", "parsed_arguments", "parsed_output", "created_by"}


class Weather(BaseModel):
    city: str
    degrees: int


def first_turn() -> Prompt:
    return Prompt(
        system=[Segment.static(LONG_INSTRUCTIONS)],
        messages=[Segment.dynamic("What is the weather in Paris?")],
    )


def without(value: Any, keys: set[str]) -> Any:
    """`value` without `keys` at any depth."""
    if isinstance(value, dict):
        return {key: without(item, keys) for key, item in value.items() if key not in keys}
    if isinstance(value, list):
        return [without(item, keys) for item in value]
    return value


def has_key(value: Any, keys: set[str]) -> bool:
    if isinstance(value, dict):
        return bool(keys & set(value)) or any(has_key(item, keys) for item in value.values())
    if isinstance(value, list):
        return any(has_key(item, keys) for item in value)
    return False


# --- each kind of reply, made through the official client on the mock ------------------

Maker = Callable[[MockProvider], Any]


def anthropic_create(mock: MockProvider) -> anthropic.types.Message:
    kwargs = render_anthropic(first_turn(), model=CLAUDE, max_tokens=64)
    return mock.anthropic_client().messages.create(**kwargs)


def anthropic_parse(mock: MockProvider) -> Any:
    mock.reply = json.dumps({"city": "Paris", "degrees": 21})
    kwargs: Any = render_anthropic(first_turn(), model=CLAUDE, max_tokens=64)
    return mock.anthropic_client().messages.parse(**kwargs, output_format=Weather)


def anthropic_stream(mock: MockProvider) -> anthropic.types.Message:
    kwargs = render_anthropic(first_turn(), model=CLAUDE, max_tokens=64)
    with mock.anthropic_client().messages.stream(**kwargs) as stream:
        return stream.get_final_message()


def anthropic_beta(mock: MockProvider) -> Any:
    kwargs: Any = render_anthropic(first_turn(), model=CLAUDE, max_tokens=64)
    return mock.anthropic_client().beta.messages.create(**kwargs)


def chat_create(mock: MockProvider) -> Any:
    kwargs = render_openai_chat(first_turn(), model=GPT)
    return mock.openai_client().chat.completions.create(**kwargs).choices[0].message


def chat_parse(mock: MockProvider) -> Any:
    mock.reply = json.dumps({"city": "Paris", "degrees": 21})
    kwargs: Any = render_openai_chat(first_turn(), model=GPT)
    completion = mock.openai_client().chat.completions.parse(**kwargs, response_format=Weather)
    assert completion.choices[0].message.parsed == Weather(city="Paris", degrees=21)
    return completion.choices[0].message


def chat_stream(mock: MockProvider) -> Any:
    mock.reply = json.dumps({"city": "Paris", "degrees": 21})
    kwargs: Any = render_openai_chat(first_turn(), model=GPT)
    with mock.openai_client().chat.completions.stream(**kwargs, response_format=Weather) as s:
        return s.get_final_completion().choices[0].message


def chat_completion(mock: MockProvider) -> Any:
    kwargs = render_openai_chat(first_turn(), model=GPT)
    return mock.openai_client().chat.completions.create(**kwargs)


def responses_create(mock: MockProvider) -> Any:
    kwargs = render_openai_responses(first_turn(), model=GPT)
    return mock.openai_client().responses.create(**kwargs)


def responses_parse(mock: MockProvider) -> Any:
    mock.reply = json.dumps({"city": "Paris", "degrees": 21})
    kwargs: Any = render_openai_responses(first_turn(), model=GPT)
    response = mock.openai_client().responses.parse(**kwargs, text_format=Weather)
    assert response.output_parsed == Weather(city="Paris", degrees=21)
    return response


def responses_stream(mock: MockProvider) -> Any:
    mock.reply = json.dumps({"city": "Paris", "degrees": 21})
    kwargs: Any = render_openai_responses(first_turn(), model=GPT)
    with mock.openai_client().responses.stream(**kwargs, text_format=Weather) as stream:
        return stream.get_final_response()


def responses_tool_call(mock: MockProvider) -> Any:
    """A parsed function call, as `responses.parse` with a strict function tool returns it."""
    response = responses_parse(mock)
    call = ParsedResponseFunctionToolCall(
        type="function_call",
        call_id="call_1",
        name="get_weather",
        arguments='{"city": "Paris"}',
        id="fc_1",
        status="completed",
        parsed_arguments={"city": "Paris"},
    )
    response.output.append(call)
    return response


ANTHROPIC: dict[str, Maker] = {
    "messages.create": anthropic_create,
    "messages.parse": anthropic_parse,
    "messages.stream": anthropic_stream,
    "beta.messages.create": anthropic_beta,
}
CHAT: dict[str, Maker] = {
    "chat.completions.create": chat_create,
    "chat.completions.parse": chat_parse,
    "chat.completions.stream": chat_stream,
}
RESPONSES: dict[str, Maker] = {
    "responses.create": responses_create,
    "responses.parse": responses_parse,
    "responses.stream": responses_stream,
    "responses.parse with a function call": responses_tool_call,
}


def as_sent_by_anthropic(mock: MockProvider, message: Any) -> list[Any]:
    """The assistant content the anthropic SDK itself sends for `message.content`."""
    mock.anthropic_client().messages.create(
        model=CLAUDE,
        max_tokens=64,
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": message.content},
        ],
    )
    return list(mock.body["messages"][1]["content"])


def as_sent_by_chat(mock: MockProvider, message: Any) -> dict[str, Any]:
    """The assistant message the openai SDK itself sends for `message`."""
    with warnings.catch_warnings():
        # the SDK serialises its own `parsed` field, against its declared type, with a warning
        warnings.simplefilter("ignore", UserWarning)
        mock.openai_client().chat.completions.create(
            model=GPT, messages=[{"role": "user", "content": "What is the weather?"}, message]
        )
    return dict(mock.body["messages"][1])


def as_sent_by_responses(mock: MockProvider, response: Any) -> list[Any]:
    """The input items the openai SDK itself sends for `response.output`."""
    mock.openai_client().responses.create(
        model=GPT, input=[{"role": "user", "content": "What is the weather?"}, *response.output]
    )
    return list(mock.body["input"][1:])


def function_call_output(kind: str) -> Any:
    """The next question: the tool's result when the reply asked for a tool."""
    if kind.endswith("function call"):
        return [{"type": "function_call_output", "call_id": "call_1", "output": "21 C"}]
    return "And in Rome?"


def after_first_question(items: list[Any], count: int) -> list[Any]:
    start = next(i for i, item in enumerate(items) if item.get("role") == "user") + 1
    return items[start : start + count]


def markers_off(value: Any) -> Any:
    return without(value, {"cache_control", "prompt_cache_breakpoint"})


@pytest.mark.parametrize("kind", sorted(ANTHROPIC))
def test_an_anthropic_reply_goes_back_as_its_content_blocks(kind: str) -> None:
    mock = MockProvider()
    message = ANTHROPIC[kind](mock)
    following = first_turn().next_turn([message], "And in Rome?")
    mock.anthropic_client().messages.create(
        **render_anthropic(following, model=CLAUDE, max_tokens=64)
    )
    sent = markers_off(mock.body["messages"][1])
    expected = without(as_sent_by_anthropic(mock, message), SDK_ONLY)
    assert sent == {"role": "assistant", "content": expected}


@pytest.mark.parametrize("kind", sorted(CHAT))
def test_a_chat_message_goes_back_as_the_openai_sdk_sends_it(kind: str) -> None:
    mock = MockProvider()
    message = CHAT[kind](mock)
    following = first_turn().next_turn([message], "And in Rome?")
    mock.openai_client().chat.completions.create(**render_openai_chat(following, model=GPT))
    sent = markers_off(mock.body["messages"][-2])
    assert sent == without(as_sent_by_chat(mock, message), SDK_ONLY)
    assert sent["role"] == "assistant" and isinstance(sent["content"], str)


@pytest.mark.parametrize("kind", sorted(RESPONSES))
def test_a_response_goes_back_as_its_output_items(kind: str) -> None:
    mock = MockProvider()
    response = RESPONSES[kind](mock)
    following = first_turn().next_turn([response], function_call_output(kind))
    mock.openai_client().responses.create(**render_openai_responses(following, model=GPT))
    sent = markers_off(after_first_question(mock.body["input"], len(response.output)))
    assert sent == without(as_sent_by_responses(mock, response), SDK_ONLY)


@pytest.mark.parametrize(
    "kind", sorted({**CHAT, "chat.completions.create (whole completion)": chat_completion})
)
def test_no_reply_is_sent_as_its_fields_in_text(kind: str) -> None:
    mock = MockProvider()
    reply = {**CHAT, "chat.completions.create (whole completion)": chat_completion}[kind](mock)
    following = first_turn().next_turn([reply], "And in Rome?")
    mock.openai_client().chat.completions.create(**render_openai_chat(following, model=GPT))
    assistant = mock.body["messages"][-2]
    assert assistant["role"] == "assistant"
    assert '"refusal"' not in json.dumps(assistant.get("content"))


@pytest.mark.parametrize("kind", sorted({**CHAT, **RESPONSES}))
def test_sdk_only_fields_of_parsed_results_are_dropped(kind: str) -> None:
    mock = MockProvider()
    reply = {**CHAT, **RESPONSES}[kind](mock)
    following = first_turn().next_turn([reply], function_call_output(kind))
    body: Any = (
        render_openai_chat(following, model=GPT)
        if kind.startswith("chat")
        else render_openai_responses(following, model=GPT)
    )
    assert not has_key(body, {"parsed", "parsed_arguments", "parsed_output"})


def test_a_model_dump_of_a_chat_message_goes_back_as_the_message() -> None:
    mock = MockProvider()
    message = chat_create(mock)
    following = first_turn().next_turn([message.model_dump()], "And in Rome?")
    rendered = render_openai_chat(following, model=GPT)
    assert markers_off(rendered["messages"][-2]) == message.model_dump()


def test_a_model_dump_of_an_anthropic_message_goes_back_as_its_content() -> None:
    mock = MockProvider()
    message = anthropic_create(mock)
    following = first_turn().next_turn([message.model_dump()], "And in Rome?")
    rendered = render_anthropic(following, model=CLAUDE, max_tokens=64)
    assert markers_off(rendered["messages"][1]["content"]) == message.model_dump()["content"]


def test_a_completion_with_several_choices_is_refused_naming_the_choice_to_pass() -> None:
    mock = MockProvider()
    completion = chat_completion(mock)
    completion.choices.append(completion.choices[0])
    with pytest.raises(CanonicalError, match=r"choices\[i\]\.message"):
        Segment.session([completion], role="assistant")


def test_another_sdk_object_is_refused_not_stringified() -> None:
    mock = MockProvider()
    message = anthropic_create(mock)
    with pytest.raises(CanonicalError, match="Usage"):
        Segment.session([message.usage], role="assistant")


def test_openai_sdk_objects_are_still_accepted_by_their_client() -> None:
    """The oracle: the openai SDK itself accepts the message (so the comparison is fair)."""
    mock = MockProvider()
    message = chat_create(mock)
    assert as_sent_by_chat(mock, message)["role"] == "assistant"
    assert isinstance(mock.openai_client(), openai.OpenAI)


def test_a_list_of_role_and_content_dicts_given_as_data_stays_data() -> None:
    transcript = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    segment = Segment.session(transcript)
    assert segment.blocks == ()
    assert json.loads(segment.text) == transcript


@pytest.mark.parametrize("kind", sorted(CHAT))
def test_a_bare_chat_message_goes_back_as_the_same_message_in_a_list(kind: str) -> None:
    mock = MockProvider()
    message = CHAT[kind](mock)
    bare = render_openai_chat(first_turn().next_turn(message, "And in Rome?"), model=GPT)
    listed = render_openai_chat(first_turn().next_turn([message], "And in Rome?"), model=GPT)
    assert bare == listed


@pytest.mark.parametrize("kind", sorted(ANTHROPIC))
def test_a_bare_anthropic_message_goes_back_as_its_content_blocks(kind: str) -> None:
    mock = MockProvider()
    message = ANTHROPIC[kind](mock)
    bare = first_turn().next_turn(message, "And in Rome?")
    listed = first_turn().next_turn([message], "And in Rome?")
    assert render_anthropic(bare, model=CLAUDE, max_tokens=64) == render_anthropic(
        listed, model=CLAUDE, max_tokens=64
    )
