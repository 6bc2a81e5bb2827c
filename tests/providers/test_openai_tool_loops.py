"""OpenAI tool loops through the official client on the provider mock: explicit cache mode
(GPT-5.6) keeps the growing conversation, tool results included, cached within 4
breakpoints; stateful Responses loops (previous_response_id, conversation, store=False
with encrypted reasoning) send tool results for calls that live on the server."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.sdk import (
    AsyncOpenAIClient,
    Native,
    OpenAIClient,
    Prompt,
    RenderError,
    Segment,
    ToolResult,
    render_openai_chat,
    render_openai_responses,
    run_tool_loop,
)
from prefixkit.testing.providers import MockProvider

from .openai_tool_answers import ToolCallingProvider
from .prompts import support_prompt

EXPLICIT = "gpt-5.6-sol"
QUESTION = "Why was I charged twice in March? Check each invoice you find."


def lookup_invoice(invoice_id: str) -> str:
    """A realistic tool answer: a few hundred tokens of line items."""
    lines = [
        f"{invoice_id} line {n}: egress {n * 37} GB at $0.09/GB, storage {n * 11} GB-month "
        f"at $0.02, status {'paid' if n % 2 else 'refunded'}"
        for n in range(1, 9)
    ]
    return "\n".join(lines)


def markers(body: dict[str, Any] | None) -> int:
    return json.dumps(body).count('"prompt_cache_breakpoint"')


def tool_loop(api: Literal["chat", "responses"], steps: int, **options: Any) -> Any:
    provider = ToolCallingProvider(MockProvider(), calls=steps)
    with provider.openai_client() as client:
        result = run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=EXPLICIT,
            api=api,
            max_steps=steps,
            **options,
        )
    return result, provider.mock


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_explicit_mode_keeps_an_eight_step_tool_loop_cached(
    api: Literal["chat", "responses"],
) -> None:
    result, mock = tool_loop(api, 8)
    last = result.turns[-1].stats
    assert len(result.turns) == 8
    assert last.cached_tokens / last.input_tokens >= 0.8
    assert all(body and body["prompt_cache_options"]["mode"] == "explicit" for body in mock.bodies)
    assert max(markers(body) for body in mock.bodies) <= 4


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.integers(min_value=1, max_value=8), api=st.sampled_from(["chat", "responses"]))
def test_each_explicit_step_reads_the_whole_previous_request(
    steps: int, api: Literal["chat", "responses"]
) -> None:
    result, mock = tool_loop(api, steps)
    stats = [turn.stats for turn in result.turns]
    assert all(markers(body) <= 4 for body in mock.bodies)
    for earlier, later in itertools.pairwise(stats):
        assert later.cached_tokens == earlier.input_tokens


def call_id(response: Any) -> str:
    """The call id of the function call that ends `response`'s output."""
    return str(response.output[-1].call_id)


def server_call(provider: ToolCallingProvider, client: OpenAIClient, **options: Any) -> Any:
    """The first request of a stateful loop: the model answers with a tool call."""
    response, _ = client.responses(support_prompt(QUESTION), model=EXPLICIT, **options)
    assert response.output[-1].type == "function_call"
    return response


RESULTS: dict[str, Callable[[str], Any]] = {
    "ToolResult": lambda ident: ToolResult(ident, lookup_invoice("INV-1")),
    "native item": lambda ident: Native(
        {"type": "function_call_output", "call_id": ident, "output": lookup_invoice("INV-1")},
        "responses",
        "message",
    ),
}


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_previous_response_id_sends_the_result_of_a_call_on_the_server(kind: str) -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)
    with provider.openai_client() as openai_client:
        client = OpenAIClient(openai_client)
        first = server_call(provider, client)
        key = provider.mock.body["prompt_cache_key"]
        follow = Prompt(messages=[Segment.session([RESULTS[kind](call_id(first))])])
        client.responses(follow, model=EXPLICIT, previous_response_id=first.id)
    body = provider.mock.body
    assert body["previous_response_id"] == first.id
    assert [(item["type"], item["call_id"]) for item in body["input"]] == [
        ("function_call_output", call_id(first))
    ]
    assert body["prompt_cache_key"] == key


