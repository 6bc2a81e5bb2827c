"""Thin wrappers over the official clients: render, send, measure.

Each wrapper holds an official client (`anthropic.Anthropic`,
`openai.OpenAI`, or their async twins; an `openai` client pointed at a vLLM
server's base URL for vLLM), renders a `Prompt` with the matching renderer,
sends it, and returns `(response, CacheStats)`. The streaming methods return a
`StreamResult` with the text, the final usage as `CacheStats`, and the time to
first token (first content delta after the request was sent):

- Anthropic: `messages.stream`; usage from `message_start` (cache counters)
  merged with `message_delta` (output tokens) by the SDK;
- OpenAI / vLLM Chat: `stream=True` with `stream_options.include_usage`, the
  usage arrives in the last chunk; the chunks (streamed tool calls included)
  are assembled into the final `ChatCompletion` by the openai SDK's
  `ChatCompletionStreamState`;
- OpenAI Responses: `stream=True`, usage in `response.completed`.

Every `StreamResult` carries the reply's tool calls as `ToolCall`s.

Stateful Responses: `OpenAIClient.responses` (and the streaming and async
twins) remember the `prompt_cache_key` each response was sent with; a later
request that continues it (`previous_response_id=`, or the same
`conversation=`) without a key of its own is sent with the same key, so a
conversation stays on one cache even when its later inputs (tool results
only) have no static prefix to derive a key from.

Options not consumed by the renderer (metadata, tool_choice, ...) are passed
through to the API call; `stream=True` given to a non-streaming method is a
`UsageError` naming the streaming method to call instead. Nothing here retries or caches responses: that is
the official client's job.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .anthropic_request import cacheable_prefixes, render_anthropic, render_anthropic_beta
from .anthropic_token_counter import AnthropicTokenCounter
from .block_hash import block_hashes
from .cache_stats import CacheStats, UsageShape
from .content import ToolCall
from .errors import UsageError
from .extras import require_extra
from .hit_rate import HitRateMonitor
from .miss_watch import MissWatch
from .model_facts import model_info
from .openai_request import render_openai_chat, render_openai_responses
from .prompt import Prompt
from .static_prefix_guard import StaticPrefixGuard
from .telemetry import traced
from .tokenizer import HFTokenizer
from .vllm_request import render_vllm

if TYPE_CHECKING:
    import anthropic
    import openai

__all__ = [
    "AnthropicClient",
    "AsyncAnthropicClient",
    "AsyncOpenAIClient",
    "AsyncVLLMClient",
    "OpenAIClient",
    "StreamResult",
    "VLLMClient",
]


@dataclass(frozen=True)
class StreamResult:
    """A streamed reply: its text, cache statistics and timings.

    `ttft_seconds` is None when the stream carried no content delta;
    `response` is the SDK's final object (Anthropic `Message`, Responses
    `Response`, Chat `ChatCompletion` assembled from the chunks), None when
    the stream ended before one; `tool_calls` are the calls the model asked
    for, in order (empty for a text answer).
    """

    text: str
    stats: CacheStats
    ttft_seconds: float | None
    total_seconds: float
    response: Any = None
    tool_calls: tuple[ToolCall, ...] = ()


class _Clock:
    """Time to the first content delta, measured from construction; each text delta is
    handed to `on_text` as it arrives."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None
        self.on_text = on_text

    def content(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.start

    def text(self, piece: str) -> None:
        self.content()
        if self.on_text is not None:
            self.on_text(piece)

    def result(
        self, text: str, stats: CacheStats, response: Any = None, calls: tuple[ToolCall, ...] = ()
    ) -> StreamResult:
        elapsed = time.perf_counter() - self.start
        return StreamResult(text, stats, self.first, elapsed, response, calls)


class _ChatStream:
    """The chunks of one streamed chat reply: text, usage, and the final completion."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        from openai.lib.streaming.chat import ChatCompletionStreamState

        self.clock = _Clock(on_text)
        self.state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        self.parts: list[str] = []
        self.usage: Any = None
        self.service_tier: str | None = None  # the tier the chunks name
        self.chunks = 0

    def add(self, chunk: Any) -> None:
        self.usage = _chat_chunk(self.clock, chunk, self.parts) or self.usage
        self.service_tier = getattr(chunk, "service_tier", None) or self.service_tier
        self.state.handle_chunk(chunk)
        self.chunks += 1

    def result(self, model: str | None) -> StreamResult:
        # the snapshot, not get_final_completion(): that raises on finish_reason "length"
        completion = self.state.current_completion_snapshot if self.chunks else None
        calls: tuple[ToolCall, ...] = ()
        if completion is not None and completion.choices:
            calls = tuple(
                ToolCall(call.id, call.function.name, call.function.arguments)
                for call in completion.choices[0].message.tool_calls or ()
                if call.type == "function"
            )
        stats = _stats(self.usage, model, "openai_chat", self.service_tier)
        return self.clock.result("".join(self.parts), stats, completion, calls)


def _response_calls(response: Any) -> tuple[ToolCall, ...]:
    """The `function_call` items of a Responses `Response` (or None) as `ToolCall`s."""
    return tuple(
        ToolCall(item.call_id, item.name, item.arguments)
        for item in (response.output if response is not None else ())
        if item.type == "function_call"
    )


def _message_calls(message: Any) -> tuple[ToolCall, ...]:
    """The `tool_use` blocks of an Anthropic `Message` as `ToolCall`s."""
    return tuple(
        ToolCall(block.id, block.name, dict(block.input))
        for block in message.content
        if block.type == "tool_use"
    )


class _ConversationKeys:
    """The `prompt_cache_key` of each stateful Responses conversation.

    Keyed by response id (for `previous_response_id`) and conversation id; the
    oldest of `size` entries is forgotten first.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.keys: OrderedDict[str, str] = OrderedDict()
        self.lock = threading.Lock()

    @staticmethod
    def _conversation(options: Mapping[str, Any]) -> str | None:
        conversation = options.get("conversation")
        if isinstance(conversation, Mapping):
            conversation = conversation.get("id")
        return f"conversation:{conversation}" if isinstance(conversation, str) else None

    def options(self, options: dict[str, Any]) -> dict[str, Any]:
        """`options` with the conversation's key when they continue one and set none."""
        if options.get("prompt_cache_key") is not None:
            return options
        previous = options.get("previous_response_id")
        names = [f"response:{previous}" if isinstance(previous, str) else None]
        names.append(self._conversation(options))
        with self.lock:
            key = next((self.keys[n] for n in names if n is not None and n in self.keys), None)
        return options if key is None else {**options, "prompt_cache_key": key}

    def remember(self, kwargs: Mapping[str, Any], response: Any) -> None:
        """Record the key `response` was sent with (nothing when it had none)."""
        key = kwargs.get("prompt_cache_key")
        if not isinstance(key, str) or response is None:
            return
        names = [f"response:{response.id}", self._conversation(kwargs)]
        with self.lock:
            for name in names:
                if name is not None:
                    self.keys[name] = key
                    self.keys.move_to_end(name)
            while len(self.keys) > self.size:
                self.keys.popitem(last=False)


def _stats(
    usage: Any, model: str | None, shape: UsageShape, service_tier: str | None = None
) -> CacheStats:
    """The stats of an answer's usage, priced at the service tier it was served on."""
    if usage is None:
        return CacheStats()
    return CacheStats.from_usage(usage, model=model, shape=shape, service_tier=service_tier)


def _no_stream(options: dict[str, Any], method: str, instead: str) -> dict[str, Any]:
    """`options` without `stream`; `stream=True` is a `UsageError` naming `instead`."""
    if options.get("stream"):
        raise UsageError(
            f"{method}(stream=True) would return a stream, not a response: call "
            f"{instead}(...) instead (it streams, and returns a StreamResult with the text, "
            "CacheStats and the time to first token)",
            argument="stream",
            value=options["stream"],
        )
    return {key: value for key, value in options.items() if key != "stream"}


def _with_usage(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(kwargs.get("stream_options") or {})
    options["include_usage"] = True
    return {**kwargs, "stream": True, "stream_options": options}


def _chat_chunk(clock: _Clock, chunk: Any, parts: list[str]) -> Any:
    """Record one chat chunk; return its usage (only the last chunk has one)."""
    for choice in chunk.choices or ():
        delta = getattr(choice, "delta", None)
        text = (
            getattr(delta, "content", None) if delta is not None else getattr(choice, "text", None)
        )
        if delta is not None and getattr(delta, "tool_calls", None):
            clock.content()
        if text:
            clock.text(text)
            parts.append(text)
    return getattr(chunk, "usage", None)


def _responses_event(clock: _Clock, event: Any, parts: list[str]) -> Any:
    """Record one Responses event; return the final response when the stream ends with it
    (completed, incomplete or failed)."""
    kind = getattr(event, "type", "")
    if kind == "response.output_text.delta":
        clock.text(event.delta)
        parts.append(event.delta)
    elif kind.endswith(".delta"):
        clock.content()
    elif kind in ("response.completed", "response.incomplete", "response.failed"):
        return event.response  # the final response, usage included, however it ended
    return None


def _anthropic_request(
    prompt: Prompt, model: str, max_tokens: int, options: dict[str, Any]
) -> dict[str, Any]:
    """`render_anthropic`, or with ``betas=[...]`` `render_anthropic_beta` (the request
    for the client's beta Messages API, beta blocks and features included)."""
    if options.get("betas"):
        return dict(render_anthropic_beta(prompt, model=model, max_tokens=max_tokens, **options))
    return dict(render_anthropic(prompt, model=model, max_tokens=max_tokens, **options))


def _messages_api(client: Any, request: Mapping[str, Any]) -> Any:
    """The client's Messages API for `request`: the beta one when it names betas."""
    return client.beta.messages if request.get("betas") else client.messages


def _anthropic_event(clock: _Clock, event: Any) -> None:
    """Record one event of an Anthropic stream on `clock`."""
    if event.type == "content_block_delta":
        clock.content()
        if event.delta.type == "text_delta":
            clock.text(event.delta.text)


class _AnthropicPrompts:
    """What both Anthropic clients share: the official client, the miss watch, and how a
    message becomes its stats."""

    def __init__(self, client: Any, watch: MissWatch) -> None:
        self.client = client
        self._watch = watch

    def _finish(
        self, prompt: Prompt, model: str, message: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        return self._watch.finish(
            prompt,
            _stats(message.usage, model, "anthropic"),
            model=model,
            provider="anthropic",
            response=message,
            request=kwargs,
            client=self.client,
        )

    def _unstreamed(self, options: dict[str, Any]) -> dict[str, Any]:
        name = type(self).__name__
        return _no_stream(options, f"{name}.create", f"{name}.stream")

    def _streamed(
        self, prompt: Prompt, model: str, clock: _Clock, message: Any, kwargs: Mapping[str, Any]
    ) -> StreamResult:
        text = "".join(block.text for block in message.content if block.type == "text")
        stats = self._finish(prompt, model, message, kwargs)
        return clock.result(text, stats, message, _message_calls(message))


class AnthropicClient(_AnthropicPrompts):
    """`anthropic.Anthropic` with prefixkit rendering and cache statistics.

    >>> client = AnthropicClient()                      # doctest: +SKIP
    >>> message, stats = client.create(prompt, model="claude-sonnet-4-5", max_tokens=512)  # doctest: +SKIP

    `diagnostics=True` asks Anthropic to compare each request of a named prompt
    with its previous message (not offered on Bedrock and Vertex); `guard=` (a
    `StaticPrefixGuard`) explains misses locally; `monitor=` (a
    `HitRateMonitor`) records each named prompt's hit rate. The explanation is
    `CacheStats.miss`.
    """

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        diagnostics: bool = False,
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
        **client_options: Any,
    ) -> None:
        if client is None:
            require_extra("anthropic", "AnthropicClient", "anthropic")
            import anthropic

            client = anthropic.Anthropic(**client_options)
        super().__init__(client, MissWatch(diagnostics=diagnostics, guard=guard, monitor=monitor))

    def _render(
        self, prompt: Prompt, model: str, max_tokens: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        options = self._watch.anthropic_options(prompt, options, self.client)
        return _anthropic_request(prompt, model, max_tokens, options)

    @traced("anthropic", "chat")
    def create(
        self, prompt: Prompt, *, model: str, max_tokens: int, **options: Any
    ) -> tuple[anthropic.types.Message, CacheStats]:
        """Render with `render_anthropic(**options)` (with ``betas=[...]``, for the beta
        Messages API), send, return the message and stats."""
        kwargs = self._render(prompt, model, max_tokens, self._unstreamed(options))
        message = _messages_api(self.client, kwargs).create(**kwargs)
        return message, self._finish(prompt, model, message, kwargs)

    @traced("anthropic", "chat")
    def stream(
        self,
        prompt: Prompt,
        *,
        model: str,
        max_tokens: int,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Stream the reply; time to first token is the first content delta.

        `on_text(piece)` is called with each text delta as it arrives (to show
        the reply while it streams)."""
        kwargs = self._render(prompt, model, max_tokens, options)
        clock = _Clock(on_text)
        with _messages_api(self.client, kwargs).stream(**kwargs) as stream:
            for event in stream:
                _anthropic_event(clock, event)
            message = stream.get_final_message()
        return self._streamed(prompt, model, clock, message, kwargs)


class AsyncAnthropicClient(_AnthropicPrompts):
    """`anthropic.AsyncAnthropic` with prefixkit rendering and cache statistics."""

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        *,
        diagnostics: bool = False,
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
        **client_options: Any,
    ) -> None:
        if client is None:
            require_extra("anthropic", "AsyncAnthropicClient", "anthropic")
            import anthropic

            client = anthropic.AsyncAnthropic(**client_options)
        super().__init__(client, MissWatch(diagnostics=diagnostics, guard=guard, monitor=monitor))

    async def _render(
        self, prompt: Prompt, model: str, max_tokens: int, options: dict[str, Any]
    ) -> dict[str, Any]:
        """`render_anthropic`, its exact counts made first without blocking the event loop."""
        tokenizer = options.get("tokenizer")
        if isinstance(tokenizer, AnthropicTokenCounter) and not tokenizer.estimate:
            info = model_info("anthropic", model)
            minimum = info.min_cache_tokens if info is not None else None
            if minimum is not None:
                prefixes = cacheable_prefixes(prompt)
                await tokenizer.prepare(prefixes=prefixes, min_tokens=minimum)
        options = self._watch.anthropic_options(prompt, options, self.client)
        return _anthropic_request(prompt, model, max_tokens, options)

    @traced("anthropic", "chat")
    async def create(
        self, prompt: Prompt, *, model: str, max_tokens: int, **options: Any
    ) -> tuple[anthropic.types.Message, CacheStats]:
        """Render with `render_anthropic(**options)`, send, return the message and stats.

        With `tokenizer=AnthropicTokenCounter(...)` the prefix counts are
        awaited before rendering (an async client, or a sync one in a worker
        thread), so the event loop never waits on `count_tokens`.
        """
        kwargs = await self._render(prompt, model, max_tokens, self._unstreamed(options))
        message = await _messages_api(self.client, kwargs).create(**kwargs)
        return message, self._finish(prompt, model, message, kwargs)

    @traced("anthropic", "chat")
    async def stream(
        self,
        prompt: Prompt,
        *,
        model: str,
        max_tokens: int,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Stream the reply; time to first token is the first content delta; `on_text`
        gets each text delta as it arrives."""
        kwargs = await self._render(prompt, model, max_tokens, options)
        clock = _Clock(on_text)
        async with _messages_api(self.client, kwargs).stream(**kwargs) as stream:
            async for event in stream:
                _anthropic_event(clock, event)
            message = await stream.get_final_message()
        return self._streamed(prompt, model, clock, message, kwargs)


class _OpenAIPrompts:
    """What both OpenAI clients share: the official client, the miss watch, the keys of
    stateful Responses conversations, and how a request is rendered and its answer
    becomes stats."""

    def __init__(self, client: Any, watch: MissWatch) -> None:
        self.client = client
        self._keys = _ConversationKeys()
        self._watch = watch

    def _finish(
        self, prompt: Prompt, model: str, stats: CacheStats, answer: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        return self._watch.finish(
            prompt, stats, model=model, provider="openai", response=answer, request=kwargs
        )

    def _chat_request(self, prompt: Prompt, model: str, options: dict[str, Any]) -> Any:
        name = type(self).__name__
        options = _no_stream(options, f"{name}.chat", f"{name}.stream_chat")
        return render_openai_chat(prompt, model=model, **options)

    def _chat_answered(
        self, prompt: Prompt, model: str, completion: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        stats = _stats(completion.usage, model, "openai_chat", completion.service_tier)
        return self._finish(prompt, model, stats, completion, kwargs)

    def _chat_streamed(
        self, prompt: Prompt, model: str, stream: _ChatStream, kwargs: Mapping[str, Any]
    ) -> StreamResult:
        result = stream.result(model)
        stats = self._finish(prompt, model, result.stats, result.response, kwargs)
        return replace(result, stats=stats)

    def _responses_request(
        self, prompt: Prompt, model: str, options: dict[str, Any], *, stream: bool
    ) -> dict[str, Any]:
        if not stream:
            name = type(self).__name__
            options = _no_stream(options, f"{name}.responses", f"{name}.stream_responses")
        options = self._watch.responses_options(prompt, model, self._keys.options(options))
        kwargs: dict[str, Any] = dict(render_openai_responses(prompt, model=model, **options))
        return {**kwargs, "stream": True} if stream else kwargs

    def _responses_answered(
        self, prompt: Prompt, model: str, response: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        """The stats of a Responses answer (None: a stream that never completed)."""
        self._keys.remember(kwargs, response)
        usage, tier = (
            (response.usage, response.service_tier) if response is not None else (None, None)
        )
        stats = _stats(usage, model, "openai_responses", tier)
        return self._finish(prompt, model, stats, response, kwargs)


class OpenAIClient(_OpenAIPrompts):
    """`openai.OpenAI` with prefixkit rendering: Chat Completions and Responses.

    `tenant` and `salt_secret` (per call) salt the `prompt_cache_key`.
    `diagnostics=True` asks OpenAI (Responses, gpt-5.6 and later) to compare
    each request of a named prompt with its previous response; `guard=` (a
    `StaticPrefixGuard`) explains misses locally; `monitor=` (a
    `HitRateMonitor`) records each named prompt's hit rate. The explanation
    is `CacheStats.miss`.
    """

    def __init__(
        self,
        client: openai.OpenAI | None = None,
        *,
        diagnostics: bool = False,
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
        **client_options: Any,
    ) -> None:
        if client is None:
            require_extra("openai", "OpenAIClient", "openai")
            import openai

            client = openai.OpenAI(**client_options)
        super().__init__(client, MissWatch(diagnostics=diagnostics, guard=guard, monitor=monitor))

    @traced("openai", "chat")
    def chat(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.chat.ChatCompletion, CacheStats]:
        """`chat.completions.create` with `render_openai_chat(**options)`."""
        kwargs = self._chat_request(prompt, model, options)
        completion = self.client.chat.completions.create(**kwargs)
        return completion, self._chat_answered(prompt, model, completion, kwargs)

    @traced("openai", "chat")
    def responses(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.responses.Response, CacheStats]:
        """`responses.create` with `render_openai_responses(**options)`."""
        kwargs = self._responses_request(prompt, model, options, stream=False)
        response = self.client.responses.create(**kwargs)
        return response, self._responses_answered(prompt, model, response, kwargs)

    @traced("openai", "chat")
    def stream_chat(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed chat with `include_usage`; TTFT is the first content chunk; `on_text`
        gets each text delta as it arrives."""
        kwargs = _with_usage(render_openai_chat(prompt, model=model, **options))
        stream = _ChatStream(on_text)
        for chunk in self.client.chat.completions.create(**kwargs):
            stream.add(chunk)
        return self._chat_streamed(prompt, model, stream, kwargs)

    @traced("openai", "chat")
    def stream_responses(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed Responses; usage from `response.completed`; `on_text` gets each text
        delta as it arrives."""
        kwargs = self._responses_request(prompt, model, options, stream=True)
        clock, final = _Clock(on_text), None
        parts: list[str] = []
        for event in self.client.responses.create(**kwargs):
            final = _responses_event(clock, event, parts) or final
        stats = self._responses_answered(prompt, model, final, kwargs)
        return clock.result("".join(parts), stats, final, _response_calls(final))


class AsyncOpenAIClient(_OpenAIPrompts):
    """`openai.AsyncOpenAI` with prefixkit rendering: Chat Completions and Responses."""

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        *,
        diagnostics: bool = False,
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
        **client_options: Any,
    ) -> None:
        if client is None:
            require_extra("openai", "AsyncOpenAIClient", "openai")
            import openai

            client = openai.AsyncOpenAI(**client_options)
        super().__init__(client, MissWatch(diagnostics=diagnostics, guard=guard, monitor=monitor))

    @traced("openai", "chat")
    async def chat(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.chat.ChatCompletion, CacheStats]:
        """`chat.completions.create` with `render_openai_chat(**options)`."""
        kwargs = self._chat_request(prompt, model, options)
        completion = await self.client.chat.completions.create(**kwargs)
        return completion, self._chat_answered(prompt, model, completion, kwargs)

    @traced("openai", "chat")
    async def responses(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.responses.Response, CacheStats]:
        """`responses.create` with `render_openai_responses(**options)`."""
        kwargs = self._responses_request(prompt, model, options, stream=False)
        response = await self.client.responses.create(**kwargs)
        return response, self._responses_answered(prompt, model, response, kwargs)

    @traced("openai", "chat")
    async def stream_chat(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed chat with `include_usage`; TTFT is the first content chunk; `on_text`
        gets each text delta as it arrives."""
        kwargs = _with_usage(render_openai_chat(prompt, model=model, **options))
        stream = _ChatStream(on_text)
        async for chunk in await self.client.chat.completions.create(**kwargs):
            stream.add(chunk)
        return self._chat_streamed(prompt, model, stream, kwargs)

    @traced("openai", "chat")
    async def stream_responses(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed Responses; usage from `response.completed`; `on_text` gets each text
        delta as it arrives."""
        kwargs = self._responses_request(prompt, model, options, stream=True)
        clock, final = _Clock(on_text), None
        parts: list[str] = []
        async for event in await self.client.responses.create(**kwargs):
            final = _responses_event(clock, event, parts) or final
        stats = self._responses_answered(prompt, model, final, kwargs)
        return clock.result("".join(parts), stats, final, _response_calls(final))


class _VllmPrompts:
    """What both vLLM clients keep: the server's tokenizer and block size, and the salt key."""

    def __init__(
        self,
        tokenizer: HFTokenizer,
        block_size: int,
        salt_secret: str | bytes | None,
        watch: MissWatch,
    ) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.salt_secret = salt_secret
        self._watch = watch

    def _finish(
        self, prompt: Prompt, model: str, stats: CacheStats, answer: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        """`stats` with the miss explained; the guard compares the requests' block hashes."""
        blocks: list[bytes] = []
        if self._watch.guard is not None:
            ids = kwargs.get("prompt")
            if not isinstance(ids, list):
                extra = kwargs.get("extra_body") or {}
                ids = self.tokenizer.chat_token_ids(
                    kwargs["messages"],
                    tools=kwargs.get("tools"),
                    chat_template_kwargs=extra.get("chat_template_kwargs"),
                )
            salt = (kwargs.get("extra_body") or {}).get("cache_salt")
            blocks = block_hashes(ids, self.block_size, cache_salt=salt)
        return self._watch.finish(
            prompt,
            stats,
            model=model,
            provider="vllm",
            response=answer,
            request=kwargs,
            blocks=blocks,
            block_size=self.block_size,
        )

    def _render(self, prompt: Prompt, model: str, **options: Any) -> dict[str, Any]:
        options.setdefault("salt_secret", self.salt_secret)
        kwargs: dict[str, Any] = dict(
            render_vllm(
                prompt, model=model, tokenizer=self.tokenizer, block_size=self.block_size, **options
            )
        )
        return kwargs

    def _request(
        self, prompt: Prompt, model: str, method: str, options: dict[str, Any], **render: Any
    ) -> dict[str, Any]:
        """The unstreamed `method`'s request (`stream=True` is a `UsageError`)."""
        name = type(self).__name__
        options = _no_stream(options, f"{name}.{method}", f"{name}.stream_chat")
        return self._render(prompt, model, **render, **options)

    def _answered(
        self, prompt: Prompt, model: str, completion: Any, kwargs: Mapping[str, Any]
    ) -> CacheStats:
        stats = _stats(completion.usage, None, "openai_chat")
        return self._finish(prompt, model, stats, completion, kwargs)

    def _streamed(
        self, prompt: Prompt, model: str, stream: _ChatStream, kwargs: Mapping[str, Any]
    ) -> StreamResult:
        result = stream.result(None)
        stats = self._finish(prompt, model, result.stats, result.response, kwargs)
        return replace(result, stats=stats)


class VLLMClient(_VllmPrompts):
    """An `openai.OpenAI` client on a vLLM server, with aligned, salted prompts.

    `tokenizer` and `block_size` must match the server (`--block-size`);
    `salt_secret` keys the per-tenant `cache_salt`. Token counts come from
    vLLM's `usage.prompt_tokens_details.cached_tokens` (start the server with
    `--enable-prompt-tokens-details`). No prices: self-hosted cost is not
    per token. `guard=` (a `StaticPrefixGuard`) explains misses by the first
    block that changed; `monitor=` (a `HitRateMonitor`) records hit rates.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        tokenizer: HFTokenizer,
        block_size: int,
        salt_secret: str | bytes | None = None,
        client: openai.OpenAI | None = None,
        api_key: str = "EMPTY",
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
    ) -> None:
        if base_url is not None and not isinstance(base_url, str):
            raise UsageError(
                "VLLMClient's first argument is the server's base URL, got an object of type "
                f"{type(base_url).__name__}: pass an OpenAI client as client=..."
            )
        if client is None:
            require_extra("openai", "VLLMClient", "openai")
            import openai

            client = openai.OpenAI(base_url=base_url, api_key=api_key)
        self.client = client
        watch = MissWatch(guard=guard, monitor=monitor)
        super().__init__(tokenizer, block_size, salt_secret, watch)

    @traced("vllm", "chat")
    def chat(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.chat.ChatCompletion, CacheStats]:
        """`chat.completions.create` with `render_vllm(**options)` (`tenant=` salts it)."""
        kwargs = self._request(prompt, model, "chat", options)
        completion = self.client.chat.completions.create(**kwargs)
        return completion, self._answered(prompt, model, completion, kwargs)

    @traced("vllm", "text_completion")
    def complete(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.Completion, CacheStats]:
        """`completions.create` with the aligned token ids (`render_vllm(token_ids=True)`)."""
        kwargs = self._request(prompt, model, "complete", options, token_ids=True)
        completion = self.client.completions.create(**kwargs)
        return completion, self._answered(prompt, model, completion, kwargs)

    @traced("vllm", "chat")
    def stream_chat(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed chat with `include_usage`; TTFT is the first content chunk; `on_text`
        gets each text delta as it arrives."""
        kwargs = _with_usage(self._render(prompt, model, **options))
        stream = _ChatStream(on_text)
        for chunk in self.client.chat.completions.create(**kwargs):
            stream.add(chunk)
        return self._streamed(prompt, model, stream, kwargs)


class AsyncVLLMClient(_VllmPrompts):
    """`openai.AsyncOpenAI` on a vLLM server (see `VLLMClient`)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        tokenizer: HFTokenizer,
        block_size: int,
        salt_secret: str | bytes | None = None,
        client: openai.AsyncOpenAI | None = None,
        api_key: str = "EMPTY",
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
    ) -> None:
        if client is None:
            require_extra("openai", "AsyncVLLMClient", "openai")
            import openai

            client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        self.client = client
        watch = MissWatch(guard=guard, monitor=monitor)
        super().__init__(tokenizer, block_size, salt_secret, watch)

    @traced("vllm", "chat")
    async def chat(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.chat.ChatCompletion, CacheStats]:
        """`chat.completions.create` with `render_vllm(**options)` (`tenant=` salts it)."""
        kwargs = self._request(prompt, model, "chat", options)
        completion = await self.client.chat.completions.create(**kwargs)
        return completion, self._answered(prompt, model, completion, kwargs)

    @traced("vllm", "text_completion")
    async def complete(
        self, prompt: Prompt, *, model: str, **options: Any
    ) -> tuple[openai.types.Completion, CacheStats]:
        """`completions.create` with the aligned token ids (`render_vllm(token_ids=True)`)."""
        kwargs = self._request(prompt, model, "complete", options, token_ids=True)
        completion = await self.client.completions.create(**kwargs)
        return completion, self._answered(prompt, model, completion, kwargs)

    @traced("vllm", "chat")
    async def stream_chat(
        self,
        prompt: Prompt,
        *,
        model: str,
        on_text: Callable[[str], None] | None = None,
        **options: Any,
    ) -> StreamResult:
        """Streamed chat with `include_usage`; TTFT is the first content chunk; `on_text`
        gets each text delta as it arrives."""
        kwargs = _with_usage(self._render(prompt, model, **options))
        stream = _ChatStream(on_text)
        async for chunk in await self.client.chat.completions.create(**kwargs):
            stream.add(chunk)
        return self._streamed(prompt, model, stream, kwargs)
