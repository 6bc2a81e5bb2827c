"""A recording mock of the Anthropic and OpenAI HTTP APIs for the official clients.

`MockProvider` is an `httpx2.MockTransport` handler (anthropic 2.x and openai 3.x
are built on `httpx2`): it records every request and answers like the provider
would, in the shapes the official clients parse, streaming or not:

- Anthropic Messages (`POST /v1/messages`, events `message_start` ... `message_stop`)
  and token counting (`POST /v1/messages/count_tokens`);
- OpenAI Chat Completions (chunks, then a usage chunk when
  `stream_options.include_usage` is set), Responses (`response.created` ...
  `response.completed`) and Completions (the vLLM server's token-id endpoint).

Its methods build ready official clients on it (sync and async; Anthropic,
OpenAI, and OpenAI pointed at a vLLM base URL)::

    mock = MockProvider()
    with mock.anthropic_client() as client:
        client.messages.create(model="claude-sonnet-5", max_tokens=64, system=[...],
                               messages=[...])
    mock.body["system"]                  # the body the client sent
    mock.requests[-1].headers            # and its headers

Usage payloads are simulated from the providers' documented prompt caching
(prefixkit's model table supplies minimum lengths and limits), per mock:

- Anthropic: entries are written at `cache_control` breakpoints (and at the
  last block with a top-level `cache_control`, automatic mode); a read finds
  the longest earlier entry ending within 20 blocks before a breakpoint;
  prefixes under the model's minimum (1024 tokens for a model prefixkit does
  not know) are never cached; a model switch misses; more than 4 breakpoints
  answer HTTP 400 as the API does.
- OpenAI (and vLLM's OpenAI-compatible endpoints): prompts of at least the
  model's minimum (1024 tokens) are cached implicitly per model,
  `prompt_cache_key` and `cache_salt`, hits in 128-token steps; with `prompt_cache_options` set, entries also end exactly
  at `prompt_cache_breakpoint` markers (content parts, and `function_call_output`
  parts at the end of their item), and explicit mode caches only there;
  a `prompt_cache_options.ttl` the API does not take (12h on Chat) answers 400.

Set `anthropic_usage`, `chat_usage` or `responses_usage` to answer with that
fixed payload instead (`ANTHROPIC_USAGE`, `CHAT_USAGE` and `RESPONSES_USAGE`
are realistic ones); Completions answer with `chat_usage` (the same shape).

Streams carry the same usage as the answer would. Not simulated: token counts
are cl100k_base estimates of each block or part, with tools as JSON and a role
marker per message, not the providers' tokenizers and chat formats (nor vLLM's
model tokenizer: token-id prompts are counted as sent); no TTL expiry
(`clear_cache` forgets everything); entries exist as soon as an answer is sent
(parallel first requests can hit each other); no invalidation by `tool_choice`,
images or thinking parameters; no Anthropic TTL-order check and no OpenAI
4-write limit; no spill-over between machines; no vLLM block granularity (see
`prefixkit.testing.fake_vllm`). Every reply is the same text (`reply`), never
a tool call. A body the mock
cannot read (not JSON, or a field of the wrong shape) answers HTTP 400 in the
provider's error shape; an unknown path answers 404.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import httpx2
import openai
from prefixkit.sdk import TiktokenTokenizer, model_info, provider_limits

from .openai_answers import (
    Event,
    Reply,
    chat_completion,
    chat_events,
    completion,
    completion_events,
    response_object,
    responses_events,
    sse,
)

__all__ = [
    "ANTHROPIC_USAGE",
    "CHAT_USAGE",
    "DEFAULT_REPLY",
    "RESPONSES_USAGE",
    "MockProvider",
    "RecordedRequest",
]

ANTHROPIC_USAGE: dict[str, Any] = {
    "input_tokens": 21,
    "output_tokens": 64,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 3584,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "service_tier": "standard",
}
"""A Messages usage payload: a 3,584-token cache read, nothing written."""

CHAT_USAGE: dict[str, Any] = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
"""A Chat Completions usage payload: 1,920 of 2,006 prompt tokens cached."""

RESPONSES_USAGE: dict[str, Any] = {
    "input_tokens": 2006,
    "input_tokens_details": {
        "cached_tokens": 1792,
        "cache_write_tokens": 128,
        "cache_write_tokens_details": {"ttl_30m_tokens": 128, "ttl_12h_tokens": 0},
    },
    "output_tokens": 300,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 2306,
}
"""A Responses usage payload: 1,792 input tokens cached, 128 written with a 30m TTL."""

DEFAULT_REPLY = "Based on the documents: the answer is in section 2 of the price list."

_STEP = 128  # OpenAI's implicit hits grow in steps of 128 tokens
_UNKNOWN_MODEL_MIN_TOKENS = 1024

_Provider = Literal["anthropic", "openai"]
_Answer = dict[str, Any] | list[Event]  # a JSON payload, or the events of a stream


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock received it.

    `body` is the JSON object sent, or None when the content was not one
    (the mock answered 400 then).
    """

    method: str
    url: httpx2.URL
    headers: httpx2.Headers
    content: bytes
    body: dict[str, Any] | None

    @property
    def path(self) -> str:
        """The URL path, e.g. `/v1/messages`."""
        return self.url.path


