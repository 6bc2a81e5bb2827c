"""Render a `Prompt` as the keyword arguments of Anthropic's `messages.create`.

Layout (Anthropic's prefix order is tools -> system -> messages):
- `tools`: every tool definition, converted to Anthropic's shape;
- `system`: one text block per system segment;
- `messages`: consecutive segments with the same role form one message, one
  text block per segment. Context segments (session documents) are the
  leading blocks of the first user message, after the static system and
  before the conversation, where Anthropic recommends long documents.

Breakpoints (`cache_control`) follow `breakpoints.plan_breakpoints`: the
caller's own markers first (counted against the limit of 4, never moved or
dropped), then the end of the STATIC tier, the rolling end of the SESSION tier
(the latest turn), the end of the VERSIONED tier, and lookback checkpoints.
TTLs come per tier (default: STATIC and VERSIONED 1h, SESSION 5m), 1h always
before 5m. `automatic=True` adds Anthropic's top-level `cache_control` (it
takes one of the 4 slots and replaces the rolling breakpoint).

If the longest cached prefix is shorter than the model's minimum (data table
`sdk/data/models.json`), `UncachedPrefixWarning` is issued: the API would
silently cache nothing. Counts use `tokenizer` (an `AnthropicTokenCounter`
with a client is exact); by default they are a labelled cl100k_base estimate.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any, Literal

from .breakpoints import Block, Breakpoint, plan_breakpoints
from .errors import RenderError, UncachedPrefixWarning, UnknownModelWarning
from .model_facts import ModelInfo, model_info, provider_limits
from .prompt import Part, Prompt
from .segment import Segment, Stability
from .tokenizer import AnthropicTokenCounter, Tokenizer
from .tool_schema import anthropic_tool

__all__ = ["DEFAULT_ANTHROPIC_TTLS", "AnthropicTTL", "render_anthropic"]

AnthropicTTL = Literal["5m", "1h"]
DEFAULT_ANTHROPIC_TTLS: Mapping[Stability, AnthropicTTL] = {
    Stability.STATIC: "1h",
    Stability.VERSIONED: "1h",
    Stability.SESSION: "5m",
}
_RESERVED_KEYS = ("model", "max_tokens", "tools", "system", "messages", "cache_control")


def render_anthropic(
    prompt: Prompt,
    *,
    model: str,
    max_tokens: int,
    ttl: Mapping[Stability, AnthropicTTL] | None = None,
    automatic: bool = False,
    automatic_ttl: AnthropicTTL = "5m",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> dict[str, Any]:
    """The kwargs for `anthropic.Anthropic().messages.create(**kwargs)`.

    - `ttl`: TTL of prefixkit's markers per tier (merged over
      `DEFAULT_ANTHROPIC_TTLS`); a longer TTL may not follow a shorter one.
    - `automatic`: use Anthropic's automatic caching for the moving end of the
      conversation (top-level `cache_control` with `automatic_ttl`).
    - `tokenizer`: counts tokens for the minimum-length warning.
    - `request`: other `messages.create` parameters (temperature, metadata,
      thinking, ...), passed through unchanged.

    Raises `RenderError` when the caller's markers exceed 4 (automatic mode
    counts as one), when a caller's 1h marker follows a 5m one, for a system
    role inside `messages`, or for an empty prompt. Never mutates `prompt`.
    """
    clash = sorted(set(request) & set(_RESERVED_KEYS))
    if clash:
        raise RenderError(
            f"render_anthropic sets {', '.join(clash)} itself: pass them as arguments "
            "or through the Prompt, not as extra request parameters"
        )
    limits = provider_limits("anthropic")
    tier_ttl: dict[Stability, str] = {**DEFAULT_ANTHROPIC_TTLS, **(ttl or {})}
    located = _locate(prompt)
    if not any(part == "messages" or part == "context" for part, _ in located):
        raise RenderError(
            "the prompt has no messages: Anthropic needs at least one user message; "
            "add Segment.dynamic(question) to Prompt(messages=...)"
        )
    info = model_info("anthropic", model)
    counter = tokenizer or AnthropicTokenCounter(model)
    blocks = _blocks(located, counter)
    plan = plan_breakpoints(
        blocks,
        max_markers=limits.max_breakpoints,
        reserved=1 if automatic else 0,
        tier_ttl=tier_ttl,
        ttl_order=limits.ttls,
        trailing_ttl=automatic_ttl if automatic else None,
        lookback=limits.lookback_blocks,
        min_tokens=info.min_cache_tokens if info is not None else None,
    )
    _warn_if_uncached(model, info, blocks, plan, automatic, counter)
    marks = {point.index: point for point in plan}
    kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    rendered = [_block(part, segment, marks.get(i)) for i, (part, segment) in enumerate(located)]
    tools = [block for (part, _), block in zip(located, rendered, strict=True) if part == "tools"]
    system = [block for (part, _), block in zip(located, rendered, strict=True) if part == "system"]
    if tools:
        kwargs["tools"] = tools
    if system:
        kwargs["system"] = system
    kwargs["messages"] = _messages(located, rendered)
    if automatic:
        kwargs["cache_control"] = {"type": "ephemeral", "ttl": automatic_ttl}
    kwargs.update(request)
    return kwargs


def _locate(prompt: Prompt) -> list[tuple[Part, Segment]]:
    """Segments in wire order: context moves into the first user message."""
    tools = [(p, s) for p, s in prompt.parts() if p == "tools"]
    system = [(p, s) for p, s in prompt.parts() if p == "system"]
    context = [(p, s) for p, s in prompt.parts() if p == "context"]
    messages = [(p, s) for p, s in prompt.parts() if p == "messages"]
    for _, segment in messages:
        if segment.role == "system":
            raise RenderError(
                f"message {segment.label} has role 'system': Anthropic has no system "
                "messages; move it into Prompt(system=...)"
            )
    return [*tools, *system, *context, *messages]


def _caller_ttl(segment: Segment) -> str | None:
    marker = segment.cache_control
    if marker is None:
        return None
    if marker.get("type") != "ephemeral":
        raise RenderError(
            f"cache_control {dict(marker)!r} on {segment.label} is not an Anthropic marker: "
            'use {"type": "ephemeral", "ttl": "5m" or "1h"}'
        )
    return marker.get("ttl", "5m")


def _blocks(located: list[tuple[Part, Segment]], counter: Tokenizer) -> list[Block]:
    blocks: list[Block] = []
    total = 0
    for part, segment in located:
        if part != "tools" and not segment.text.strip():
            raise RenderError(
                f"{part} {segment.label} is empty: Anthropic rejects empty text blocks; "
                "drop the segment"
            )
        total += counter.count(segment.text)
        blocks.append(
            Block(
                label=f"{part} {segment.label}",
                stability=segment.stability,
                caller_ttl=_caller_ttl(segment),
                prefix_tokens=total,
            )
        )
    return blocks


def _warn_if_uncached(
    model: str,
    info: ModelInfo | None,
    blocks: list[Block],
    plan: list[Breakpoint],
    automatic: bool,
    counter: Tokenizer,
) -> None:
    if info is None:
        warnings.warn(
            f"Anthropic model {model!r} is not in prefixkit's data table "
            "(sdk/data/models.json): its minimum cacheable prefix is unknown, so a prompt "
            "too short to cache would go unnoticed; add the model to the table",
            UnknownModelWarning,
            stacklevel=3,
        )
        return
    if info.min_cache_tokens is None:
        warnings.warn(
            f"the minimum cacheable prefix of Anthropic model {model!r} is not known to "
            "prefixkit: set min_cache_tokens in sdk/data/models.json",
            UnknownModelWarning,
            stacklevel=3,
        )
        return
    ends = [point.index for point in plan]
    if automatic:
        ends.append(len(blocks) - 1)
    if not ends:
        return
    longest = blocks[max(ends)].prefix_tokens or 0
    if longest < info.min_cache_tokens:
        estimate = (
            " (estimated with cl100k_base: Claude's tokenizer is not public; pass "
            "tokenizer=AnthropicTokenCounter(model, client) for an exact count)"
            if counter.name.startswith("anthropic-estimate:")
            else f" (counted with {counter.name})"
        )
        warnings.warn(
            f"the longest cached prefix is {longest} tokens{estimate}, below the "
            f"{info.min_cache_tokens}-token minimum of {info.name}: Anthropic will cache "
            "nothing and report no error; grow the static prefix or skip caching",
            UncachedPrefixWarning,
            stacklevel=3,
        )


def _block(part: Part, segment: Segment, mark: Breakpoint | None) -> dict[str, Any]:
    if part == "tools":
        block = anthropic_tool(json.loads(segment.text))
    else:
        block = {"type": "text", "text": segment.text}
    if mark is not None:
        ttl = mark.ttl or "5m"
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def _messages(
    located: list[tuple[Part, Segment]], rendered: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Group message blocks by consecutive role; context joins the first user message."""
    messages: list[dict[str, Any]] = []
    for (part, segment), block in zip(located, rendered, strict=True):
        if part not in ("context", "messages"):
            continue
        role = "user" if part == "context" else segment.role
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    return messages
