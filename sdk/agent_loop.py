"""A multi-step tool loop: the model asks for tools, the app runs them, the results go back.

    result = run_tool_loop(AnthropicClient(), prompt, {"get_weather": get_weather},
                           model="claude-sonnet-5", max_tokens=1024)
    result.text                                  # the final answer
    [turn.stats.cached_tokens for turn in result.turns]

Each step sends the whole conversation through a prefixkit client
(`AnthropicClient.create`, `OpenAIClient.responses`, `VLLMClient.chat` or
`OpenAIClient.chat`), reads the tool calls from the reply, runs each with the
tool's function (keyword arguments from the call; a raised exception becomes an
error result the model sees; text, JSON data, `Text`/`Image` blocks or the
provider's own `Native` blocks go back as the result), and appends the reply
and the results as new
SESSION segments with `Prompt.next_turn`, so every earlier block is rendered
byte-identically and the previous request stays a cached prefix of the next.
The reply is kept as the provider sent it (Anthropic content blocks, Responses
output items); chat replies are kept as text and `ToolCall`s. The loop ends at
the first reply without tool calls, or after `max_steps` requests.

An Anthropic reply that stopped with `pause_turn` (a long server tool turn
paused by the API) is not an answer: as Anthropic documents, it is sent back
as it is, with no new user turn, and the model continues it; the answer's
text is the text of the whole turn. `arun_tool_loop` is the same loop for the
async clients (`AsyncAnthropicClient`, `AsyncOpenAIClient`, `AsyncVLLMClient`;
a tool may then be an async function, and the tools of one reply run
concurrently). `LoopResult.next_question` asks the next
question after a finished loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .cache_stats import CacheStats
from .clients import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncVLLMClient,
    OpenAIClient,
    StreamResult,
    VLLMClient,
)
from .content import ContentBlock, Image, Native, Text, ToolCall, ToolResult
from .errors import RenderError, UsageError
from .prompt import Prompt
from .segment import Segment, Stability

__all__ = ["LoopResult", "LoopTurn", "ToolFunction", "arun_tool_loop", "run_tool_loop"]

SyncClient = AnthropicClient | OpenAIClient | VLLMClient
AsyncClient = AsyncAnthropicClient | AsyncOpenAIClient | AsyncVLLMClient

ToolFunction = Callable[..., Any]
LoopApi = Literal["anthropic", "responses", "chat"]


@dataclass(frozen=True)
class LoopTurn:
    """One request of the loop: its cache statistics, the tool calls it asked for, its text,
    and the provider's id of the reply (`response_id`: the Responses response, the
    Anthropic message, the Chat completion)."""

    number: int
    stats: CacheStats
    tool_calls: tuple[ToolCall, ...]
    text: str
    response_id: str = ""


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

    @property
    def response_id(self) -> str:
        """The provider's id of the last reply: with a stateful Responses loop, the
        `previous_response_id` to continue the conversation from."""
        return self.turns[-1].response_id if self.turns else ""

    @property
    def stats(self) -> CacheStats:
        """The cache statistics of every request of the loop together (`CacheStats.total`)."""
        return CacheStats.total(turn.stats for turn in self.turns)

    def next_question(self, question: str | Segment | Iterable[Any]) -> Prompt:
        """The conversation so far (ending with the answer) and the user's next question.

        Pass the returned prompt to the next `run_tool_loop`: every earlier
        block renders as before, so this loop's last request is a cached
        prefix of the next one. `question` is text, a segment, or blocks; an
        empty question is refused (`UsageError`), as every provider would.
        """
        segment = (
            question
            if isinstance(question, Segment)
            else Segment.dynamic(question if isinstance(question, str) else list(question))
        )
        _check_question(segment)
        history = [
            dataclasses.replace(m, stability=Stability.SESSION)
            if m.stability > Stability.SESSION
            else m
            for m in self.prompt.messages
        ]
        return dataclasses.replace(self.prompt, messages=(*history, segment))


@dataclass(frozen=True)
class _Reply:
    content: Sequence[Any]
    calls: tuple[ToolCall, ...]
    text: str
    stats: CacheStats
    paused: bool = False
    ident: str = ""  # the provider's id of the reply


def _anthropic_reply(message: Any, stats: CacheStats) -> _Reply:
    calls = tuple(
        ToolCall(block.id, block.name, dict(block.input))
        for block in message.content
        if block.type == "tool_use"
    )
    text = "".join(block.text for block in message.content if block.type == "text")
    paused = message.stop_reason == "pause_turn"
    return _Reply(list(message.content), calls, text, stats, paused, str(message.id))


def _responses_reply(response: Any, stats: CacheStats) -> _Reply:
    calls = tuple(
        ToolCall(item.call_id, item.name, item.arguments)
        for item in response.output
        if item.type == "function_call"
    )
    return _Reply(list(response.output), calls, response.output_text, stats, ident=response.id)


def _chat_reply(completion: Any, stats: CacheStats) -> _Reply:
    choice = completion.choices[0].message
    calls = tuple(
        ToolCall(call.id, call.function.name, call.function.arguments)
        for call in choice.tool_calls or ()
        if call.type == "function"
    )
    content: list[ContentBlock] = [Text(choice.content)] if choice.content else []
    return _Reply([*content, *calls], calls, choice.content or "", stats, ident=completion.id)


def _streamed_reply(api: LoopApi, streamed: StreamResult) -> _Reply:
    """A streamed reply from its final object (the text alone when the stream had none)."""
    if streamed.response is None:
        return _Reply(
            [Text(streamed.text)] if streamed.text else [], (), streamed.text, streamed.stats
        )
    if api == "anthropic":
        return _anthropic_reply(streamed.response, streamed.stats)
    if api == "responses":
        return _responses_reply(streamed.response, streamed.stats)
    return _chat_reply(streamed.response, streamed.stats)


def _send(
    client: SyncClient,
    api: LoopApi,
    prompt: Prompt,
    model: str,
    options: Mapping[str, Any],
    on_text: Callable[[str], None] | None = None,
) -> _Reply:
    if on_text is not None:
        if isinstance(client, AnthropicClient):
            streamed = client.stream(prompt, model=model, on_text=on_text, **options)
        elif isinstance(client, OpenAIClient) and api == "responses":
            streamed = client.stream_responses(prompt, model=model, on_text=on_text, **options)
        else:
            streamed = client.stream_chat(prompt, model=model, on_text=on_text, **options)
        return _streamed_reply(api, streamed)
    if isinstance(client, AnthropicClient):
        return _anthropic_reply(*client.create(prompt, model=model, **options))
    if isinstance(client, OpenAIClient) and api == "responses":
        return _responses_reply(*client.responses(prompt, model=model, **options))
    return _chat_reply(*client.chat(prompt, model=model, **options))


async def _send_async(
    client: AsyncClient,
    api: LoopApi,
    prompt: Prompt,
    model: str,
    options: Mapping[str, Any],
    on_text: Callable[[str], None] | None = None,
) -> _Reply:
    if on_text is not None:
        if isinstance(client, AsyncAnthropicClient):
            streamed = await client.stream(prompt, model=model, on_text=on_text, **options)
        elif isinstance(client, AsyncOpenAIClient) and api == "responses":
            streamed = await client.stream_responses(
                prompt, model=model, on_text=on_text, **options
            )
        else:
            streamed = await client.stream_chat(prompt, model=model, on_text=on_text, **options)
        return _streamed_reply(api, streamed)
    if isinstance(client, AsyncAnthropicClient):
        return _anthropic_reply(*await client.create(prompt, model=model, **options))
    if isinstance(client, AsyncOpenAIClient) and api == "responses":
        return _responses_reply(*await client.responses(prompt, model=model, **options))
    return _chat_reply(*await client.chat(prompt, model=model, **options))


def _error_result(call: ToolCall, tools: Mapping[str, ToolFunction]) -> ToolResult | None:
    if call.name in tools:
        return None
    known = ", ".join(sorted(tools)) or "none"
    return ToolResult(call.id, f"no tool named {call.name!r} (tools: {known})", True)


_NATIVE_TEXT: dict[LoopApi, str] = {"anthropic": "text", "responses": "input_text", "chat": "text"}


def _native_result(call: ToolCall, blocks: tuple[Any, ...], api: LoopApi) -> Native:
    """`blocks` (the provider's own, and `Text`) as the provider's tool result for `call`."""
    items: list[Mapping[str, Any]] = []
    for block in blocks:
        if isinstance(block, Text):
            items.append({"type": _NATIVE_TEXT[api], "text": block.text})
        elif isinstance(block, Native) and block.dialect == api and block.level == "block":
            items.append(block.item)
        else:
            shown = f"a {block.dialect} {block.kind}" if isinstance(block, Native) else "an Image"
            raise UsageError(
                f"tool {call.name!r} returned {shown} among provider blocks for the {api!r} "
                f"API: return blocks of the {api!r} API (Native(..., {api!r})) and Text, or "
                "portable Text and Image blocks alone",
                argument="tools",
                value=call.name,
            )
    if api == "anthropic":
        return Native({"type": "tool_result", "tool_use_id": call.id, "content": items}, api)
    if api == "responses":
        item = {"type": "function_call_output", "call_id": call.id, "output": items}
        return Native(item, api, "message")
    return Native({"role": "tool", "tool_call_id": call.id, "content": items}, api, "message")


def _result(call: ToolCall, value: Any, api: LoopApi) -> ToolResult | Native:
    """A tool's return value as the result sent back: text as it is; `Text` and `Image`
    blocks (one, or a sequence) as the result's blocks; the provider's own blocks
    (`Native`, with `Text`) as the provider's tool result; anything else as JSON."""
    if isinstance(value, str):
        return ToolResult(call.id, value)
    blocks: tuple[Any, ...] | None = (value,) if isinstance(value, (Text, Image, Native)) else None
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (Text, Image, Native)) for v in value)
    ):
        blocks = tuple(value)
    if blocks is not None:
        if any(isinstance(block, Native) for block in blocks):
            return _native_result(call, blocks, api)
        return ToolResult(call.id, blocks)
    try:
        return ToolResult(call.id, json.dumps(value))
    except (TypeError, ValueError) as error:
        raise UsageError(
            f"tool {call.name!r} returned a {type(value).__name__}, which is not JSON ({error}): "
            "return text, JSON data, or content blocks (Text, Image, Native)",
            argument="tools",
            value=call.name,
        ) from error


