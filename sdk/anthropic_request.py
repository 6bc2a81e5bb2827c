"""Render a `Prompt` as the keyword arguments of Anthropic's `messages.create`.

Layout (Anthropic's prefix order is tools -> system -> messages):
- `tools`: every tool definition, converted to Anthropic's shape;
- `system`: one text block per system segment;
- `messages`: consecutive segments with the same role form one message, one
  text block per text segment and the segment's own blocks (images,
  documents, `tool_use`, `tool_result`, server tool blocks) for a structured
  one (see `provider_blocks`). Context segments (session documents) are the
  leading blocks of the first user message, after the static system and
  before the conversation, where Anthropic recommends long documents. A
  system segment inside `messages` becomes a mid-conversation system message
  (`{"role": "system", "content": [text blocks]}`, the SDK's
  `SystemMessageParam`; models that do not take one answer HTTP 400). Every
  tool call must be answered by a result before the model's next turn.

Breakpoints (`cache_control`) follow `breakpoints.plan_breakpoints`: the
caller's own markers first (counted against the limit of 4, never moved or
dropped), then the end of the STATIC tier, the rolling end of the SESSION tier
(the latest turn), the end of the VERSIONED tier, and lookback checkpoints.
TTLs come per tier (default 5m everywhere: a 1h write costs 2x input against
1.25x, so it pays only when the prefix is reused less often than every five
minutes; give `reuse_interval` to let `choose_ttl` pick, or `ttl`),
1h always before 5m. `automatic=True` adds Anthropic's top-level `cache_control` (it
takes one of the 4 slots and replaces the rolling breakpoint).

If the longest cached prefix is shorter than the model's minimum (data table
`sdk/data/models.json`), `UncachedPrefixWarning` is issued: the API would
silently cache nothing. Counts use `tokenizer`; by default they are a
labelled cl100k_base estimate. An `AnthropicTokenCounter` with a client is
exact and costs API calls, so only the cacheable prefix is counted, at each
tier's end until one reaches the minimum (`cacheable_prefixes`), once per
distinct prefix; the DYNAMIC question never is.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from .anthropic_token_counter import AnthropicTokenCounter
from .breakpoints import Block, Breakpoint, plan_breakpoints
from .cache_payoff import choose_ttl
from .content import ContentBlock, Document, Image, Native, Text, ToolCall
from .errors import PrefixkitWarning, RenderError, UncachedPrefixWarning, UnknownModelWarning
from .model_facts import ModelInfo, model_info, provider_limits
from .prompt import Part, Prompt
from .provider_blocks import check_tool_pairs, converted
from .request_checks import check_request
from .segment import Segment, Stability, token_count
from .tokenizer import Tokenizer
from .tool_schema import anthropic_tool

if TYPE_CHECKING:
    from anthropic.types import (
        CacheControlEphemeralParam,
        MessageParam,
        TextBlockParam,
        ToolUnionParam,
    )
    from anthropic.types.beta.message_create_params import (
        MessageCreateParamsBase as AnthropicBetaRequest,
    )
    from anthropic.types.messages.batch_create_params import (
        Request as AnthropicBatchRequest,
    )

__all__ = [
    "DEFAULT_ANTHROPIC_TTLS",
    "AnthropicBatchRequest",
    "AnthropicBetaRequest",
    "AnthropicRequest",
    "AnthropicTTL",
    "PrefixBody",
    "cacheable_prefixes",
    "render_anthropic",
    "render_anthropic_batch",
    "render_anthropic_beta",
]

AnthropicTTL = Literal["5m", "1h"]
DEFAULT_ANTHROPIC_TTLS: Mapping[Stability, AnthropicTTL] = {
    Stability.STATIC: "5m",
    Stability.VERSIONED: "5m",
    Stability.SESSION: "5m",
}
_TIERS = (Stability.STATIC, Stability.VERSIONED, Stability.SESSION)
_ARGUMENTS = {
    "model": "render_anthropic(model=...)",
    "max_tokens": "render_anthropic(max_tokens=...)",
    "cache_control": "render_anthropic(automatic=True, automatic_ttl=...)",
    "system": "Prompt(system=...)",
    "messages": "Prompt(context=..., messages=...)",
}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


class AnthropicRequest(TypedDict):
    """The keyword arguments of `anthropic.Anthropic().messages.create` that prefixkit sets.

    Parameters passed through `render_anthropic(**request)` are in the dict
    as well (untyped here).
    """

    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: NotRequired[list[TextBlockParam]]
    tools: NotRequired[list[ToolUnionParam]]
    cache_control: NotRequired[CacheControlEphemeralParam]


if not TYPE_CHECKING:

    class AnthropicBetaRequest(TypedDict):
        """The keyword arguments of `anthropic.Anthropic().beta.messages.create`
        (`render_anthropic_beta`).

        For type checkers this is the official client's own beta parameters
        (`anthropic.types.beta.message_create_params.MessageCreateParamsBase`),
        so `client.beta.messages.create(**request, betas=[...])` and
        `beta.messages.stream` accept it. prefixkit sets the keys of
        `AnthropicRequest`.
        """

        model: str
        max_tokens: int
        messages: list[dict[str, Any]]
        system: NotRequired[list[dict[str, Any]]]
        tools: NotRequired[list[dict[str, Any]]]
        cache_control: NotRequired[dict[str, Any]]

    class AnthropicBatchRequest(TypedDict):
        """One request of a Message Batch (`render_anthropic_batch`): its
        `custom_id` and its `params`.

        For type checkers this is the official client's own
        `anthropic.types.messages.batch_create_params.Request`, so
        `client.messages.batches.create(requests=...)` accepts a list of them.
        """

        custom_id: str
        params: dict[str, Any]


def render_anthropic(
    prompt: Prompt,
    *,
    model: str,
    max_tokens: int,
    ttl: Mapping[Stability, AnthropicTTL] | None = None,
    reuse_interval: float | None = None,
    automatic: bool = False,
    automatic_ttl: AnthropicTTL = "5m",
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> AnthropicRequest:
    """The kwargs for `anthropic.Anthropic().messages.create(**kwargs)`.

    - `ttl`: TTL of prefixkit's markers per tier (merged over
      `DEFAULT_ANTHROPIC_TTLS`, all "5m"); a tier left out takes the longest
      TTL given for a later tier, since a longer TTL may not follow a shorter
      one. Only the tiers the prompt has are checked.
    - `reuse_interval`: seconds between requests that reuse the static
      prefix (across conversations); the STATIC and VERSIONED TTL is then
      chosen by `choose_ttl` (5m, 1h, or no marker at all when
      even 1h expires between reuses, with a warning). Not with `ttl`.
    - `automatic`: use Anthropic's automatic caching for the moving end of the
      conversation (top-level `cache_control` with `automatic_ttl`).
    - `tokenizer`: counts tokens for the minimum-length warning.
    - `request`: other `messages.create` parameters (metadata, thinking,
      tool_choice, ...), passed through unchanged; `tools=` is sent as given
      when the prompt has no tools.

    Raises `RenderError` when the caller's markers exceed 4 (automatic mode
    counts as one), when a caller's 1h marker follows a 5m one, for a tool
    call without a result (or a result without its call), for `stream` (use
    `messages.stream`, or `AnthropicClient.stream`), or for an empty prompt.
    Never mutates `prompt`. Each tool definition is converted once per distinct
    definition: its nested values (`input_schema`) are shared with later requests,
    so copy a request before changing it in place.
    """
    check_request(
        prompt,
        request,
        renderer="render_anthropic",
        reserved=_ARGUMENTS,
        provider="anthropic",
        model=model,
    )
    limits = provider_limits("anthropic")
    located = _locate(prompt)
    check_tool_pairs(
        [(s.role, s.blocks) for p, s in located if p == "messages"], "Anthropic Messages"
    )
    info = model_info("anthropic", model)
    tier_ttl, unmarked = _tier_ttls(prompt, ttl, reuse_interval, model)
    counter = tokenizer or AnthropicTokenCounter(model)
    if isinstance(counter, AnthropicTokenCounter) and not counter.estimate:
        wire, owners, blocks = _wire(located)
        minimum = info.min_cache_tokens if info is not None else None
        tokens = _exact_prefix_tokens(located, wire, owners, counter, minimum)
        blocks = [b._replace(prefix_tokens=tokens[o]) for b, o in zip(blocks, owners, strict=True)]
    else:
        wire, owners, blocks = _wire(located, _local_prefix_tokens(located, counter))
    plan = plan_breakpoints(
        blocks,
        max_markers=limits.max_breakpoints,
        reserved=1 if automatic else 0,
        tier_ttl=tier_ttl,
        ttl_order=limits.ttls,
        trailing_ttl=automatic_ttl if automatic else None,
        lookback=limits.lookback_blocks,
        min_tokens=info.min_cache_tokens if info is not None else None,
        unmarked=unmarked,
    )
    _warn_if_uncached(model, info, blocks, plan, automatic, counter)
    for point in plan:
        if point.reason != "caller":
            where, block = wire[point.index]
            marker = {"type": "ephemeral", "ttl": point.ttl or "5m"}
            wire[point.index] = (where, {**block, "cache_control": marker})
    kwargs: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    tools = [block for (part, _), block in wire if part == "tools"]
    system = [block for (part, _), block in wire if part == "system"]
    if tools:
        kwargs["tools"] = tools
    if system:
        kwargs["system"] = system
    kwargs["messages"] = _messages(wire)
    if automatic:
        kwargs["cache_control"] = {"type": "ephemeral", "ttl": automatic_ttl}
    kwargs.update(request)
    return cast(AnthropicRequest, kwargs)


def render_anthropic_beta(
    prompt: Prompt,
    *,
    model: str,
    max_tokens: int,
    ttl: Mapping[Stability, AnthropicTTL] | None = None,
    reuse_interval: float | None = None,
    automatic: bool = False,
    automatic_ttl: AnthropicTTL = "5m",
    tokenizer: Tokenizer | None = None,
    betas: Sequence[str] = (),
    **request: Any,
) -> AnthropicBetaRequest:
    """`render_anthropic`, typed for `client.beta.messages.create(**request, betas=[...])`.

    The request is the same dict (with `betas`, which the client sends as the
    `anthropic-beta` header); only its type differs (the beta API's own
    parameter types), so a program that uses beta features type-checks.
    Beta blocks (`compaction`, `mcp_tool_listing`, `fallback`, ...) are
    rendered by either function.
    """
    rendered = render_anthropic(
        prompt,
        model=model,
        max_tokens=max_tokens,
        ttl=ttl,
        reuse_interval=reuse_interval,
        automatic=automatic,
        automatic_ttl=automatic_ttl,
        tokenizer=tokenizer,
        **request,
    )
    if betas:
        cast("dict[str, Any]", rendered)["betas"] = list(betas)
    return cast("AnthropicBetaRequest", rendered)


BATCH_TTL: AnthropicTTL = "1h"


def render_anthropic_batch(
    prompts: Mapping[str, Prompt],
    *,
    model: str,
    max_tokens: int,
    ttl: Mapping[Stability, AnthropicTTL] | None = None,
    tokenizer: Tokenizer | None = None,
    **request: Any,
) -> list[AnthropicBatchRequest]:
    """The `requests` of `client.messages.batches.create`, one per `custom_id` in `prompts`.

    Each request's `params` is `render_anthropic(prompt, ...)`. A batch may
    take longer than 5 minutes to reach a later request, so when two or more
    prompts share their static prefix, its tiers (STATIC and VERSIONED) are
    marked with a 1-hour TTL by default (Anthropic's guidance for batches
    sharing a prefix); `ttl` overrides it. Prompts whose static prefix no other
    prompt shares keep the default TTLs.
    """
    digests = [prompt.static_prefix_digest for prompt in prompts.values()]
    requests: list[dict[str, Any]] = []
    for (custom_id, prompt), digest in zip(prompts.items(), digests, strict=True):
        tier_ttl = ttl
        if tier_ttl is None and digests.count(digest) > 1 and prompt.static_segments():
            tier_ttl = {Stability.STATIC: BATCH_TTL, Stability.VERSIONED: BATCH_TTL}
        params = render_anthropic(
            prompt, model=model, max_tokens=max_tokens, ttl=tier_ttl, tokenizer=tokenizer, **request
        )
        requests.append({"custom_id": custom_id, "params": params})
    return cast("list[AnthropicBatchRequest]", requests)


def _tier_ttls(
    prompt: Prompt,
    ttl: Mapping[Stability, AnthropicTTL] | None,
    reuse_interval: float | None,
    model: str,
) -> tuple[dict[Stability, str], tuple[Stability, ...]]:
    """TTL per tier present in the prompt, and the tiers left unmarked."""
    given: dict[Stability, str] = dict(ttl or {})
    unmarked: tuple[Stability, ...] = ()
    if reuse_interval is not None:
        if ttl is not None:
            raise RenderError(
                "give ttl=... or reuse_interval=..., not both", provider="anthropic", model=model
            )
        choice = choose_ttl(reuse_interval, provider="anthropic", model=model)
        if choice.ttl is None:
            warnings.warn(choice.reason, PrefixkitWarning, stacklevel=3)
            unmarked = (Stability.STATIC, Stability.VERSIONED)
        else:
            given = {Stability.STATIC: choice.ttl, Stability.VERSIONED: choice.ttl}
    for tier, value in given.items():
        if tier not in _TIERS:
            raise RenderError(
                f"ttl for {tier.name}: only STATIC, VERSIONED and SESSION are marked",
                provider="anthropic",
                model=model,
            )
        if value not in provider_limits("anthropic").ttls:
            raise RenderError(
                f"ttl {value!r} for {tier.name} is not one of 5m, 1h",
                provider="anthropic",
                model=model,
            )
    present = frozenset(segment.stability for _, segment in prompt.parts())
    return dict(_present_tier_ttls(tuple(given.items()), present)), unmarked


@functools.lru_cache(maxsize=256)
def _present_tier_ttls(
    given: tuple[tuple[Stability, str], ...], present: frozenset[Stability]
) -> tuple[tuple[Stability, str], ...]:
    """The TTL of each tier in `present`: as given, else the longest given for a later tier
    when that is 1h, else the default."""
    chosen = dict(given)
    tiers: list[tuple[Stability, str]] = []
    for tier in _TIERS:
        later = [ttl for t, ttl in given if t > tier]
        default = "1h" if "1h" in later else DEFAULT_ANTHROPIC_TTLS[tier]
        if tier in present:
            tiers.append((tier, chosen.get(tier, default)))
    return tuple(tiers)


def _locate(prompt: Prompt) -> list[tuple[Part, Segment]]:
    """Segments in wire order: context moves into the first user message."""
    order: dict[Part, list[tuple[Part, Segment]]] = {
        "tools": [],
        "system": [],
        "context": [],
        "messages": [],
    }
    for located in prompt.parts():
        order[located[0]].append(located)
    return [*order["tools"], *order["system"], *order["context"], *order["messages"]]


def _caller_ttl(marker: Mapping[str, Any] | None, where: str) -> str | None:
    if marker is None:
        return None
    if marker.get("type") != "ephemeral":
        raise RenderError(
            f"cache_control {dict(marker)!r} on {where} is not an Anthropic marker: "
            'use {"type": "ephemeral", "ttl": "5m" or "1h"}',
            provider="anthropic",
            segment=where,
        )
    return str(marker.get("ttl", "5m"))


def _content(block: ContentBlock) -> dict[str, Any]:
    """A portable or Anthropic-native block in the Messages API shape."""
    if isinstance(block, Native):
        return dict(block.item)
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image):
        if block.url is not None:
            return {"type": "image", "source": {"type": "url", "url": block.url}}
        image = {"type": "base64", "media_type": block.media_type, "data": block.data}
        return {"type": "image", "source": image}
    if isinstance(block, Document):
        if block.url is not None:
            source: dict[str, Any] = {"type": "url", "url": block.url}
        elif block.text is not None:
            source = {"type": "text", "media_type": "text/plain", "data": block.text}
        else:
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
        document: dict[str, Any] = {"type": "document", "source": source}
        if block.title is not None:
            document["title"] = block.title
        return document
    if isinstance(block, ToolCall):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": block.argument_dict(),
        }
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.call_id}
    result["content"] = (
        block.content
        if isinstance(block.content, str)
        else [_content(part) for part in block.content]
    )
    if block.is_error:
        result["is_error"] = True
    return result


WireBlock = tuple[tuple[Part, Segment], dict[str, Any]]


@functools.lru_cache(maxsize=1024)
def _shaped_tool(text: str) -> dict[str, Any]:
    return anthropic_tool(json.loads(text))


def _segment_blocks(part: Part, segment: Segment) -> list[dict[str, Any]]:
    if part == "tools":
        # converted once per distinct definition; each request gets its own outer dict
        return [dict(_shaped_tool(segment.text))]
    if not segment.blocks:
        if not segment.text.strip():
            raise RenderError(
                f"{part} {segment.label} is empty: Anthropic rejects empty text blocks; "
                "drop the segment",
                provider="anthropic",
                segment=segment.label,
            )
        return [{"type": "text", "text": segment.text}]
    rendered = [
        _content(block) for original in segment.blocks for block in converted(original, "anthropic")
    ]
    if any(block.get("type") == "text" and not block["text"].strip() for block in rendered):
        raise RenderError(
            f"{part} {segment.label} holds an empty text block: Anthropic rejects empty text "
            "blocks; drop the block",
            provider="anthropic",
            segment=segment.label,
        )
    if (part == "system" or segment.role == "system") and any(
        block.get("type") != "text" for block in rendered
    ):
        raise RenderError(
            f"system {segment.label} holds non-text blocks: Anthropic system content is "
            "text only; move images, documents and tool blocks into a user message",
            provider="anthropic",
            segment=segment.label,
        )
    return rendered


def _wire(
    located: list[tuple[Part, Segment]], tokens: list[int] | None = None
) -> tuple[list[WireBlock], list[int], list[Block]]:
    """Every block of the request in order, the segment it comes from, and its planning view.

    `tokens`: the tokens up to and including each segment, when already known.
    """
    wire: list[WireBlock] = []
    owners: list[int] = []
    blocks: list[Block] = []
    for position, (part, segment) in enumerate(located):
        rendered = _segment_blocks(part, segment)
        where = f"{part} {segment.label}"
        caller = _caller_ttl(segment.cache_control, where)
        prefix_tokens = None if tokens is None else tokens[position]
        if len(rendered) == 1 and "cache_control" not in rendered[0]:
            # one block without a marker of its own: text, a tool, most message blocks
            (block,) = rendered
            markable = block.get("type") not in _UNMARKABLE
            if caller is not None:
                if not markable:
                    raise _unmarkable(part, segment)
                block = {**block, "cache_control": {"type": "ephemeral", "ttl": caller}}
            wire.append(((part, segment), block))
            owners.append(position)
            blocks.append(Block(where, segment.stability, markable, caller, prefix_tokens))
            continue
        markable_blocks = [block.get("type") not in _UNMARKABLE for block in rendered]
        last = max((i for i, ok in enumerate(markable_blocks) if ok), default=None)
        if caller is not None and last is None:
            raise _unmarkable(part, segment)
        for index, block in enumerate(rendered):
            own = _caller_ttl(block.get("cache_control"), where)
            marker = caller if index == last else None
            if own is not None and marker is not None and own != marker:
                raise RenderError(
                    f"{where} has two cache markers: {own} and {marker}",
                    provider="anthropic",
                    segment=where,
                )
            if marker is not None and own is None:
                block = {**block, "cache_control": {"type": "ephemeral", "ttl": marker}}
            wire.append(((part, segment), block))
            owners.append(position)
            blocks.append(
                Block(
                    where if len(rendered) == 1 else f"{where} block {index}",
                    segment.stability,
                    markable_blocks[index],
                    own if own is not None else marker,
                    prefix_tokens,
                )
            )
    return wire, owners, blocks


def _unmarkable(part: Part, segment: Segment) -> RenderError:
    return RenderError(
        f"{part} {segment.label} carries cache_control but none of its blocks can "
        "(thinking blocks cannot): move the marker to another segment",
        provider="anthropic",
        segment=segment.label,
    )


class PrefixBody(TypedDict):
    """A request prefix as `AnthropicTokenCounter.count_prefix` takes it."""

    tools: list[dict[str, Any]] | None
    system: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]


def _count_points(
    located: list[tuple[Part, Segment]], wire: list[WireBlock], owners: list[int]
) -> list[tuple[int, PrefixBody]]:
    """The prefixes an exact count needs, in order: each tier's end (the segment, its prefix).

    DYNAMIC segments are never counted: they change on every request and are
    never cached.
    """
    ends = {owner: index for index, owner in enumerate(owners)}
    points: list[tuple[int, PrefixBody]] = []
    for position, (_, segment) in enumerate(located):
        following = located[position + 1][1].stability if position + 1 < len(located) else None
        if segment.stability == Stability.DYNAMIC or following == segment.stability:
            continue
        prefix = wire[: ends[position] + 1]
        tools = [block for (part, _), block in prefix if part == "tools"]
        system = [block for (part, _), block in prefix if part == "system"]
        body = PrefixBody(tools=tools or None, system=system or None, messages=_messages(prefix))
        points.append((position, body))
    return points


def cacheable_prefixes(prompt: Prompt) -> list[PrefixBody]:
    """The prefixes `render_anthropic` counts exactly for `prompt`, in the order it counts them.

    Counting them with `AnthropicTokenCounter.prepare(prefixes=..., min_tokens=...)`
    (which stops, as the renderer does, at the first one that reaches the
    model's minimum) lets a render with an async client answer from the memo.
    """
    located = _locate(prompt)
    wire, owners, _ = _wire(located)
    return [body for _, body in _count_points(located, wire, owners)]


def _local_prefix_tokens(located: list[tuple[Part, Segment]], counter: Tokenizer) -> list[int]:
    """Tokens up to and including each segment, every segment counted (a local tokenizer)."""
    counts: list[int] = []
    total = 0
    for _, segment in located:
        total += token_count(segment, counter)
        counts.append(total)
    return counts


def _exact_prefix_tokens(
    located: list[tuple[Part, Segment]],
    wire: list[WireBlock],
    owners: list[int],
    counter: AnthropicTokenCounter,
    minimum: int | None,
) -> list[int | None]:
    """Tokens up to each segment, counted exactly only as far as the breakpoint plan needs.

    Each tier's end is counted with `count_prefix` (memoised by content)
    until one reaches the model's minimum: every later segment is then long
    enough and holds that count as a lower bound; so do the segments inside a
    tier and the DYNAMIC ones, which are never counted. An unknown minimum
    needs no count at all.
    """
    if minimum is None:
        return [None] * len(located)
    counted: dict[int, int] = {}
    for position, body in _count_points(located, wire, owners):
        counted[position] = counter.count_prefix(**body)
        if counted[position] >= minimum:
            break
    known = 0
    bounds: list[int | None] = []
    for position in range(len(located)):
        known = counted.get(position, known)
        bounds.append(known)
    return bounds


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


def _messages(wire: list[WireBlock]) -> list[dict[str, Any]]:
    """Group message blocks by consecutive role; context joins the first user message."""
    messages: list[dict[str, Any]] = []
    for (part, segment), block in wire:
        if part not in ("context", "messages"):
            continue
        role = "user" if part == "context" else segment.role
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    return messages