def test_a_conversation_keeps_its_cache_key_for_tool_results() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)
    with provider.openai_client() as openai_client:
        client = OpenAIClient(openai_client)
        first = server_call(provider, client, conversation="conv_42")
        key = provider.mock.body["prompt_cache_key"]
        follow = Prompt(messages=[Segment.session([ToolResult(call_id(first), "ok")])])
        client.responses(follow, model=EXPLICIT, conversation="conv_42")
    assert provider.mock.body["conversation"] == "conv_42"
    assert provider.mock.body["prompt_cache_key"] == key


def test_an_async_client_chains_previous_response_ids_on_one_cache_key() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)

    async def run() -> list[str]:
        async with provider.async_openai_client() as openai_client:
            client = AsyncOpenAIClient(openai_client)
            first, _ = await client.responses(support_prompt(QUESTION), model=EXPLICIT)
            follow = Prompt(messages=[Segment.session([ToolResult(call_id(first), "ok")])])
            second, _ = await client.responses(
                follow, model=EXPLICIT, previous_response_id=first.id
            )
            third = Prompt(messages=[Segment.dynamic("And in April?")])
            await client.responses(third, model=EXPLICIT, previous_response_id=second.id)
        return [body["prompt_cache_key"] for body in provider.mock.bodies if body]

    keys = asyncio.run(run())
    assert len(keys) == 3 and len(set(keys)) == 1


def test_store_false_loop_sends_the_encrypted_reasoning_back_with_each_call() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=2, reasoning=True)
    with provider.openai_client() as client:
        result = run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=EXPLICIT,
            store=False,
            include=["reasoning.encrypted_content"],
        )
    body = provider.mock.body
    assert result.stopped == "answer" and body["store"] is False
    kinds = [(item.get("type"), item.get("encrypted_content")) for item in body["input"]]
    assert kinds[-6:] == [
        ("reasoning", "gAAAA-encrypted-1"),
        ("function_call", None),
        ("function_call_output", None),
        ("reasoning", "gAAAA-encrypted-2"),
        ("function_call", None),
        ("function_call_output", None),
    ]


@pytest.mark.parametrize("render", [render_openai_chat, render_openai_responses])
def test_a_result_without_its_call_or_server_state_is_still_refused(render: Any) -> None:
    orphan = Prompt(messages=[Segment.session([ToolResult("call_9", "ok")])])
    with pytest.raises(RenderError, match="answers no earlier tool call"):
        render(orphan, model=EXPLICIT)


@pytest.mark.parametrize("where", [{}, {"conversation": "conv_1"}])
def test_a_stateful_loop_sends_only_the_new_tool_results_on_one_cache_key(
    where: dict[str, Any],
) -> None:
    provider = ToolCallingProvider(MockProvider(), calls=3)
    with provider.openai_client() as client:
        result = run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=EXPLICIT,
            stateful=True,
            **where,
        )
    bodies = [body for body in provider.mock.bodies if body is not None]
    later = bodies[1:]
    assert result.stopped == "answer" and later
    assert len({body["prompt_cache_key"] for body in bodies}) == 1
    for body in later:
        assert {item.get("type") for item in body["input"]} == {"function_call_output"}
        if where:
            assert body["conversation"] == "conv_1" and "previous_response_id" not in body
        else:
            assert body["previous_response_id"].startswith("resp")


def test_a_stateful_loop_needs_the_responses_api() -> None:
    with (
        ToolCallingProvider(MockProvider(), calls=1).openai_client() as client,
        pytest.raises(RenderError, match="stateful=True needs the Responses API"),
    ):
        run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=EXPLICIT,
            api="chat",
            stateful=True,
        )
