"""run_tool_loop: runs the tools the model asks for, sends the results back, stops at the
answer or the step limit; a failing or unknown tool becomes an error result."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    CacheStats,
    OpenAIClient,
    Prompt,
    RenderError,
    Segment,
    ToolResult,
    UsageError,
    arun_tool_loop,
    render_anthropic,
    run_tool_loop,
)
from prefixkit.testing.providers import MockProvider


def message(*content: dict[str, Any], stop_reason: str = "end_turn") -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": list(content),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def tool_use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


class ScriptedClaude(AnthropicClient):
    """An AnthropicClient whose replies come from a script; records the prompts it got."""

    def __init__(self, *replies: anthropic.types.Message) -> None:
        self.replies = list(replies)
        self.prompts: list[Prompt] = []

    def create(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[anthropic.types.Message, CacheStats]:
        self.prompts.append(prompt)
        return self.replies.pop(0), CacheStats(cached_tokens=len(self.prompts))


CLAUDE = "claude-sonnet-5"
PROMPT = Prompt(system="You plan trips.", messages=[Segment.dynamic("Weather in Oslo?")])
# past every provider's caching minimum, for the requests that are rendered and sent
LONG_PROMPT = Prompt(
    system=[Segment.static("You plan trips for travellers in Norway; answer briefly. " * 150)],
    messages=[Segment.dynamic("Weather in Oslo?")],
)


def last_results(prompt: Prompt) -> list[ToolResult]:
    return [b for b in prompt.messages[-1].blocks if isinstance(b, ToolResult)]


def test_loop_runs_each_requested_tool_and_stops_at_the_answer() -> None:
    client = ScriptedClaude(
        message(tool_use("t1", "get_weather", city="Oslo")),
        message({"type": "text", "text": "4 C and rain: take a coat."}),
    )
    result = run_tool_loop(
        client, PROMPT, {"get_weather": lambda city: f"{city}: 4 C"}, model="m", max_tokens=64
    )
    assert result.stopped == "answer" and result.text == "4 C and rain: take a coat."
    assert [turn.stats.cached_tokens for turn in result.turns] == [1, 2]
    assert last_results(client.prompts[1]) == [ToolResult("t1", "Oslo: 4 C")]
    assert client.prompts[1].render_text().startswith(client.prompts[0].render_text())


def test_a_failing_tool_and_an_unknown_tool_become_error_results() -> None:
    def broken(city: str) -> str:
        raise TimeoutError("weather service timed out")

    client = ScriptedClaude(
        message(tool_use("t1", "get_weather", city="Oslo"), tool_use("t2", "get_tide")),
        message({"type": "text", "text": "Sorry."}),
    )
    run_tool_loop(client, PROMPT, {"get_weather": broken}, model="m", max_tokens=64)
    failed, unknown = last_results(client.prompts[1])
    assert failed.is_error and "TimeoutError: weather service timed out" in str(failed.content)
    assert unknown.is_error and "no tool named 'get_tide'" in str(unknown.content)


def test_loop_stops_at_the_step_limit() -> None:
    client = ScriptedClaude(*(message(tool_use(f"t{i}", "ping")) for i in range(3)))
    result = run_tool_loop(client, PROMPT, {"ping": lambda: "pong"}, model="m", max_steps=2)
    assert result.stopped == "step_limit" and len(result.turns) == 2


def test_an_api_the_client_does_not_have_is_refused() -> None:
    with pytest.raises(RenderError, match="has no 'responses' API"):
        run_tool_loop(ScriptedClaude(), PROMPT, {}, model="m", api="responses")


SEARCH = {
    "type": "server_tool_use",
    "id": "srv1",
    "name": "web_search",
    "input": {"query": "Oslo weather"},
}


def test_a_paused_turn_is_sent_back_to_continue_not_taken_for_the_answer() -> None:
    client = ScriptedClaude(
        message(SEARCH, {"type": "text", "text": "Searching. "}, stop_reason="pause_turn"),
        message({"type": "text", "text": "4 C and rain."}),
    )
    result = run_tool_loop(client, LONG_PROMPT, {}, model="m", max_tokens=64)
    assert result.stopped == "answer" and len(result.turns) == 2
    continued: Any = render_anthropic(client.prompts[1], model=CLAUDE, max_tokens=64)["messages"]
    assert continued[-1]["role"] == "assistant"
    assert [block["type"] for block in continued[-1]["content"]] == ["server_tool_use", "text"]
    assert result.text == "Searching. 4 C and rain."


async def test_the_async_loop_runs_on_an_async_anthropic_client() -> None:
    mock = MockProvider(reply="4 C and rain.")
    client = AsyncAnthropicClient(mock.async_anthropic_client())
    result = await arun_tool_loop(client, LONG_PROMPT, {}, model="claude-sonnet-5", max_tokens=64)
    assert (result.stopped, result.text, mock.paths) == (
        "answer",
        "4 C and rain.",
        ["/v1/messages"],
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_the_async_loop_runs_on_an_async_openai_client(api: Any) -> None:
    mock = MockProvider(reply="4 C and rain.")
    client = AsyncOpenAIClient(mock.async_openai_client())
    result = await arun_tool_loop(client, LONG_PROMPT, {}, model="gpt-4o", api=api)
    assert (result.stopped, result.text) == ("answer", "4 C and rain.")
    assert len(mock.requests) == 1


async def test_an_async_tool_is_awaited_in_the_async_loop() -> None:
    async def get_weather(city: str) -> str:
        return f"{city}: 4 C"

    class AsyncScriptedClaude(AsyncAnthropicClient):
        def __init__(self, *replies: anthropic.types.Message) -> None:
            self.replies = list(replies)
            self.prompts: list[Prompt] = []

        async def create(
            self, prompt: Prompt, *, model: str, **options: Any
        ) -> tuple[anthropic.types.Message, CacheStats]:
            self.prompts.append(prompt)
            return self.replies.pop(0), CacheStats()

    client = AsyncScriptedClaude(
        message(tool_use("t1", "get_weather", city="Oslo")),
        message({"type": "text", "text": "4 C."}),
    )
    await arun_tool_loop(client, PROMPT, {"get_weather": get_weather}, model="m")
    assert last_results(client.prompts[1]) == [ToolResult("t1", "Oslo: 4 C")]


def test_an_async_client_in_the_sync_loop_is_refused_naming_the_async_loop() -> None:
    client: Any = AsyncAnthropicClient(MockProvider().async_anthropic_client())
    with pytest.raises(UsageError, match="arun_tool_loop"):
        run_tool_loop(client, PROMPT, {}, model="claude-sonnet-5", max_tokens=64)


def test_an_unwrapped_sdk_client_is_refused_naming_the_wrapper() -> None:
    client: Any = MockProvider().openai_client()
    with pytest.raises(UsageError, match="OpenAIClient"):
        run_tool_loop(client, PROMPT, {}, model="gpt-4o")


@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
@pytest.mark.parametrize("question", ["", "  \n"])
def test_an_empty_question_is_refused_for_every_provider(api: str, question: str) -> None:
    mock = MockProvider()
    client: Any = (
        AnthropicClient(mock.anthropic_client())
        if api == "anthropic"
        else OpenAIClient(mock.openai_client())
    )
    prompt = Prompt(system="You plan trips.", messages=[Segment.dynamic(question)])
    with pytest.raises(UsageError, match="question"):
        run_tool_loop(client, prompt, {}, model="m", api=api, max_tokens=64)  # type: ignore[arg-type]
    assert mock.requests == []


def test_next_question_asks_after_the_answer_keeping_the_loop_a_prefix() -> None:
    client = ScriptedClaude(
        message({"type": "text", "text": "4 C and rain."}),
        message({"type": "text", "text": "Bergen: 6 C."}),
    )
    first = run_tool_loop(client, PROMPT, {}, model="m")
    following = first.next_question("And in Bergen?")
    assert following.messages[-1] == Segment.dynamic("And in Bergen?")
    assert following.render_text().startswith(first.prompt.render_text())
    second = run_tool_loop(client, following, {}, model="m")
    assert second.text == "Bergen: 6 C."


def test_next_question_refuses_an_empty_question() -> None:
    first = run_tool_loop(
        ScriptedClaude(message({"type": "text", "text": "Hi."})), PROMPT, {}, model="m"
    )
    with pytest.raises(UsageError, match="empty"):
        first.next_question("")