class _BadRequest(Exception):
    """A body the mock cannot read: answered with HTTP 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class MockProvider:
    """A recording mock of the provider APIs; one instance is one provider account.

    Pass `handle` (or the instance itself) to `httpx2.MockTransport`, or use the
    client methods. The `*_usage` payloads, when set, replace the simulated
    usage of that API (attributes: change them between requests if needed);
    `reply` is the assistant text of every answer.
    """

    def __init__(
        self,
        *,
        anthropic_usage: Mapping[str, Any] | None = None,
        chat_usage: Mapping[str, Any] | None = None,
        responses_usage: Mapping[str, Any] | None = None,
        reply: str = DEFAULT_REPLY,
    ) -> None:
        self.anthropic_usage = anthropic_usage
        self.chat_usage = chat_usage
        self.responses_usage = responses_usage
        self.reply = reply
        self.requests: list[RecordedRequest] = []
        self._anthropic_entries: set[str] = set()
        self._openai_prompts: dict[tuple[str, ...], list[list[int]]] = {}
        self._openai_entries: set[str] = set()
        self._lock = threading.Lock()

    @property
    def bodies(self) -> list[dict[str, Any] | None]:
        """The body of every request, in order (None where it was not a JSON object)."""
        return [request.body for request in self.requests]

    @property
    def paths(self) -> list[str]:
        """The path of every request, in order."""
        return [request.path for request in self.requests]

    @property
    def body(self) -> dict[str, Any]:
        """The last request's JSON body."""
        if not self.requests:
            raise LookupError("the mock has received no request yet")
        last = self.requests[-1]
        if last.body is None:
            raise LookupError(f"the last request ({last.method} {last.path}) had no JSON body")
        return last.body

    def clear_cache(self) -> None:
        """Forget every simulated cache entry, as if their TTLs had run out."""
        with self._lock:
            self._anthropic_entries.clear()
            self._openai_prompts.clear()
            self._openai_entries.clear()

    def transport(self) -> httpx2.MockTransport:
        """An `httpx2.MockTransport` answering with this mock."""
        return httpx2.MockTransport(self.handle)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        return self.handle(request)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        """Record `request` and answer it like the provider would."""
        path = request.url.path
        route = next((_ROUTES[r] for r in _ROUTES if path.endswith(r)), None)
        if route is None:  # answer a 404 in the shape of the client that asked
            provider: _Provider = (
                "anthropic" if "anthropic-version" in request.headers else "openai"
            )
        else:
            provider = route[0]
        body, problem = _parse_body(request.content)
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    method=request.method,
                    url=request.url,
                    headers=httpx2.Headers(request.headers),
                    content=request.content,
                    body=body,
                )
            )
            number = len(self.requests)
            if route is None or request.method != "POST":
                return _not_found(provider, request.method, path, number)
            if body is None:
                return _error(provider, 400, problem, None, number)
            try:
                payload = route[1](self, body, number)
            except _BadRequest as error:
                return _error(provider, 400, error.message, error.param, number)
        headers = _request_id(provider, number)
        if isinstance(payload, list):
            return _sse_response(payload, headers)
        return httpx2.Response(200, json=payload, headers=headers)

    def anthropic_client(
        self, *, api_key: str = "sk-ant-test", max_retries: int = 0, **options: Any
    ) -> anthropic.Anthropic:
        """An `anthropic.Anthropic` client on this mock (`options` go to its constructor)."""
        http = anthropic.DefaultHttpxClient(transport=self.transport())
        return anthropic.Anthropic(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def async_anthropic_client(
        self, *, api_key: str = "sk-ant-test", max_retries: int = 0, **options: Any
    ) -> anthropic.AsyncAnthropic:
        """An `anthropic.AsyncAnthropic` client on this mock."""
        http = anthropic.DefaultAsyncHttpxClient(transport=self.transport())
        return anthropic.AsyncAnthropic(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def openai_client(
        self, *, api_key: str = "sk-test", max_retries: int = 0, **options: Any
    ) -> openai.OpenAI:
        """An `openai.OpenAI` client on this mock (`options` go to its constructor)."""
        http = openai.DefaultHttpxClient(transport=self.transport())
        return openai.OpenAI(api_key=api_key, http_client=http, max_retries=max_retries, **options)

    def async_openai_client(
        self, *, api_key: str = "sk-test", max_retries: int = 0, **options: Any
    ) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` client on this mock."""
        http = openai.DefaultAsyncHttpxClient(transport=self.transport())
        return openai.AsyncOpenAI(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def vllm_client(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str = "EMPTY",
        max_retries: int = 0,
        **options: Any,
    ) -> openai.OpenAI:
        """An `openai.OpenAI` client for a vLLM server at `base_url`, on this mock."""
        return self.openai_client(
            api_key=api_key, max_retries=max_retries, base_url=base_url, **options
        )

    def async_vllm_client(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str = "EMPTY",
        max_retries: int = 0,
        **options: Any,
    ) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` client for a vLLM server at `base_url`, on this mock."""
        return self.async_openai_client(
            api_key=api_key, max_retries=max_retries, base_url=base_url, **options
        )

    def _messages(self, body: dict[str, Any], number: int) -> _Answer:
        _require(body, "max_tokens", int)
        stream = _streamed(body)
        prompt = _anthropic_prompt(body)
        if self.anthropic_usage is not None:
            usage = copy.deepcopy(dict(self.anthropic_usage))
        else:
            usage = self._anthropic_cache(prompt)
            usage["output_tokens"] = _counter().count(self.reply)
        message = _anthropic_message(body["model"], number, usage, self.reply)
        return _anthropic_events(message, self.reply) if stream else message

    def _count_tokens(self, body: dict[str, Any], number: int) -> _Answer:
        return {"input_tokens": sum(_anthropic_prompt(body).counts)}

    def _anthropic_cache(self, prompt: _AnthropicPrompt) -> dict[str, Any]:
        limits = provider_limits("anthropic")
        lookback = limits.lookback_blocks or 20
        info = model_info("anthropic", prompt.model)
        minimum = (info.min_cache_tokens if info else None) or _UNKNOWN_MODEL_MIN_TOKENS
        ends = [sum(prompt.counts[: i + 1]) for i in range(len(prompt.counts))]
        read_end = -1
        for end, _ in prompt.marks:
            for candidate in range(end, max(end - lookback, -1), -1):
                if prompt.digests[candidate] in self._anthropic_entries:
                    read_end = max(read_end, candidate)
                    break
        written = {"5m": 0, "1h": 0}
        last_written = read_end
        for end, ttl in prompt.marks:
            if end > last_written and ends[end] >= minimum:
                written[ttl] += ends[end] - (ends[last_written] if last_written >= 0 else 0)
                self._anthropic_entries.add(prompt.digests[end])
                last_written = end
        cached = ends[read_end] if read_end >= 0 else 0
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": (ends[-1] if ends else 0) - cached - creation,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": creation,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _chat(self, body: dict[str, Any], number: int) -> _Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        _options(body, "chat")
        prompt = _openai_prompt(body, _require(body, "messages", list), "messages")
        if self.chat_usage is not None:
            usage = copy.deepcopy(dict(self.chat_usage))
        else:
            cached, written = self._openai_cache(body, prompt)
            usage = _completion_usage(len(prompt.ids), cached, written, self.reply)
        if stream:
            return chat_events(body, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))
        return chat_completion(model, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))

    def _completions(self, body: dict[str, Any], number: int) -> _Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        prompt = _require(body, "prompt", (str, list))
        if isinstance(prompt, str):
            ids = _counter().encode(prompt)
        elif all(isinstance(token, int) and not isinstance(token, bool) for token in prompt):
            ids = list(prompt)
        else:
            raise _BadRequest(
                "prompt must be a string or a list of token ids (this mock answers one "
                "prompt per request)",
                "prompt",
            )
        if self.chat_usage is not None:
            usage = copy.deepcopy(dict(self.chat_usage))
        else:
            cached, written = self._openai_cache(body, _OpenAIPrompt(ids, []))
            usage = _completion_usage(len(ids), cached, written, self.reply)
        if stream:
            return completion_events(body, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))
        return completion(model, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))

    def _responses(self, body: dict[str, Any], number: int) -> _Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        ttl = _options(body, "responses").get("ttl", "30m")
        items = _require(body, "input", (str, list))
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        instructions = body.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise _BadRequest("instructions must be a string", "instructions")
            items = [{"role": "system", "content": instructions}, *items]
        prompt = _openai_prompt(body, items, "input")
        if self.responses_usage is not None:
            usage = copy.deepcopy(dict(self.responses_usage))
        else:
            cached, written = self._openai_cache(body, prompt)
            output = _counter().count(self.reply)
            usage = {
                "input_tokens": len(prompt.ids),
                "input_tokens_details": {
                    "cached_tokens": cached,
                    "cache_write_tokens": written,
                    "cache_write_tokens_details": {
                        "ttl_30m_tokens": written if ttl == "30m" else 0,
                        "ttl_12h_tokens": written if ttl == "12h" else 0,
                    },
                },
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": len(prompt.ids) + output,
            }
        reply = Reply(_pieces(self.reply))
        response = response_object(model, f"mock{number:04d}", usage, reply)
        return responses_events(response, reply) if stream else response

    def _openai_cache(self, body: dict[str, Any], prompt: _OpenAIPrompt) -> tuple[int, int]:
        """(cached, written) tokens of `prompt`, updating the simulated cache."""
        model = _require(body, "model", str)
        key = (model, _optional_str(body, "prompt_cache_key"), _optional_str(body, "cache_salt"))
        info = model_info("openai", model)
        minimum = (info.min_cache_tokens if info else None) or (
            provider_limits("openai").min_cache_tokens or _UNKNOWN_MODEL_MIN_TOKENS
        )
        mode = _options(body).get("mode")
        ids = prompt.ids
        cached = written = 0
        if mode is None or mode == "implicit":
            for earlier in self._openai_prompts.get(key, []):
                common = next(
                    (i for i, (a, b) in enumerate(zip(earlier, ids, strict=False)) if a != b),
                    min(len(earlier), len(ids)),
                )
                if common >= minimum:
                    cached = max(cached, minimum + (common - minimum) // _STEP * _STEP)
            self._openai_prompts.setdefault(key, []).append(ids)
        if mode is not None:
            digests = [_digest([*key, *map(str, ids[:end])]) for end in prompt.breakpoints]
            hits = [
                end
                for end, d in zip(prompt.breakpoints, digests, strict=True)
                if d in self._openai_entries
            ]
            cached = max([cached, *hits])
            for end, d in zip(prompt.breakpoints, digests, strict=True):
                if end >= minimum:
                    self._openai_entries.add(d)
            new_end = max([end for end in prompt.breakpoints if end >= minimum], default=0)
            written = max(new_end - cached, 0)
        return cached, written


@functools.cache
def _counter() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


def _digest(parts: list[str]) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _parse_body(content: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        body = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"the request body is not valid JSON ({error}): send a JSON object"
    if not isinstance(body, dict):
        return None, f"the request body must be a JSON object, not {type(body).__name__}"
    return body, ""


def _require(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in body:
        raise _BadRequest(f"{name}: Field required", name)
    value = body[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _BadRequest(f"{name}: expected {wanted}, got {type(value).__name__}", name)
    return value


def _optional_list(body: Mapping[str, Any], name: str) -> list[Any]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadRequest(f"{name}: expected list, got {type(value).__name__}", name)
    return value


def _optional_str(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _BadRequest(f"{name}: expected str, got {type(value).__name__}", name)
    return value


def _options(body: Mapping[str, Any], api: str | None = None) -> dict[str, Any]:
    """`prompt_cache_options`, its TTL checked against what `api` ("chat", "responses") takes."""
    options = body.get("prompt_cache_options") or {}
    if not isinstance(options, dict):
        raise _BadRequest("prompt_cache_options must be an object", "prompt_cache_options")
    if options.get("mode", "implicit") not in ("implicit", "explicit"):
        raise _BadRequest(
            f"prompt_cache_options.mode: expected 'implicit' or 'explicit', got "
            f"{options['mode']!r}",
            "prompt_cache_options.mode",
        )
    ttls = provider_limits("openai").api_ttls.get(api or "", ())
    if api is not None and "ttl" in options and options["ttl"] not in ttls:
        raise _BadRequest(
            f"prompt_cache_options.ttl: the {api} API takes {', '.join(ttls)}, got "
            f"{options['ttl']!r}",
            "prompt_cache_options.ttl",
        )
    return options


def _streamed(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _BadRequest("stream must be a boolean", "stream")
    return stream


def _pieces(text: str) -> list[str]:
    """`text` in word-sized stream deltas that join back to it exactly."""
    return re.split(r"(?<=\s)(?=\S)", text)


@dataclass(frozen=True)
class _AnthropicPrompt:
    """A Messages request as cacheable blocks in prefix order (tools, system, messages)."""

    model: str
    texts: list[str]
    counts: list[int]
    digests: list[str]  # digests[i] identifies the prefix ending with block i
    marks: list[tuple[int, str]]  # (block index, ttl) of each breakpoint


def _anthropic_prompt(body: dict[str, Any]) -> _AnthropicPrompt:
    model = _require(body, "model", str)
    blocks: list[tuple[str, Any]] = []
    for index, tool in enumerate(_optional_list(body, "tools")):
        if not isinstance(tool, dict):
            raise _BadRequest(f"tools.{index}: expected an object", "tools")
        rest = {k: v for k, v in tool.items() if k != "cache_control"}
        blocks.append((json.dumps(rest), tool.get("cache_control")))
    system = body.get("system")
    system_blocks = (
        [{"type": "text", "text": system}]
        if isinstance(system, str)
        else _optional_list(body, "system")
    )
    for index, block in enumerate(system_blocks):
        blocks.append((_anthropic_text(block, f"system.{index}"), block.get("cache_control")))
    messages = _require(body, "messages", list)
    if not messages:
        raise _BadRequest("messages: at least one message is required", "messages")
    for m, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _BadRequest(f"messages.{m}: expected an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _BadRequest(f"messages.{m}.content: expected a string or a list", "messages")
        for b, block in enumerate(content):
            text = _anthropic_text(block, f"messages.{m}.content.{b}")
            blocks.append((message["role"] + ":" + text, block.get("cache_control")))
    limits = provider_limits("anthropic")
    marks: list[tuple[int, str]] = []
    for index, (_, marker) in enumerate(blocks):
        if marker is not None:
            marks.append((index, _ttl(marker, limits.ttls, limits.default_ttl)))
    if body.get("cache_control") is not None and blocks:
        marks.append(
            (len(blocks) - 1, _ttl(body["cache_control"], limits.ttls, limits.default_ttl))
        )
    if len(marks) > limits.max_breakpoints:
        raise _BadRequest(
            f"A maximum of {limits.max_breakpoints} blocks with cache_control may be "
            f"provided. Found {len(marks)}."
        )
    texts = [text for text, _ in blocks]
    digests: list[str] = []
    for text in texts:
        digests.append(_digest([model, digests[-1] if digests else "", text]))
    return _AnthropicPrompt(model, texts, [_counter().count(t) for t in texts], digests, marks)


def _anthropic_text(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _BadRequest(f"{where}: expected a content block with a type")
    if block["type"] == "text":
        if not isinstance(block.get("text"), str):
            raise _BadRequest(f"{where}.text: expected a string")
        text: str = block["text"]
        return text
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"})


def _ttl(marker: Any, ttls: tuple[str, ...], default: str) -> str:
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
        raise _BadRequest('cache_control: expected {"type": "ephemeral"} with an optional ttl')
    ttl = marker.get("ttl", default)
    if ttl not in ttls:
        raise _BadRequest(f"cache_control.ttl: expected one of {', '.join(ttls)}, got {ttl!r}")
    return str(ttl)


@dataclass(frozen=True)
class _OpenAIPrompt:
    """An OpenAI request as token ids, and where its explicit breakpoints end."""

    ids: list[int]
    breakpoints: list[int]


def _openai_prompt(body: dict[str, Any], items: list[Any], field: str) -> _OpenAIPrompt:
    """`items` (chat `messages`, Responses `input`) after the tools, as token ids."""
    counter = _counter()
    _optional_list(body, "tools")
    ids = list(counter.encode(json.dumps(body.get("tools", []))))
    breakpoints: list[int] = []
    for m, item in enumerate(items):
        if not isinstance(item, dict):
            raise _BadRequest(f"{field}.{m}: expected an object", field)
        if not isinstance(item.get("role"), str):
            # a Responses item that is not a message (function_call, reasoning, ...); a
            # function_call_output's output parts may carry breakpoints (not tokens)
            output = item.get("output")
            marked = isinstance(output, list) and any(
                isinstance(part, dict) and "prompt_cache_breakpoint" in part for part in output
            )
            if marked:
                item = {
                    **item,
                    "output": [
                        {k: v for k, v in part.items() if k != "prompt_cache_breakpoint"}
                        if isinstance(part, dict)
                        else part
                        for part in output
                    ],
                }
            ids += counter.encode(json.dumps(item))
            if marked:
                breakpoints.append(len(ids))
            continue
        ids += counter.encode(f"<|{item['role']}|>")
        content = item.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content or []
        if not isinstance(parts, list):
            raise _BadRequest(f"{field}.{m}.content: expected a string or a list", field)
        for p, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _BadRequest(f"{field}.{m}.content.{p}: expected an object", field)
            text = part.get("text")
            if not isinstance(text, str):
                text = json.dumps({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"})
            ids += counter.encode(text)
            if "prompt_cache_breakpoint" in part:
                breakpoints.append(len(ids))
        if "tool_calls" in item:
            ids += counter.encode(json.dumps(item["tool_calls"]))
    return _OpenAIPrompt(ids, breakpoints)


def _completion_usage(prompt_tokens: int, cached: int, written: int, reply: str) -> dict[str, Any]:
    output = _counter().count(reply)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output,
        "total_tokens": prompt_tokens + output,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
    }


def _anthropic_message(model: str, number: int, usage: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"msg_mock{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _anthropic_events(message: dict[str, Any], text: str) -> list[Event]:
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    for piece in _pieces(text):
        delta = {"type": "text_delta", "text": piece}
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": message["usage"].get("output_tokens", 0)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _request_id(provider: _Provider, number: int) -> dict[str, str]:
    name = "request-id" if provider == "anthropic" else "x-request-id"
    return {name: f"req_mock{number:04d}"}


def _sse_response(events: list[Event], headers: dict[str, str]) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={**headers, "content-type": "text/event-stream"},
        content=b"".join(sse(events)),
    )


def _error(
    provider: _Provider, status: int, message: str, param: str | None, number: int
) -> httpx2.Response:
    """An error answer in the provider's shape."""
    kind = (
        "not_found_error" if status == 404 and provider == "anthropic" else "invalid_request_error"
    )
    payload: dict[str, Any]
    if provider == "anthropic":
        payload = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_mock{number:04d}",
        }
    else:
        payload = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return httpx2.Response(status, json=payload, headers=_request_id(provider, number))


def _not_found(provider: _Provider, method: str, path: str, number: int) -> httpx2.Response:
    message = f"Invalid URL ({method} {path}): the mock answers " + ", ".join(
        f"POST .../v1{route}" for route in _ROUTES
    )
    return _error(provider, 404, message, None, number)


# path suffix -> (the provider whose API it is, the method answering it); longest first
_ROUTES: dict[str, tuple[_Provider, Callable[[MockProvider, dict[str, Any], int], _Answer]]] = {
    "/messages/count_tokens": ("anthropic", MockProvider._count_tokens),
    "/messages": ("anthropic", MockProvider._messages),
    "/chat/completions": ("openai", MockProvider._chat),
    "/completions": ("openai", MockProvider._completions),
    "/responses": ("openai", MockProvider._responses),
}