def _run(call: ToolCall, tools: Mapping[str, ToolFunction], api: LoopApi) -> ToolResult | Native:
    unknown = _error_result(call, tools)
    if unknown is not None:
        return unknown
    try:
        value = tools[call.name](**call.argument_dict())
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if callable(close):
                close()
            raise UsageError(
                f"tool {call.name!r} is an async function: run the loop with arun_tool_loop "
                "and an async client",
                argument="tools",
                value=call.name,
            )
    except UsageError:
        raise
    except Exception as error:  # the model sees the failure and may retry or answer
        return ToolResult(call.id, f"{type(error).__name__}: {error}", True)
    return _result(call, value, api)


async def _run_async(
    call: ToolCall, tools: Mapping[str, ToolFunction], api: LoopApi
) -> ToolResult | Native:
    unknown = _error_result(call, tools)
    if unknown is not None:
        return unknown
    try:
        value = tools[call.name](**call.argument_dict())
        if inspect.isawaitable(value):
            value = await value
    except Exception as error:  # the model sees the failure and may retry or answer
        return ToolResult(call.id, f"{type(error).__name__}: {error}", True)
    return _result(call, value, api)


def _check_question(segment: Segment) -> None:
    if segment.role == "user" and not segment.blocks and not segment.text.strip():
        raise UsageError(
            f"the question ({segment.label}) is empty: Anthropic refuses empty text and an "
            "empty message asks the model nothing; pass the user's question, or end the "
            "conversation",
            argument="question",
            value=segment.text,
        )


