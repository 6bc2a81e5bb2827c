"""render_openai_chat / render_openai_responses: static first, cache key, explicit breakpoints."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, cast

import openai
import pytest
from prefixkit.sdk import (
    Prompt,
    RenderError,
    SaltError,
    Segment,
    TiktokenTokenizer,
    UncachedPrefixWarning,
    UnknownModelWarning,
    prompt_cache_key,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS, support_prompt

EXPLICIT = "gpt-5.6-sol"
IMPLICIT = "gpt-4.1"
SECRET = "test-salt-secret"


def chat(
    client: openai.OpenAI, api: MockProvider, prompt: Prompt, **options: Any
) -> dict[str, Any]:
    client.chat.completions.create(**render_openai_chat(prompt, **options))
    return api.body


def responses(
    client: openai.OpenAI, api: MockProvider, prompt: Prompt, **options: Any
) -> dict[str, Any]:
    client.responses.create(**render_openai_responses(prompt, **options))
    return api.body


def breakpoints(messages: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(role, text head) of every content part with a prompt_cache_breakpoint."""
    return [
        (message["role"], part["text"][:20])
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if "prompt_cache_breakpoint" in part
    ]


def test_chat_wire_is_static_first_with_tools_and_context_before_the_conversation(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    body = chat(openai_client, api, support_prompt(), model=IMPLICIT)
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_invoice",
                "description": "Fetch an invoice by id.",
                "parameters": {
                    "properties": {"invoice_id": {"type": "string"}},
                    "required": ["invoice_id"],
                    "type": "object",
                },
            },
        }
    ]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]
    assert [p["text"][:10] for p in body["messages"][0]["content"]] == ["You are th", "Refund pol"]
    assert body["messages"][1]["content"][0]["text"].startswith("Price list")


