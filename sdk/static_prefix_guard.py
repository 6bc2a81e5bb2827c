"""Static-prefix guard: one prompt name, one static prefix.

A named `Prompt` is expected to render the same static prefix every time: that
is what makes it cacheable. `StaticPrefixGuard.check(prompt)` remembers the first
static-prefix digest seen for each `prompt.name`; a later prompt with the same
name and a different static prefix raises `StaticPrefixChangedError` (mode
"raise") or warns with `StaticPrefixChangedWarning` (mode "warn"), with a
unified diff of the first static segment that differs. The linter catches the
same mistake before the code runs; this catches what only shows at run time
(a timestamp formatted into a "static" instruction, a re-ordered tool list).

    from prefixkit.sdk import default_guard
    default_guard.check(prompt)                 # the process-wide default, mode "raise"
    guard = StaticPrefixGuard(mode="warn")      # your own, e.g. per tenant or per test

`Prompt` and the renderers stay pure: nothing calls the guard for you. Call
`check` where a request is built (before `render_*` or a client's `create`).
Prompts without a name are not tracked. The guard keeps only the static segments of
the first prompt per name (for the diff), and is thread-safe.

The same memory explains cache misses: `guard.observe(prompt, stats, model=...,
provider=...)` (the SDK clients call it when given `guard=`) keeps, per prompt
name, the fingerprint of the last request (segment digests and lengths, vLLM
block hashes, no text unless `keep_text=True`) and returns a `CacheMiss` when a
response read fewer cached tokens than the previous request left in the cache,
naming the first segment (and block) that changed and the likely cause. At most
`max_prompts` names are remembered (the least recently used is forgotten first).
"""

from __future__ import annotations

import difflib
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .cache_miss import CacheMiss
from .cache_stats import CacheStats
from .errors import StaticPrefixChangedError, StaticPrefixChangedWarning, UsageError
from .hit_rate import prompt_identity
from .miss_explanation import RequestPrint, explain_miss, request_print
from .model_facts import model_info, provider_limits
from .prompt import Prompt
from .segment import Segment

__all__ = ["GuardMode", "StaticPrefixGuard", "default_guard", "ttl_seconds"]

GuardMode = Literal["raise", "warn"]

MissProvider = Literal["anthropic", "openai", "vllm"]
"""Who answered a request `StaticPrefixGuard.observe` compares: it sets the cache's
granularity, lifetime and price."""

_OPENAI_STEP = 128  # OpenAI counts cache hits in 128-token steps


@dataclass(frozen=True)
class _Seen:
    digest: str
    segments: tuple[Segment, ...]


@dataclass
class _Memory:
    """All the guard remembers of one prompt name."""

    first: _Seen | None = None
    last: RequestPrint | None = None


def ttl_seconds(ttl: str) -> float:
    """A cache lifetime ("5m", "1h", "30s") in seconds."""
    number, unit = float(ttl[:-1]), ttl[-1]
    return number * {"s": 1, "m": 60, "h": 3600}[unit]


def promised_tokens(
    stats: CacheStats, provider: MissProvider, *, block_size: int | None, minimum: int
) -> int:
    """How many of a request's prompt tokens the cache holds once it is answered.

    Anthropic writes at breakpoints (read + written); OpenAI caches the whole
    prompt implicitly from `minimum` tokens, in 128-token steps (read + written
    when it reports writes); vLLM caches every full block but the last token's.
    """
    if not stats.reported:
        return 0
    if provider == "anthropic":
        return stats.cached_tokens + stats.written_tokens
    if provider == "vllm":
        size = block_size or 1
        return max(stats.input_tokens - 1, 0) // size * size
    if stats.written_tokens:
        return stats.cached_tokens + stats.written_tokens
    if stats.input_tokens < minimum:
        return stats.cached_tokens
    return stats.input_tokens // _OPENAI_STEP * _OPENAI_STEP


@dataclass(frozen=True)
class _Change:
    """Where a static prefix first differs, and the message that says so."""

    position: int
    label: str | None
    message: str


def _describe(name: str, before: tuple[Segment, ...], after: tuple[Segment, ...]) -> _Change:
    for position, (old, new) in enumerate(zip(before, after, strict=False)):
        if old.text != new.text or old.stability != new.stability or old.role != new.role:
            diff = "".join(
                difflib.unified_diff(
                    (old.text + "\n").splitlines(keepends=True),
                    (new.text + "\n").splitlines(keepends=True),
                    fromfile=f"{old.label} (first seen)",
                    tofile=f"{new.label} (now)",
                )
            )
            return _Change(
                position,
                old.label,
                f"prompt {name!r} changed its static prefix at static segment {position} "
                f"({old.label}); every request now misses the cache from there on. "
                "Keep volatile values out of STATIC/VERSIONED segments (move them to a "
                f"DYNAMIC segment) or give the new prompt another name.\n{diff}",
            )
    shorter = min(len(before), len(after))
    return _Change(
        shorter,
        before[shorter].label if shorter < len(before) else None,
        f"prompt {name!r} changed the number of static segments from {len(before)} to "
        f"{len(after)}; keep the static prefix fixed or give the new prompt another name",
    )