def _check_prompt(prompt: Prompt) -> None:
    if prompt.messages and prompt.messages[-1].role == "user":
        _check_question(prompt.messages[-1])


def _chosen_api(client: SyncClient | AsyncClient, api: LoopApi | None) -> LoopApi:
    anthropic = (AnthropicClient, AsyncAnthropicClient)
    openai = (OpenAIClient, AsyncOpenAIClient)
    chosen: LoopApi = api or (
        "anthropic"
        if isinstance(client, anthropic)
        else "responses"
        if isinstance(client, openai)
        else "chat"
    )
    allowed: tuple[LoopApi, ...] = (
        ("anthropic",)
        if isinstance(client, anthropic)
        else ("responses", "chat")
        if isinstance(client, openai)
        else ("chat",)
    )
    if chosen not in allowed:
        raise RenderError(
            f"{type(client).__name__} has no {chosen!r} API: use one of {', '.join(allowed)}",
            provider=chosen,
        )
    return chosen


def _check_start(client: object, sync: bool, prompt: Prompt, max_steps: int) -> None:
    if max_steps < 1:
        raise UsageError(
            f"max_steps must be at least 1, got {max_steps}", argument="max_steps", value=max_steps
        )
    expected: tuple[type, ...] = (
        (AnthropicClient, OpenAIClient, VLLMClient)
        if sync
        else (AsyncAnthropicClient, AsyncOpenAIClient, AsyncVLLMClient)
    )
    if not isinstance(client, expected):
        if sync and isinstance(client, (AsyncAnthropicClient, AsyncOpenAIClient, AsyncVLLMClient)):
            fix = "await arun_tool_loop(...) with it"
        elif not sync and isinstance(client, (AnthropicClient, OpenAIClient, VLLMClient)):
            fix = "call run_tool_loop(...) with it"
        else:
            names = ", ".join(kind.__name__ for kind in expected)
            fix = f"wrap it in a prefixkit client ({names}), e.g. AnthropicClient(client)"
        function = "run_tool_loop" if sync else "arun_tool_loop"
        raise UsageError(
            f"{function} got a {type(client).__name__}: {fix}",
            argument="client",
            value=type(client).__name__,
        )
    _check_prompt(prompt)


