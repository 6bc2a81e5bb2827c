"""run_tool_loop: runs the tools the model asks for, sends the results back, stops at the
answer or the step limit; a failing or unknown tool becomes an error result."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    CacheStats,
    Prompt,
    RenderError,
    Segment,
    ToolResult,
    run_tool_loop,
)


def message(*content: dict[str, Any]) -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": list(content),
            "stop_reason": "end_turn",
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


PROMPT = Prompt(system="You plan trips.", messages=[Segment.dynamic("Weather in Oslo?")])


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