class StaticPrefixGuard:
    """Remembers each prompt name's static-prefix digest and flags changes (`check`), and
    its last request's fingerprint to explain cache misses (`observe`)."""

    def __init__(
        self, mode: GuardMode = "raise", *, max_prompts: int = 4096, keep_text: bool = False
    ) -> None:
        if mode not in ("raise", "warn"):
            raise UsageError(
                f"static-prefix guard mode must be 'raise' or 'warn', got {mode!r}",
                argument="mode",
                value=mode,
            )
        if max_prompts < 1:
            raise UsageError(
                f"max_prompts must be at least 1, got {max_prompts}: it bounds how many prompt "
                "names the guard remembers",
                argument="max_prompts",
                value=max_prompts,
            )
        self.mode: GuardMode = mode
        self.max_prompts = max_prompts
        self.keep_text = keep_text
        self._seen: OrderedDict[str, _Memory] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many prompt names the guard remembers (at most `max_prompts`)."""
        return len(self._seen)

    def _memory(self, name: str) -> _Memory:
        """The memory of `name` (new if unknown), most recently used; call under the lock."""
        memory = self._seen.get(name)
        if memory is None:
            memory = self._seen[name] = _Memory()
            while len(self._seen) > self.max_prompts:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(name)
        return memory

    def check(self, prompt: Prompt) -> None:
        """Record `prompt`'s static prefix, or raise/warn if its name had another one."""
        if prompt.name is None:
            return
        digest = prompt.static_prefix_digest
        with self._lock:
            memory = self._memory(prompt.name)
            if memory.first is None:
                memory.first = _Seen(digest, tuple(prompt.static_segments()))
            seen = memory.first
        if seen.digest == digest:
            return
        change = _describe(prompt.name, seen.segments, tuple(prompt.static_segments()))
        kind = StaticPrefixChangedError if self.mode == "raise" else StaticPrefixChangedWarning
        problem = kind(
            change.message,
            prompt_name=prompt.name,
            position=change.position,
            label=change.label,
            first_digest=seen.digest,
            digest=digest,
        )
        if isinstance(problem, StaticPrefixChangedError):
            raise problem
        warnings.warn(problem, stacklevel=2)

    def observe(
        self,
        prompt: Prompt,
        stats: CacheStats,
        *,
        model: str | None,
        provider: MissProvider,
        cache_key: str | None = None,
        blocks: Sequence[bytes] = (),
        block_size: int | None = None,
        ttl: str | None = None,
        now: float | None = None,
    ) -> CacheMiss | None:
        """Compare a sent request with the previous one of its prompt name; remember it.

        `stats` are the answer's; `cache_key` the `prompt_cache_key` or vLLM
        `cache_salt` it was sent with; `blocks` its vLLM block hashes of
        `block_size` tokens; `ttl` the cache entry's lifetime ("5m", "1h";
        default: the provider's; vLLM entries do not expire). Returns why the
        request read fewer cached tokens than the previous one left, or None
        (nothing missed, the first request of its name, or a prompt with neither a name
        nor a versioned segment: `hit_rate.prompt_identity`).
        """
        name, _ = prompt_identity(prompt)
        if name is None:
            return None
        info = model_info(provider, model) if provider != "vllm" and model else None
        minimum = info.min_cache_tokens if info is not None and info.min_cache_tokens else 1024
        current = request_print(
            prompt,
            model=model,
            cache_key=cache_key,
            blocks=blocks,
            block_size=block_size,
            at=time.monotonic() if now is None else now,
            keep_text=self.keep_text,
        )
        promised = promised_tokens(stats, provider, block_size=block_size, minimum=minimum)
        with self._lock:
            memory = self._memory(name)
            previous, memory.last = memory.last, current.sent(stats, promised)
        if previous is None:
            return None
        if provider == "vllm":
            # a block is the unit cached: a shortfall of one whole block is a block lost
            tolerance, lifetime = max((block_size or 1) - 1, 0), None
        else:
            tolerance = 0 if provider == "anthropic" else _OPENAI_STEP - 1
            lifetime = ttl_seconds(ttl or provider_limits(provider).default_ttl)
        return explain_miss(
            previous,
            current,
            stats,
            tolerance=tolerance,
            ttl_seconds=lifetime,
            pricing=info.pricing if info is not None else None,
        )

    def forget(self, name: str | None = None) -> None:
        """Forget one prompt name (after an intended change), or all of them."""
        with self._lock:
            if name is None:
                self._seen.clear()
            else:
                self._seen.pop(name, None)


default_guard = StaticPrefixGuard()
"""The process-wide default guard (mode "raise")."""
