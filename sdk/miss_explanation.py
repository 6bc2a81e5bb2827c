"""Local miss explanation: compare a request with the previous one of the same prompt name.

Pure functions over fingerprints, for every provider and vLLM. A `RequestPrint`
holds what a later comparison needs and no prompt text (unless asked): the
model, the cache key or salt, each segment's part, label, stability, digest and
length, the tool names in order, vLLM's block hashes, when it was sent and how
many tokens it left in the cache (`promised`).

`explain_miss(previous, current, stats)` says why `current` read fewer tokens
from the cache than `previous` promised:

1. what the previous request left in the cache (`previous.promised`), capped
   where the new request legitimately differs (its DYNAMIC part, or anything
   after the prefix it shares), is what it should read (`expected`);
2. if it read that much (less a provider's granularity, `tolerance`), nothing
   was missed: None;
3. else the first difference before that point is the cause: the model, the
   cache key, the tools (`tools_order` when only their order changed), a
   static segment (`static_text`), a session segment (`session`);
4. with no such difference: `ttl_expired` when the previous request is older
   than the cache entry lives, else `replica` (another replica answered, or the
   entry was evicted).

Token positions of segments are their share of the prompt's characters scaled
to its reported token count; vLLM's block hashes, when given, place the first
difference exactly (`block`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .cache_miss import CacheMiss, MissReason
from .cache_stats import CacheStats
from .model_facts import Pricing
from .prompt import Part, Prompt
from .segment import Stability

__all__ = [
    "MAX_BLOCKS",
    "PartPrint",
    "RequestPrint",
    "explain_miss",
    "request_print",
]

MAX_BLOCKS = 8192
"""Block hashes kept per request (8 bytes each): 64 KiB at most per prompt name."""


def _called(segment: PartPrint, kind: str) -> str:
    """How a message names a segment: "the static system segment date", or for a segment
    without a name, which its label already calls a segment, "the system static segment
    'You are...'"."""
    if segment.name is None:
        return f"the {segment.part} {segment.label}"
    return f"the {kind} {segment.part} segment {segment.label}"


@dataclass(frozen=True)
class PartPrint:
    """One segment's fingerprint: where it sits, what it is, its digest and length."""

    part: Part
    label: str
    stability: Stability
    digest: str
    chars: int
    name: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class RequestPrint:
    """What a request looked like, for comparing the next one of its prompt name with it.

    `promised` is how many of its prompt tokens the cache holds after it (0
    until `sent` records its stats); `blocks` are vLLM block hashes (empty
    elsewhere) of `block_size` tokens.
    """

    model: str | None
    cache_key: str | None
    parts: tuple[PartPrint, ...]
    blocks: tuple[bytes, ...] = ()
    block_size: int | None = None
    at: float = 0.0
    input_tokens: int = 0
    promised: int = 0

    @property
    def chars(self) -> int:
        return sum(p.chars for p in self.parts)

    def sent(self, stats: CacheStats, promised: int) -> RequestPrint:
        """This print with what its answer reported."""
        return replace(self, input_tokens=stats.input_tokens, promised=promised)


def request_print(
    prompt: Prompt,
    *,
    model: str | None,
    cache_key: str | None = None,
    blocks: Sequence[bytes] = (),
    block_size: int | None = None,
    at: float = 0.0,
    keep_text: bool = False,
) -> RequestPrint:
    """The fingerprint of `prompt` sent to `model` (no text kept unless `keep_text`)."""
    parts = tuple(
        PartPrint(
            part,
            segment.label,
            segment.stability,
            segment.digest,
            len(segment.text),
            segment.name,
            segment.text if keep_text else None,
        )
        for part, segment in prompt.parts()
    )
    kept = tuple(block[:8] for block in blocks[:MAX_BLOCKS])  # 8 bytes tell blocks apart
    return RequestPrint(model, cache_key, parts, kept, block_size, at)


@dataclass(frozen=True)
class _Difference:
    index: int  # position of the first differing part (-1 for the model or key)
    reason: MissReason
    detail: str
    segment: str | None
    dynamic: bool = False  # a DYNAMIC part: it differs by design


def _first_difference(previous: RequestPrint, current: RequestPrint) -> _Difference | None:
    """The first difference in prefix order: model and key, then each part by position."""
    if previous.model != current.model:
        return _Difference(
            -1,
            MissReason.MODEL,
            f"the model changed from {previous.model} to {current.model}: each model has its "
            "own cache; keep one model per prompt",
            None,
        )
    for index, (old, new) in enumerate(zip(previous.parts, current.parts, strict=False)):
        if (old.part, old.digest, old.stability) == (new.part, new.digest, new.stability):
            continue
        if old.part == "tools" or new.part == "tools":
            return _tools_difference(index, previous, current)
        if new.stability >= Stability.DYNAMIC or old.stability >= Stability.DYNAMIC:
            return _Difference(index, MissReason.SESSION, "", new.label, dynamic=True)
        rolled_out = old.name is not None and old.name == new.name and old.label != new.label
        if new.stability <= Stability.VERSIONED and rolled_out:
            return _Difference(  # a roll-out: the new version's first request writes it
                index,
                MissReason.STATIC_TEXT,
                f"the {new.part} segment moved from {old.label} to {new.label}: a new "
                "version's first request writes its prefix again; warm it up on a roll-out "
                "(prefixkit warm) so that its first users read it",
                new.label,
            )
        if new.stability <= Stability.VERSIONED:
            return _Difference(
                index,
                MissReason.STATIC_TEXT,
                f"{_called(new, 'static')} changed its text: keep volatile "
                "values (dates, ids, names) out of STATIC and VERSIONED segments, or give the "
                "changed prompt a new version",
                new.label,
            )
        return _Difference(
            index,
            MissReason.SESSION,
            f"{_called(new, 'session')} differs from the previous request's: "
            "append to the history and shared context, never rewrite them",
            new.label,
        )
    if len(current.parts) < len(previous.parts):
        index = len(current.parts)
        old = previous.parts[index]
        if old.stability >= Stability.DYNAMIC:
            return _Difference(index, MissReason.SESSION, "", old.label, dynamic=True)
        return _Difference(
            index,
            MissReason.SESSION if old.stability == Stability.SESSION else MissReason.STATIC_TEXT,
            f"the {old.part} segment {old.label} of the previous request is gone: keep the "
            "earlier segments of a prompt and only append",
            old.label,
        )
    if previous.cache_key != current.cache_key:  # a key derived from a changed prefix is not
        return _Difference(  # a cause of its own: only a key that changed alone is
            -1,
            MissReason.CACHE_KEY,
            "the cache key (prompt_cache_key or cache_salt) changed while the prompt did not: "
            "derive it from the static prefix and the tenant only",
            None,
        )
    return None