class _Turns:
    """The loop's bookkeeping: turns sent, text of the current (possibly paused) turn."""

    def __init__(
        self, stateful: bool, api: LoopApi, options: Mapping[str, Any], prompt: Prompt
    ) -> None:
        if stateful and api != "responses":
            raise RenderError(
                f"stateful=True needs the Responses API (the server keeps the conversation), "
                f"not {api!r}: use an OpenAIClient with api='responses'",
                provider=api,
            )
        if stateful and options.get("store") is False and "conversation" not in options:
            raise UsageError(
                "stateful=True with store=False: OpenAI keeps no response to continue from "
                "(previous_response_id needs a stored response); keep store, or drop "
                "stateful=True to send the whole conversation each time (with "
                "include=['reasoning.encrypted_content'] for a reasoning model)",
                argument="store",
                value=False,
            )
        self.stateful = stateful
        self.turns: list[LoopTurn] = []
        self.text = ""
        self.sending: Prompt | None = None  # what the next request sends, when not the prompt
        self.previous = ""
        continued = options.get("previous_response_id")
        new = _after_last_reply(prompt) if stateful and isinstance(continued, str) else None
        if isinstance(continued, str) and new:
            # the server holds the conversation up to that response: send what follows it
            self.previous = continued
            self.sending = _continuation(prompt, new)

    def request(self, prompt: Prompt, options: dict[str, Any]) -> Prompt:
        """The prompt to send next; `options` gain `previous_response_id` when stateful."""
        if self.sending is None:
            return prompt
        if "conversation" not in options:
            options["previous_response_id"] = self.previous
        return self.sending

    def add(self, step: int, reply: _Reply) -> None:
        self.turns.append(LoopTurn(step, reply.stats, reply.calls, reply.text, reply.ident))
        self.text += reply.text

    def after(self, prompt: Prompt, reply: _Reply, results: list[ToolResult | Native]) -> Prompt:
        """The prompt for the next request (the reply, then the tool results if any)."""
        question = Segment.session(results) if results else None
        following = prompt.next_turn(_reply_segment(reply), question)
        if not reply.paused:
            self.text = ""
        if self.stateful:
            self.previous = reply.ident
            self.sending = _continuation(prompt, [question]) if question is not None else None
        return following


