"""Stateful Responses loops against a mock that keeps conversations as OpenAI does: a
request on `previous_response_id` or in a `conversation` is read as the stored items
followed by its input. Tools are not carried over from one response to the next (OpenAI
keeps items, not request parameters), so each stateful request sends them again, and
reads the previous request from the cache."""

from __future__ import annotations

import json
import warnings
from typing import Any

import openai
import pytest
from prefixkit.sdk import OpenAIClient, Prompt, Segment, ToolResult, UsageError, run_tool_loop
from prefixkit.testing.providers import MockProvider

from .openai_tool_answers import ToolCallingProvider
from .prompts import support_prompt

MODEL = "gpt-5.6-sol"
QUESTION = "Why was I charged twice in March? Check each invoice you find."


def lookup_invoice(invoice_id: str) -> str:
    return "\n".join(
        f"{invoice_id} line {n}: egress {n * 37} GB at $0.09/GB, status "
        f"{'paid' if n % 2 else 'refunded'}"
        for n in range(1, 9)
    )


def stateful_loop(where: str, **options: Any) -> tuple[Any, MockProvider]:
    provider = ToolCallingProvider(MockProvider(), calls=3)
    with provider.openai_client() as client:
        if where == "conversation":
            options["conversation"] = client.conversations.create().id
        result = run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=MODEL,
            stateful=True,
            **options,
        )
    return result, provider.mock


def response_bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.path.endswith("/responses") and r.body]


@pytest.mark.parametrize("where", ["previous_response_id", "conversation"])
def test_every_stateful_request_sends_the_tools_of_the_first(where: str) -> None:
    result, mock = stateful_loop(where)
    bodies = response_bodies(mock)
    assert result.stopped == "answer" and len(bodies) == 4
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)


@pytest.mark.parametrize("where", ["previous_response_id", "conversation"])
def test_each_stateful_request_reads_the_previous_one_from_the_cache(where: str) -> None:
    result, _ = stateful_loop(where)
    prompts = [turn.stats.input_tokens for turn in result.turns]
    cached = [turn.stats.cached_tokens for turn in result.turns]
    assert cached[0] == 0
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.9 * before, (prompts, cached)


def test_a_stateful_request_sends_only_the_new_results_but_is_read_whole() -> None:
    result, mock = stateful_loop("previous_response_id")
    bodies = response_bodies(mock)
    assert [len(body["input"]) for body in bodies[1:]] == [1, 1, 1]
    prompts = [turn.stats.input_tokens for turn in result.turns]
    assert prompts == sorted(prompts) and len(set(prompts)) == 4


def test_the_mock_refuses_a_previous_response_that_was_not_stored() -> None:
    mock = MockProvider()
    with mock.openai_client() as client:
        first = client.responses.create(model=MODEL, input="hi", store=False)
        with pytest.raises(openai.BadRequestError, match="not found"):
            client.responses.create(model=MODEL, input="again", previous_response_id=first.id)


def test_a_result_for_a_call_on_the_server_reaches_the_model_after_its_call() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)
    with provider.openai_client() as client:
        prefixkit = OpenAIClient(client)
        first, _ = prefixkit.responses(support_prompt(QUESTION), model=MODEL)
        call = first.output[-1]
        assert call.type == "function_call"
        follow = Prompt(messages=[Segment.session([ToolResult(call.call_id, "INV-1 paid")])])
        prefixkit.responses(follow, model=MODEL, previous_response_id=first.id)
    stored = provider.mock._stored_responses[f"resp_mock{len(provider.mock.requests):04d}"]
    kinds = [item.get("type", "message") for item in stored]
    assert kinds[-2:] == ["function_call_output", "message"]
    assert json.dumps(stored).count("INV-1 paid") == 1


def test_a_stateful_loop_without_a_stored_response_is_refused_before_sending() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=2)
    with (
        provider.openai_client() as client,
        pytest.raises(UsageError, match="stateful=True with store=False") as caught,
    ):
        run_tool_loop(
            OpenAIClient(client),
            support_prompt(QUESTION),
            {"lookup_invoice": lookup_invoice},
            model=MODEL,
            stateful=True,
            store=False,
        )
    assert caught.value.argument == "store" and not provider.mock.requests


def test_a_finished_stateful_loop_goes_on_from_its_last_response_with_the_next_question() -> None:
    provider = ToolCallingProvider(MockProvider(), calls=1)
    tools = {"lookup_invoice": lookup_invoice}
    with provider.openai_client() as raw:
        client = OpenAIClient(raw)
        first = run_tool_loop(client, support_prompt(QUESTION), tools, model=MODEL, stateful=True)
        follow = first.next_question("And was April charged twice too?")
        second = run_tool_loop(
            client,
            follow,
            tools,
            model=MODEL,
            stateful=True,
            previous_response_id=first.response_id,
        )
    bodies = response_bodies(provider.mock)
    opening = bodies[len(first.turns)]
    assert first.response_id.startswith("resp_") and second.stopped == "answer"
    assert opening["previous_response_id"] == first.response_id
    assert [item["content"][0]["text"] for item in opening["input"]] == [
        "And was April charged twice too?"
    ]
    assert opening["tools"] == bodies[0]["tools"]
    assert len({body["prompt_cache_key"] for body in bodies}) == 1
    last_of_first = first.turns[-1].stats.input_tokens
    assert second.turns[0].stats.cached_tokens >= 0.9 * last_of_first
    kept = second.prompt.messages[: len(follow.messages)]
    assert [m.digest for m in kept] == [m.digest for m in follow.messages]


def test_every_turn_names_the_reply_it_read() -> None:
    result, mock = stateful_loop("previous_response_id")
    later = response_bodies(mock)[1:]
    ids = [turn.response_id for turn in result.turns]
    assert [body["previous_response_id"] for body in later] == ids[:-1]
    assert result.response_id == ids[-1]


def test_a_stateful_continuation_that_resends_its_tools_is_not_warned_of_a_short_prefix() -> None:
    """By hand, as the docs say: the tools go with every request on previous_response_id
    (OpenAI keeps items, not tools); the static prefix lives on the server."""
    provider = ToolCallingProvider(MockProvider(), calls=1)
    with provider.openai_client() as client:
        prefixkit = OpenAIClient(client)
        first, _ = prefixkit.responses(support_prompt("Why two charges?"), model=MODEL)
        call = first.output[-1]
        assert call.type == "function_call"
        follow = Prompt(
            tools=support_prompt().tools,
            messages=[Segment.session([ToolResult(call.call_id, "INV-1 paid")])],
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            prefixkit.responses(follow, model=MODEL, previous_response_id=first.id)
