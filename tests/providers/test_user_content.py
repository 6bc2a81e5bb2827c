"""What the caller wrote is what is sent: SESSION and DYNAMIC text is never canonicalised,
only the static tiers and tools are. And the request-building rules around it: stream=True
to a non-streaming client method names the streaming one, a per-call prompt_cache_key wins,
a reserved parameter names the argument that sets it, no cache marker on a DYNAMIC segment,
no empty OpenAI text parts, no moving breakpoint on an assistant part, and tools given once
(in the Prompt or as tools=..., not both)."""

from __future__ import annotations

import re
import unicodedata

import anthropic
import openai
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    LayoutError,
    OpenAIClient,
    Prompt,
    RenderError,
    Segment,
    Text,
    UsageError,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS, plain, support_prompt

CLAUDE = "claude-sonnet-5"
GPT = "gpt-4o"
EXPLICIT = "gpt-5.6-sol"
NFD = unicodedata.normalize("NFD", "Café crème brûlée")
TSV = "sku\tqty\tnote\t\nA-1\t3\t\t\n"
MARKDOWN = "Line one  \nline two (a hard break above)\n"


def anthropic_texts(prompt: Prompt) -> list[str]:
    kwargs = plain(render_anthropic(prompt, model=CLAUDE, max_tokens=8))
    return [block["text"] for m in kwargs["messages"] for block in m["content"]]


@pytest.mark.parametrize("text", [NFD, TSV, MARKDOWN], ids=["nfd", "tsv", "markdown"])
def test_dynamic_question_is_sent_exactly_as_given(text: str) -> None:
    prompt = Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic(text)])
    assert anthropic_texts(prompt) == [text]


@pytest.mark.parametrize("text", [NFD, TSV, MARKDOWN], ids=["nfd", "tsv", "markdown"])
def test_session_history_message_is_sent_exactly_as_given(text: str) -> None:
    prompt = Prompt(
        system=LONG_INSTRUCTIONS,
        messages=[{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}],
    )
    assert anthropic_texts(prompt)[0] == text


def test_dynamic_text_reaches_openai_unaltered(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    prompt = Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic(TSV)])
    openai_client.chat.completions.create(**render_openai_chat(prompt, model=GPT))
    assert api.body["messages"][-1]["content"][0]["text"] == TSV


def test_static_text_is_still_canonicalised() -> None:
    segment = Segment.static(NFD + "  \r\n")
    assert segment.text == unicodedata.normalize("NFC", NFD)


def test_next_turn_keeps_the_question_bytes_when_it_joins_the_history() -> None:
    prompt = Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic(TSV)])
    following = prompt.next_turn("noted", "next")
    assert following.messages[0].text == TSV


# --- item 6 ---------------------------------------------------------------------------


def test_stream_true_to_a_non_streaming_anthropic_method_names_the_stream_method(
    anthropic_client: anthropic.Anthropic,
) -> None:
    with pytest.raises(UsageError, match=r"call AnthropicClient.stream\(...\) instead"):
        AnthropicClient(anthropic_client).create(
            support_prompt(), model=CLAUDE, max_tokens=8, stream=True
        )


@pytest.mark.parametrize(
    ("method", "instead"),
    [("chat", "OpenAIClient.stream_chat"), ("responses", "OpenAIClient.stream_responses")],
)
def test_stream_true_to_a_non_streaming_openai_method_names_the_stream_method(
    openai_client: openai.OpenAI, method: str, instead: str
) -> None:
    client = OpenAIClient(openai_client)
    with pytest.raises(UsageError, match=instead):
        getattr(client, method)(support_prompt(), model=GPT, stream=True)


def test_prompt_cache_key_is_overridden_per_call(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    kwargs = render_openai_responses(support_prompt(), model=GPT, prompt_cache_key="conv-42")
    openai_client.responses.create(**kwargs)
    assert api.body["prompt_cache_key"] == "conv-42"


def test_a_reserved_parameter_error_names_the_argument_that_sets_it() -> None:
    with pytest.raises(RenderError, match=r"prompt_cache_options \(give it as the cache_mode="):
        render_openai_chat(support_prompt(), model=GPT, prompt_cache_options={"mode": "implicit"})


def test_a_cache_marker_on_a_dynamic_segment_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"cache_control on DYNAMIC.*written and never read"):
        Segment.dynamic("q", cache_control={"type": "ephemeral"})


