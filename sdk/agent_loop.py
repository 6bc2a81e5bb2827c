"""A multi-step tool loop: the model asks for tools, the app runs them, the results go back.

    result = run_tool_loop(AnthropicClient(), prompt, {"get_weather": get_weather},
                           model="claude-sonnet-5", max_tokens=1024)
    result.text                                  # the final answer
    [turn.stats.cached_tokens for turn in result.turns]

Each step sends the whole conversation through a prefixkit client
(`AnthropicClient.create`, `OpenAIClient.responses`, `VLLMClient.chat` or
`OpenAIClient.chat`), reads the tool calls from the reply, runs each with the
tool's function (keyword arguments from the call; a raised exception becomes an
error result the model sees), and appends the reply and the results as new
SESSION segments with `Prompt.next_turn`, so every earlier block is rendered
byte-identically and the previous request stays a cached prefix of the next.
The reply is kept as the provider sent it (Anthropic content blocks, Responses
output items); chat replies are kept as text and `ToolCall`s. The loop ends at
the first reply without tool calls, or after `max_steps` requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .cache_stats import CacheStats
from .clients import AnthropicClient, OpenAIClient, VLLMClient
from .content import ContentBlock, Text, ToolCall, ToolResult
from .errors import RenderError, UsageError
from .prompt import Prompt
from .segment import Segment

__all__ = ["LoopResult", "LoopTurn", "ToolFunction", "run_tool_loop"]

ToolFunction = Callable[..., Any]
LoopApi = Literal["anthropic", "responses", "chat"]


@dataclass(frozen=True)
class LoopTurn:
    """One request of the loop: its cache statistics, the tool calls it asked for, its text."""

    number: int
    stats: CacheStats
    tool_calls: tuple[ToolCall, ...]
    text: str


@dataclass(frozen=True)
class LoopResult:
    """The final answer (`text`), every turn, and the conversation that produced it.

    `stopped` is "answer" when the model replied without tool calls, "step_limit"
    when `max_steps` requests were sent first.
    """

    text: str
    turns: tuple[LoopTurn, ...]
    prompt: Prompt
    stopped: Literal["answer", "step_limit"]


@dataclass(frozen=True)
class _Reply:
    content: Sequence[Any]
    calls: tuple[ToolCall, ...]
    text: str
    stats: CacheStats


def _send(
    client: AnthropicClient | OpenAIClient | VLLMClient,
    api: LoopApi,
    prompt: Prompt,
    model: str,
    options: Mapping[str, Any],
) -> _Reply:
    if isinstance(client, AnthropicClient):
        message, stats = client.create(prompt, model=model, **options)
        calls = tuple(
            ToolCall(block.id, block.name, dict(block.input))
            for block in message.content
            if block.type == "tool_use"
        )
        text = "".join(block.text for block in message.content if block.type == "text")
        return _Reply(list(message.content), calls, text, stats)
    if isinstance(client, OpenAIClient) and api == "responses":
        response, stats = client.responses(prompt, model=model, **options)
        calls = tuple(
            ToolCall(item.call_id, item.name, item.arguments)
            for item in response.output
            if item.type == "function_call"
        )
        return _Reply(list(response.output), calls, response.output_text, stats)
    completion, stats = client.chat(prompt, model=model, **options)
    choice = completion.choices[0].message
    calls = tuple(
        ToolCall(call.id, call.function.name, call.function.arguments)
        for call in choice.tool_calls or ()
        if call.type == "function"
    )
    content: list[ContentBlock] = [Text(choice.content)] if choice.content else []
    return _Reply([*content, *calls], calls, choice.content or "", stats)


def _run(call: ToolCall, tools: Mapping[str, ToolFunction]) -> ToolResult:
    function = tools.get(call.name)
    if function is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(call.id, f"no tool named {call.name!r} (tools: {known})", True)
    try:
        value = function(**call.argument_dict())
    except Exception as error:  # the model sees the failure and may retry or answer
        return ToolResult(call.id, f"{type(error).__name__}: {error}", True)
    return ToolResult(call.id, value if isinstance(value, str) else json.dumps(value))


def run_tool_loop(
    client: AnthropicClient | OpenAIClient | VLLMClient,
    prompt: Prompt,
    tools: Mapping[str, ToolFunction],
    *,
    model: str,
    api: LoopApi | None = None,
    max_steps: int = 8,
    step_options: Callable[[int], Mapping[str, Any]] | None = None,
    **options: Any,
) -> LoopResult:
    """Run the tool loop from `prompt` until the model answers without tools.

    - `tools`: the app's functions by tool name (the prompt's tool
      definitions describe them to the model).
    - `api`: for an `OpenAIClient`, "responses" (default) or "chat".
    - `max_steps`: requests sent at most.
    - `step_options(step)`: extra options for request `step` (from 1), merged
      over `options` (e.g. a `tool_choice` that forces a tool on a small
      self-hosted model, then lets it answer).
    - `options`: passed to every request (`max_tokens` for Anthropic,
      `tenant`, `reuse_interval`, ...).

    Raises `UsageError` for `max_steps` < 1, `RenderError` for an `api` the client
    does not have; provider and render errors propagate.
    """
    if max_steps < 1:
        raise UsageError(
            f"max_steps must be at least 1, got {max_steps}", argument="max_steps", value=max_steps
        )
    chosen: LoopApi = api or (
        "anthropic"
        if isinstance(client, AnthropicClient)
        else "responses"
        if isinstance(client, OpenAIClient)
        else "chat"
    )
    expected = {AnthropicClient: ("anthropic",), OpenAIClient: ("responses", "chat")}
    allowed = next((v for k, v in expected.items() if isinstance(client, k)), ("chat",))
    if chosen not in allowed:
        raise RenderError(
            f"{type(client).__name__} has no {chosen!r} API: use one of {', '.join(allowed)}",
            provider=chosen,
        )
    turns: list[LoopTurn] = []
    for step in range(1, max_steps + 1):
        merged = {**options, **(step_options(step) if step_options is not None else {})}
        reply = _send(client, chosen, prompt, model, merged)
        turns.append(LoopTurn(step, reply.stats, reply.calls, reply.text))
        if not reply.calls:
            prompt = prompt.next_turn(_reply_segment(reply), None)
            return LoopResult(reply.text, tuple(turns), prompt, "answer")
        results = [_run(call, tools) for call in reply.calls]
        prompt = prompt.next_turn(_reply_segment(reply), Segment.session(results))
    return LoopResult(turns[-1].text, tuple(turns), prompt, "step_limit")


def _reply_segment(reply: _Reply) -> Segment:
    return Segment.session(list(reply.content), role="assistant")