def run_tool_loop(
    client: SyncClient,
    prompt: Prompt,
    tools: Mapping[str, ToolFunction],
    *,
    model: str,
    api: LoopApi | None = None,
    max_steps: int = 8,
    step_options: Callable[[int], Mapping[str, Any]] | None = None,
    stateful: bool = False,
    on_text: Callable[[str], None] | None = None,
    **options: Any,
) -> LoopResult:
    """Run the tool loop from `prompt` until the model answers without tools.

    - `client`: `AnthropicClient`, `OpenAIClient` or `VLLMClient` (for the
      async ones, `await arun_tool_loop(...)`).
    - `tools`: the app's functions by tool name (the prompt's tool
      definitions describe them to the model).
    - `api`: for an `OpenAIClient`, "responses" (default) or "chat".
    - `max_steps`: requests sent at most (a paused turn's continuation counts).
    - `step_options(step)`: extra options for request `step` (from 1), merged
      over `options` (e.g. a `tool_choice` that forces a tool on a small
      self-hosted model, then lets it answer).
    - `stateful` (Responses): the server keeps the conversation; after the
      first request each one sends only what is new (the tool results) and the
      tools (OpenAI keeps a conversation's items, not its tools), with
      `previous_response_id` set to the last response, or in the
      `conversation=` given in `options`. The client keeps the first
      request's `prompt_cache_key`; `LoopResult.prompt` is the whole
      conversation all the same. To go on from a finished stateful loop, pass
      `result.next_question(...)` with `previous_response_id=result.response_id`:
      the first request then sends only what follows the last reply.
    - `on_text`: stream every request (the client's `stream`, `stream_chat`
      or `stream_responses`) and call `on_text(piece)` with each text delta
      as it arrives, to show the replies while they stream.
    - `options`: passed to every request (`max_tokens` for Anthropic,
      `tenant`, `reuse_interval`, ...).

    Raises `UsageError` for `max_steps` < 1, an async or unwrapped client, a
    prompt whose last user message is empty, or `stateful=True` with
    `store=False` on `previous_response_id`; `RenderError` for an `api` the
    client does not have; provider and render errors propagate.
    """
    _check_start(client, True, prompt, max_steps)
    chosen = _chosen_api(client, api)
    state = _Turns(stateful, chosen, options, prompt)
    for step in range(1, max_steps + 1):
        merged = {**options, **(step_options(step) if step_options is not None else {})}
        reply = _send(client, chosen, state.request(prompt, merged), model, merged, on_text)
        state.add(step, reply)
        text = state.text
        results = [] if reply.paused else [_run(call, tools, chosen) for call in reply.calls]
        prompt = state.after(prompt, reply, results)
        if not reply.calls and not reply.paused:
            return LoopResult(text, tuple(state.turns), prompt, "answer")
    return LoopResult(state.turns[-1].text, tuple(state.turns), prompt, "step_limit")


async def arun_tool_loop(
    client: AsyncClient,
    prompt: Prompt,
    tools: Mapping[str, ToolFunction],
    *,
    model: str,
    api: LoopApi | None = None,
    max_steps: int = 8,
    step_options: Callable[[int], Mapping[str, Any]] | None = None,
    stateful: bool = False,
    on_text: Callable[[str], None] | None = None,
    **options: Any,
) -> LoopResult:
    """`run_tool_loop` for the async clients (`AsyncAnthropicClient`,
    `AsyncOpenAIClient`, `AsyncVLLMClient`); a tool may be an async function.

    The tools a reply asks for run concurrently (an async tool awaiting I/O
    does not wait for the one before it); their results go back in call order."""
    _check_start(client, False, prompt, max_steps)
    chosen = _chosen_api(client, api)
    state = _Turns(stateful, chosen, options, prompt)
    for step in range(1, max_steps + 1):
        merged = {**options, **(step_options(step) if step_options is not None else {})}
        sending = state.request(prompt, merged)
        reply = await _send_async(client, chosen, sending, model, merged, on_text)
        state.add(step, reply)
        text = state.text
        # the calls of one reply are independent: their tools run concurrently
        calls = () if reply.paused else reply.calls
        results = list(await asyncio.gather(*(_run_async(call, tools, chosen) for call in calls)))
        prompt = state.after(prompt, reply, results)
        if not reply.calls and not reply.paused:
            return LoopResult(text, tuple(state.turns), prompt, "answer")
    return LoopResult(state.turns[-1].text, tuple(state.turns), prompt, "step_limit")


def _continuation(prompt: Prompt, new: Sequence[Segment]) -> Prompt:
    """What a stateful request sends: the new messages, and the tools again (the server
    keeps a conversation's items, not its tools). The static prefix lives on the server,
    in the first request; here the tools are the session's, not a prefix of their own."""
    tools = [dataclasses.replace(tool, stability=Stability.SESSION) for tool in prompt.tools]
    return Prompt(tools=tools, messages=new, sort_tools=False)


def _after_last_reply(prompt: Prompt) -> list[Segment] | None:
    """The messages after the prompt's last assistant turn; None when it has none."""
    replies = [i for i, m in enumerate(prompt.messages) if m.role == "assistant"]
    return list(prompt.messages[replies[-1] + 1 :]) if replies else None


def _reply_segment(reply: _Reply) -> Segment:
    return Segment.session(list(reply.content), role="assistant")