def test_empty_openai_text_parts_are_not_sent_and_an_empty_turn_is_kept_as_given() -> None:
    # an empty system segment adds no part; a turn of the conversation is the user's
    # (or the model's) as given: dropping it would join the turns around it
    prompt = Prompt(
        system=[Segment.static(LONG_INSTRUCTIONS), Segment.versioned("", version="1")],
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": " "},
            {"role": "assistant", "content": ""},
            Segment.dynamic("q"),
        ],
    )
    for render in (render_openai_chat, render_openai_responses):
        kwargs = plain(render(prompt, model=GPT))
        items = kwargs["messages" if "messages" in kwargs else "input"]
        parts = [
            part for item in items if isinstance(item["content"], list) for part in item["content"]
        ]
        assert all(part["text"] for part in parts)
        assert [item["role"] for item in items[1:]] == ["user", "assistant"] * 2 + ["user"]
        assert [items[3]["content"], items[4]["content"]] == [" ", ""]


def test_chat_moving_breakpoint_never_lands_on_an_assistant_part() -> None:
    prompt = support_prompt().next_turn("It is $45.", "And 1 TB?")
    messages = plain(render_openai_chat(prompt, model=EXPLICIT))["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert assistant and all(
        "prompt_cache_breakpoint" not in part for m in assistant for part in m["content"]
    )


def test_tools_from_kwargs_pass_through_when_the_prompt_has_none() -> None:
    tools = [{"type": "web_search"}]
    kwargs = render_openai_responses(
        Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("q")]), model=GPT, tools=tools
    )
    assert plain(kwargs)["tools"] == tools


def test_tools_from_both_the_prompt_and_kwargs_are_refused() -> None:
    with pytest.raises(RenderError, match="tools come from both the Prompt and tools="):
        render_openai_chat(support_prompt(), model=GPT, tools=[])


def test_anthropic_tools_from_kwargs_pass_through_and_clash_with_prompt_tools() -> None:
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    plain_prompt = Prompt(system=LONG_INSTRUCTIONS, messages=[Segment.dynamic("q")])
    kwargs = render_anthropic(plain_prompt, model=CLAUDE, max_tokens=8, tools=tools)
    assert plain(kwargs)["tools"] == tools
    with pytest.raises(RenderError, match="tools come from both the Prompt and tools="):
        render_anthropic(support_prompt(), model=CLAUDE, max_tokens=8, tools=tools)


@pytest.mark.parametrize("blocks", [[Text("")], [Text("  "), Text("hi")]])
def test_an_empty_text_block_is_refused_for_anthropic_naming_it(blocks: list[Text]) -> None:
    # Anthropic answers 400 to a text block without text: refused before anything is sent
    prompt = Prompt(system=[Segment.static(LONG_INSTRUCTIONS)], messages=[Segment.dynamic(blocks)])
    with pytest.raises(RenderError, match="holds an empty text block") as raised:
        render_anthropic(prompt, model=CLAUDE, max_tokens=8)
    assert raised.value.provider == "anthropic"


def test_a_tenant_given_to_render_anthropic_is_refused_not_sent() -> None:
    # Anthropic has no salt field: a tenant and its secret would go out as request kwargs
    with pytest.raises(
        RenderError, match="render_anthropic takes no salt_secret or tenant"
    ) as raised:
        render_anthropic(
            support_prompt(), model=CLAUDE, max_tokens=8, tenant="acme", salt_secret="s3cret"
        )
    assert "s3cret" not in str(raised.value)


def test_a_next_question_given_as_a_message_dict_is_a_user_turn_not_json_text() -> None:
    prompt = support_prompt().next_turn("It is $45.", {"role": "user", "content": "And in Porto?"})
    for kwargs in (
        plain(render_anthropic(prompt, model=CLAUDE, max_tokens=8)),
        plain(render_openai_chat(prompt, model=GPT)),
    ):
        last = kwargs["messages"][-1]
        assert last["role"] == "user"
        assert [part["text"] for part in last["content"]] == ["And in Porto?"]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ({"system_role": "admin"}, "system_role 'admin' is not one of 'system', 'developer'"),
        ({"cache_mode": "auto"}, "cache_mode 'auto' is not one of None, 'explicit', 'implicit'"),
    ],
)
def test_an_openai_option_outside_its_choices_is_refused_naming_them(
    option: dict[str, str], says: str
) -> None:
    for render in (render_openai_chat, render_openai_responses):
        with pytest.raises(RenderError, match=re.escape(says)):
            render(support_prompt(), model=GPT, **option)  # type: ignore[arg-type]