def _tools_difference(index: int, previous: RequestPrint, current: RequestPrint) -> _Difference:
    old = [p for p in previous.parts if p.part == "tools"]
    new = [p for p in current.parts if p.part == "tools"]
    label = current.parts[index].label if index < len(current.parts) else None
    if sorted(p.digest for p in old) == sorted(p.digest for p in new):
        return _Difference(
            index,
            MissReason.TOOLS_ORDER,
            "the same tools came in another order ("
            + ", ".join(p.name or p.label for p in new)
            + "): keep Prompt's default sort_tools=True, or build the list in a fixed order",
            label,
        )
    return _Difference(
        index,
        MissReason.TOOLS,
        f"the tools changed at {label or 'the end of the list'}: every tool is part of the "
        "cached prefix; keep the tool list fixed for a prompt name",
        label,
    )


def _tokens_before(index: int, current: RequestPrint) -> int:
    """Tokens of `current` before its part `index` (by the parts' share of the characters)."""
    if index <= 0:
        return 0
    total = current.chars
    if total == 0 or current.input_tokens == 0:
        return 0
    before = sum(p.chars for p in current.parts[:index])
    return current.input_tokens * before // total


def _first_block(previous: RequestPrint, current: RequestPrint) -> int | None:
    """The first vLLM block whose hash differs (or that one request lacks)."""
    if not previous.blocks or not current.blocks or previous.block_size != current.block_size:
        return None
    for index, (old, new) in enumerate(zip(previous.blocks, current.blocks, strict=False)):
        if old != new:
            return index
    shorter = min(len(previous.blocks), len(current.blocks))
    return shorter if len(previous.blocks) != len(current.blocks) else None


def explain_miss(
    previous: RequestPrint,
    current: RequestPrint,
    stats: CacheStats,
    *,
    tolerance: int = 0,
    ttl_seconds: float | None = None,
    pricing: Pricing | None = None,
) -> CacheMiss | None:
    """Why `current` (answered with `stats`) read fewer cached tokens than `previous` left.

    None when it read what it could. `tolerance` is the provider's granularity
    (OpenAI's 128-token steps, vLLM's block size); `ttl_seconds` the cache
    entry's lifetime (None: entries are evicted, not expired, as on vLLM);
    `pricing` prices the tokens missed.
    """
    if not stats.reported:
        return None
    current = replace(current, input_tokens=stats.input_tokens)
    promise = min(previous.promised, stats.input_tokens)
    expected, cause = promise, None
    difference = _first_difference(previous, current)
    block = _first_block(previous, current)
    # positions estimated from characters are a few percent off; block hashes are exact
    size = current.block_size if block is not None else None
    slack = tolerance if size is not None else tolerance + stats.input_tokens // 20
    if difference is not None:
        where = _tokens_before(difference.index, current)
        if block is not None and size is not None and difference.index >= 0:
            where = block * size
        if difference.dynamic:  # a DYNAMIC part differs, as it should: it caps the hit
            expected = min(promise, where)
        elif where < promise + slack:  # a change inside what the cache held
            cause = difference
    shortfall = expected - stats.cached_tokens
    if shortfall <= (tolerance if cause is not None else slack):
        return None
    if cause is not None:
        reason, detail, segment = cause.reason, cause.detail, cause.segment
    else:
        age = current.at - previous.at
        segment = None
        if ttl_seconds is not None and age > ttl_seconds:
            reason = MissReason.TTL_EXPIRED
            detail = (
                f"nothing changed, but the previous request was {age:.0f} s ago and the cache "
                f"entry lives {ttl_seconds:.0f} s: send more often, or use a longer TTL"
            )
        else:
            reason = MissReason.REPLICA
            detail = (
                "nothing in the prefix changed and the entry should still live: the request "
                "reached another replica or machine, or the entry was evicted; route by prefix "
                "(prompt_cache_key, prefixkit serve's router) and keep load per key moderate"
            )
    return CacheMiss(
        reason,
        "local",
        detail,
        missed_tokens=shortfall,
        segment=segment,
        block=block,
        missed_cost_usd=(
            None if pricing is None else pricing.missed_cost(shortfall, stats.input_tokens)
        ),
    )