def test_implicit_model_gets_no_breakpoints_and_no_cache_options(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    body = chat(openai_client, api, support_prompt(), model=IMPLICIT)
    assert "prompt_cache_breakpoint" not in json.dumps(body)
    assert "prompt_cache_options" not in body
    assert body["prompt_cache_key"].startswith("pk-")


def test_explicit_model_marks_tier_ends_and_the_growing_end_in_explicit_mode(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    body = chat(openai_client, api, support_prompt(), model=EXPLICIT)
    assert body["prompt_cache_options"] == {"mode": "explicit"}
    assert breakpoints(body["messages"]) == [
        ("system", LONG_INSTRUCTIONS[:20]),
        ("system", "Refund policy: refun"),
        ("user", "Price list: egress $"),
        ("user", "How much is 500 GB o"),
    ]
    assert all(
        part.get("prompt_cache_breakpoint", {"mode": "explicit"}) == {"mode": "explicit"}
        for message in body["messages"]
        for part in message["content"]
    )


def test_implicit_mode_leaves_the_moving_end_to_the_implicit_breakpoint(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    second = support_prompt().next_turn("It is $45.", "And 1 TB?")
    body = chat(openai_client, api, second, model=EXPLICIT, cache_mode="implicit", cache_ttl="30m")
    assert body["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert breakpoints(body["messages"]) == [
        ("system", LONG_INSTRUCTIONS[:20]),
        ("system", "Refund policy: refun"),
    ]


def test_prompt_cache_key_is_stable_for_a_shared_prefix_and_differs_across_tenants(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    a1 = chat(
        openai_client, api, support_prompt("q1"), model=IMPLICIT, tenant="acme", salt_secret=SECRET
    )
    a2 = chat(
        openai_client, api, support_prompt("q2"), model=IMPLICIT, tenant="acme", salt_secret=SECRET
    )
    b = chat(
        openai_client,
        api,
        support_prompt("q1"),
        model=IMPLICIT,
        tenant="globex",
        salt_secret=SECRET,
    )
    unsalted = chat(openai_client, api, support_prompt("q1"), model=IMPLICIT)
    assert a1["prompt_cache_key"] == a2["prompt_cache_key"]
    assert len({a1["prompt_cache_key"], b["prompt_cache_key"], unsalted["prompt_cache_key"]}) == 3
    assert "acme" not in a1["prompt_cache_key"]


def test_prompt_cache_key_changes_with_the_static_prefix() -> None:
    other = Prompt(system="Different instructions.", messages=[Segment.dynamic("q1")])
    assert prompt_cache_key(support_prompt()) != prompt_cache_key(other)


def test_prompt_without_static_prefix_gets_no_cache_key() -> None:
    prompt = Prompt(context=["doc"], messages=[Segment.dynamic("q")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "prompt_cache_key" not in render_openai_chat(prompt, model=IMPLICIT)


def test_tenant_without_a_secret_or_the_variable_names_both_ways_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PREFIXKIT_SALT_SECRET", raising=False)
    with pytest.raises(SaltError, match=r"salt_secret=\.\.\. or set PREFIXKIT_SALT_SECRET"):
        render_openai_chat(support_prompt(), model=IMPLICIT, tenant="acme")


def test_tenant_without_salt_secret_is_keyed_by_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", SECRET)
    from_env = render_openai_chat(support_prompt(), model=IMPLICIT, tenant="acme")
    given = render_openai_chat(support_prompt(), model=IMPLICIT, tenant="acme", salt_secret=SECRET)
    assert from_env["prompt_cache_key"] == given["prompt_cache_key"]
    assert from_env["prompt_cache_key"] != prompt_cache_key(support_prompt())


def test_responses_wire_uses_input_parts_and_flat_function_tools(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    second = support_prompt().next_turn("It is $45.", "And 1 TB?")
    body = responses(openai_client, api, second, model=EXPLICIT, cache_ttl="12h")
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["name"] == "lookup_invoice"
    assert body["input"][0]["content"][0]["type"] == "input_text"
    assert {"role": "assistant", "content": "It is $45."} in body["input"]
    assert body["prompt_cache_options"] == {"mode": "explicit", "ttl": "12h"}
    # The assistant turn cannot carry a marker: the previous request's end is the user turn
    # before it (read), the growing end is the new question (written); 4 writes at most.
    assert breakpoints(body["input"])[-2:] == [
        ("user", "How much is 500 GB o"),
        ("user", "And 1 TB?"),
    ]
    assert len(breakpoints(body["input"])) == 4


def test_responses_only_cache_options_pass_into_prompt_cache_options(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    body = responses(
        openai_client,
        api,
        support_prompt(),
        model=EXPLICIT,
        prewarm=True,
        comparison_response_id="resp_123",
    )
    assert body["prompt_cache_options"] == {
        "mode": "explicit",
        "prewarm": True,
        "comparison_response_id": "resp_123",
    }


def test_chat_and_responses_share_the_cache_key() -> None:
    chat_key = render_openai_chat(support_prompt(), model=IMPLICIT)["prompt_cache_key"]
    responses_key = render_openai_responses(support_prompt(), model=IMPLICIT)["prompt_cache_key"]
    assert chat_key == responses_key


def test_caller_markers_become_explicit_breakpoints_and_count() -> None:
    marker = {"type": "ephemeral"}
    prompt = Prompt(
        system=[Segment.static(f"rule {i}", cache_control=marker) for i in range(4)],
        messages=[Segment.dynamic("q")],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncachedPrefixWarning)
        kwargs = render_openai_chat(prompt, model=EXPLICIT)
        assert len(breakpoints(kwargs["messages"])) == 4
        with pytest.raises(RenderError, match="plus 1 for the request-level cache mode"):
            render_openai_chat(prompt, model=EXPLICIT, cache_mode="implicit")


def test_caller_marker_on_a_tool_raises_for_explicit_models() -> None:
    prompt = Prompt(
        tools=[
            Segment.static(
                {"name": "f", "parameters": {}}, name="f", cache_control={"type": "ephemeral"}
            )
        ],
        system=LONG_INSTRUCTIONS,
        messages=[Segment.dynamic("q")],
    )
    with pytest.raises(RenderError, match="OpenAI cannot mark any of its parts"):
        render_openai_chat(prompt, model=EXPLICIT)


def test_cache_options_on_a_model_without_them_raise() -> None:
    with pytest.raises(RenderError, match="does not take prompt_cache_options"):
        render_openai_chat(support_prompt(), model=IMPLICIT, cache_mode="explicit")


def test_static_prefix_under_1024_tokens_warns() -> None:
    prompt = Prompt(system="Be brief.", messages=[Segment.dynamic("hi")])
    with pytest.warns(UncachedPrefixWarning, match=r"static prefix of this prompt is \d+ tokens"):
        render_openai_chat(prompt, model=IMPLICIT)


def test_offline_o200k_falls_back_to_a_labelled_cl100k_estimate() -> None:
    prompt = Prompt(system="Be brief.", messages=[Segment.dynamic("hi")])
    with pytest.warns(UncachedPrefixWarning) as record:
        render_openai_chat(prompt, model=IMPLICIT)
    message = str(record[0].message)
    assert "tiktoken:cl100k_base" in message
    assert "estimated" in message or "counted" in message


def test_given_tokenizer_counts_exactly() -> None:
    prompt = Prompt(system="Be brief.", messages=[Segment.dynamic("hi")])
    with pytest.warns(UncachedPrefixWarning, match="counted with tiktoken:cl100k_base"):
        render_openai_chat(prompt, model=IMPLICIT, tokenizer=TiktokenTokenizer("cl100k_base"))


def test_long_static_prefix_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_openai_chat(support_prompt(), model=IMPLICIT)
        render_openai_responses(support_prompt(), model=EXPLICIT)


def test_unknown_model_warns_and_stays_implicit() -> None:
    with pytest.warns(
        UnknownModelWarning, match="'gpt-imaginary' is not in prefixkit's data table"
    ):
        kwargs = render_openai_chat(support_prompt(), model="gpt-imaginary")
    assert "prompt_cache_options" not in kwargs


def test_renderers_do_not_mutate_the_prompt() -> None:
    prompt = support_prompt().next_turn("It is $45.", "And 1 TB?")
    before = copy.deepcopy(prompt)
    render_openai_chat(prompt, model=EXPLICIT, tenant="acme", salt_secret=SECRET)
    render_openai_responses(prompt, model=EXPLICIT)
    assert prompt == before


def test_chat_rejects_the_responses_only_12h_ttl() -> None:
    with pytest.raises(RenderError, match="cache_ttl '12h' is not accepted by the chat API"):
        render_openai_chat(support_prompt(), model=EXPLICIT, cache_ttl=cast(Any, "12h"))
