"""Cache statistics from any provider's usage: hits, writes, cost and savings.

`CacheStats.from_usage` reads the usage object (or its dict) of every
supported API and splits the prompt into three disjoint token counts. The API
is recognised by the cache fields the usage carries, never by incidental ones
(gateways such as LiteLLM add `total_tokens` and `prompt_tokens` to Anthropic
usage and keep Anthropic's cache fields):

| usage carries | read as | cached (read) | written | uncached |
|---|---|---|---|---|
| `cache_read_input_tokens`, `cache_creation_input_tokens` or `cache_creation` | Anthropic Messages | `cache_read_input_tokens` | `cache_creation_input_tokens` (per TTL in `cache_creation.ephemeral_5m/1h_input_tokens`) | `input_tokens` (Anthropic excludes cache tokens from it); without it, `prompt_tokens` minus both (gateways that convert to OpenAI's shape include them) |
| `input_tokens_details` | OpenAI Responses | `input_tokens_details.cached_tokens` | `input_tokens_details.cache_write_tokens` (per TTL in `cache_write_tokens_details`) | `input_tokens` minus both |
| `prompt_tokens` | OpenAI Chat / Completions, vLLM, OpenRouter | `prompt_tokens_details.cached_tokens` | `prompt_tokens_details.cache_write_tokens` | `prompt_tokens` minus both |
| only `input_tokens` | Anthropic, or Responses when `model` is an OpenAI model | none reported | none reported | `input_tokens` |

A usage without its API's cache counter (vLLM started without
`--enable-prompt-tokens-details` sends `prompt_tokens_details: null`) is *not
reported*, which is not the same as 0 hits: `hit_ratio` is None,
`reported` is False and `not_reported` names the fix.

Stats add up (`a + b`, `CacheStats.total(many)`) for reports over many requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .cache_miss import CacheMiss
from .errors import UsageError
from .miss_diagnostics import anthropic_miss, openai_miss
from .model_facts import ModelInfo, Pricing, Provider, model_info, provider_limits

__all__ = ["CacheStats", "UsageShape"]

UsageShape = Literal["anthropic", "openai_chat", "openai_responses"]

_ANTHROPIC_CACHE_FIELDS = (
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cache_creation",
)

NOT_REPORTED: Mapping[UsageShape, str] = {
    "anthropic": (
        "the usage has no cache_read_input_tokens / cache_creation_input_tokens: the Messages "
        "API always sends them, so a gateway or an Anthropic-compatible server dropped them; "
        "read the provider's own usage"
    ),
    "openai_chat": (
        "the usage has no prompt_tokens_details.cached_tokens: a vLLM server reports cache "
        "hits only when started with --enable-prompt-tokens-details (prefixkit serve starts "
        "it so); OpenAI always sends them, so a gateway dropped them"
    ),
    "openai_responses": (
        "the usage has no input_tokens_details.cached_tokens: OpenAI's Responses API always "
        "sends them, so a gateway or compatible server dropped them"
    ),
}
"""Why a usage of each shape carries no cache counters, and what to do about it."""


def _as_dict(usage: Any) -> dict[str, Any]:
    if isinstance(usage, Mapping):
        return dict(usage)
    dump = getattr(usage, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, dict):
            return dumped
    raise TypeError(
        f"usage must be a provider usage object or a dict, got {type(usage).__name__}: "
        "pass response.usage"
    )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _details(usage: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = usage.get(key)
    return value if isinstance(value, Mapping) else {}


def _known_model(model: str | None) -> ModelInfo | None:
    if model is None:
        return None
    return model_info("anthropic", model) or model_info("openai", model)


def _shape(usage: Mapping[str, Any], model: str | None) -> UsageShape:
    if any(usage.get(key) is not None for key in _ANTHROPIC_CACHE_FIELDS):
        return "anthropic"
    if isinstance(usage.get("input_tokens_details"), Mapping):
        return "openai_responses"
    if usage.get("prompt_tokens") is not None:
        return "openai_chat"
    if usage.get("input_tokens") is not None:
        # No cache field at all: the split is the same either way; the model says whose price.
        info = _known_model(model)
        return "openai_responses" if info is not None and info.provider == "openai" else "anthropic"
    if usage.get("output_tokens") is not None:
        raise UsageError(
            f"usage with keys {sorted(usage)} has output tokens but no prompt tokens: it is "
            "a streaming delta (Anthropic message_delta); pass the final message's usage "
            "(stream.get_final_message().usage)",
            argument="usage",
            value=usage,
        )
    raise UsageError(
        f"unrecognised usage with keys {sorted(usage)}: expected Anthropic "
        "(input_tokens, cache_read_input_tokens), OpenAI chat (prompt_tokens) or "
        "Responses (input_tokens_details)",
        argument="usage",
        value=usage,
    )


def _provider(shape: UsageShape) -> Provider:
    return "anthropic" if shape == "anthropic" else "openai"


@dataclass(frozen=True)
class _Split:
    cached: int
    written: int
    uncached: int
    output: int
    written_by_ttl: dict[str, int]
    reported: bool


def _anthropic(usage: Mapping[str, Any]) -> _Split:
    read = usage.get("cache_read_input_tokens")
    created = usage.get("cache_creation_input_tokens")
    creation = _details(usage, "cache_creation")
    written_by_ttl = {
        ttl: count
        for ttl in ("5m", "1h")
        if (count := _int(creation.get(f"ephemeral_{ttl}_input_tokens")))
    }
    cached = (
        _int(read)
        if read is not None
        else _int(_details(usage, "prompt_tokens_details").get("cached_tokens"))
    )
    written = _int(created) if created is not None else sum(written_by_ttl.values())
    if usage.get("input_tokens") is not None:
        uncached = _int(usage.get("input_tokens"))
    else:
        uncached = max(_int(usage.get("prompt_tokens")) - cached - written, 0)
    output_key = "output_tokens" if usage.get("output_tokens") is not None else "completion_tokens"
    reported = read is not None or created is not None
    return _Split(cached, written, uncached, _int(usage.get(output_key)), written_by_ttl, reported)


def _openai(usage: Mapping[str, Any], shape: UsageShape) -> _Split:
    total_key, details_key, output_key = (
        ("prompt_tokens", "prompt_tokens_details", "completion_tokens")
        if shape == "openai_chat"
        else ("input_tokens", "input_tokens_details", "output_tokens")
    )
    details = _details(usage, details_key)
    cached = _int(details.get("cached_tokens"))
    written = _int(details.get("cache_write_tokens"))
    ttl_details = _details(details, "cache_write_tokens_details")
    written_by_ttl = {
        ttl: count
        for ttl in ("30m", "12h")
        if (count := _int(ttl_details.get(f"ttl_{ttl}_tokens")))
    }
    uncached = max(_int(usage.get(total_key)) - cached - written, 0)
    reported = details.get("cached_tokens") is not None
    return _Split(cached, written, uncached, _int(usage.get(output_key)), written_by_ttl, reported)


@dataclass(frozen=True)
class CacheStats:
    """Prompt-cache outcome of one request, or the sum over many.

    `cached_tokens` were read from the cache, `written_tokens` were written to
    it (`written_by_ttl` splits them by TTL when the provider says), and
    `uncached_tokens` were neither. Costs are None when no price is known;
    `prompt_cost_units` is the prompt's cost in uncached-input-token units, so
    savings are known whenever the multipliers are, even without USD prices.

    `unreported_requests` counts requests whose usage carried no cache
    counters (their `unreported_tokens` prompt tokens are in `uncached_tokens`
    but not in `hit_ratio`); `not_reported` says why and how to fix it.

    `miss` says why one request missed (a `CacheMiss` from the provider's
    diagnostics or prefixkit's local comparison); None when nothing was
    missed or nobody asked, and always None on a sum (a sum has no single reason).
    """

    cached_tokens: int = 0
    written_tokens: int = 0
    uncached_tokens: int = 0
    output_tokens: int = 0
    written_by_ttl: Mapping[str, int] = field(default_factory=dict)
    requests: int = 1
    prompt_cost_units: float | None = None
    cost_usd: float | None = None
    cost_without_cache_usd: float | None = None
    unreported_requests: int = 0
    unreported_tokens: int = 0
    not_reported: str | None = None
    miss: CacheMiss | None = None

    @classmethod
    def from_usage(
        cls,
        usage: Any,
        *,
        model: str | None = None,
        pricing: Pricing | None = None,
        shape: UsageShape | None = None,
        service_tier: str | None = None,
    ) -> CacheStats:
        """Parse a usage object or dict of any supported provider.

        Prices come from `pricing`, else from the data table entry of `model`
        (no prices for self-hosted vLLM: leave both None). `shape` overrides
        the detection of which API the usage came from.

        Prices are those of the request's service tier: `service_tier`, else
        the one the usage names (Anthropic's `usage.service_tier`), else the
        one of the whole response when a response is passed instead of its
        usage (OpenAI's `completion.service_tier`). Pass `service_tier="batch"`
        for a Batch API result. A tier priced by commitment or unknown to the
        table (Anthropic Priority, OpenAI Scale) leaves the USD costs None.

        A whole response that carries the provider's cache diagnostics
        (Anthropic `diagnostics`, OpenAI Responses `prompt_cache_diagnostics`)
        gives `miss`.
        """
        data = _as_dict(usage)
        nested = data.get("usage")
        miss = None
        if isinstance(nested, Mapping) and not any(
            key in data for key in ("input_tokens", "prompt_tokens", "output_tokens")
        ):
            # a whole response (message, completion, Response): its usage, its tier, and
            # the provider's cache diagnostics when it carries them
            miss = anthropic_miss(data) or openai_miss(data)
            tier = data.get("service_tier")
            data = dict(nested)
            if tier is not None and data.get("service_tier") is None:
                data["service_tier"] = tier
        if service_tier is None and isinstance(data.get("service_tier"), str):
            service_tier = data["service_tier"]
        kind = shape or _shape(data, model)
        split = _anthropic(data) if kind == "anthropic" else _openai(data, kind)
        written_by_ttl = dict(split.written_by_ttl)
        if split.written and not written_by_ttl:
            # The usage does not say which TTL: the provider's default applies.
            written_by_ttl[provider_limits(_provider(kind)).default_ttl] = split.written
        if pricing is None and model is not None:
            info = model_info(_provider(kind), model) or _known_model(model)
            pricing = info.pricing if info is not None else None
        stats = cls._priced(split, written_by_ttl, pricing, service_tier)
        if miss is not None:
            if miss.missed_tokens is not None and pricing is not None:
                miss = replace(
                    miss,
                    missed_cost_usd=pricing.missed_cost(miss.missed_tokens, stats.input_tokens),
                )
            stats = replace(stats, miss=miss)
        if split.reported:
            return stats
        return replace(
            stats,
            unreported_requests=1,
            unreported_tokens=stats.input_tokens,
            not_reported=NOT_REPORTED[kind],
        )

    @classmethod
    def _priced(
        cls,
        split: _Split,
        written_by_ttl: Mapping[str, int],
        pricing: Pricing | None,
        service_tier: str | None = None,
    ) -> CacheStats:
        cached, written, uncached, output = (
            split.cached,
            split.written,
            split.uncached,
            split.output,
        )
        units = cost = cost_without = None
        if pricing is not None:
            prompt = cached + written + uncached
            units = uncached + cached * pricing.cache_read_multiplier
            units += sum(
                count * pricing.write_multiplier(ttl) for ttl, count in written_by_ttl.items()
            )
            input_usd, output_usd_per_mtok = pricing.prices_for(prompt, service_tier)
            if input_usd is not None and output_usd_per_mtok is not None:
                output_usd = output * output_usd_per_mtok / 1e6
                cost = units * input_usd / 1e6 + output_usd
                cost_without = prompt * input_usd / 1e6 + output_usd
        return cls(
            cached_tokens=cached,
            written_tokens=written,
            uncached_tokens=uncached,
            output_tokens=output,
            written_by_ttl=dict(written_by_ttl),
            prompt_cost_units=units,
            cost_usd=cost,
            cost_without_cache_usd=cost_without,
        )

    @property
    def input_tokens(self) -> int:
        """All prompt tokens: cached + written + uncached."""
        return self.cached_tokens + self.written_tokens + self.uncached_tokens

    @property
    def reported(self) -> bool:
        """True when every request's usage carried its API's cache counters."""
        return self.unreported_requests == 0

    @property
    def hit_ratio(self) -> float | None:
        """Share of prompt tokens read from the cache, over requests that reported it.

        None when no request reported cache counters (unknown, not 0 hits: see
        `not_reported`); 0.0 for an empty prompt.
        """
        total = self.input_tokens - self.unreported_tokens
        if total > 0:
            return self.cached_tokens / total
        return None if self.unreported_requests else 0.0

    @property
    def savings_usd(self) -> float | None:
        """Money saved versus the same requests without caching (negative: lost)."""
        if self.cost_usd is None or self.cost_without_cache_usd is None:
            return None
        return self.cost_without_cache_usd - self.cost_usd

    @property
    def prompt_savings_ratio(self) -> float | None:
        """Share of the prompt's cost saved by caching (negative when writes cost more)."""
        if self.prompt_cost_units is None or not self.input_tokens:
            return None
        return 1.0 - self.prompt_cost_units / self.input_tokens

    def __add__(self, other: CacheStats) -> CacheStats:
        if not isinstance(other, CacheStats):
            return NotImplemented
        by_ttl = dict(self.written_by_ttl)
        for ttl, count in other.written_by_ttl.items():
            by_ttl[ttl] = by_ttl.get(ttl, 0) + count
        return CacheStats(
            cached_tokens=self.cached_tokens + other.cached_tokens,
            written_tokens=self.written_tokens + other.written_tokens,
            uncached_tokens=self.uncached_tokens + other.uncached_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            written_by_ttl=by_ttl,
            requests=self.requests + other.requests,
            prompt_cost_units=_sum_known(self.prompt_cost_units, other.prompt_cost_units),
            cost_usd=_sum_known(self.cost_usd, other.cost_usd),
            cost_without_cache_usd=_sum_known(
                self.cost_without_cache_usd, other.cost_without_cache_usd
            ),
            unreported_requests=self.unreported_requests + other.unreported_requests,
            unreported_tokens=self.unreported_tokens + other.unreported_tokens,
            not_reported=self.not_reported or other.not_reported,
        )

    @classmethod
    def total(cls, stats: Iterable[CacheStats]) -> CacheStats:
        """The sum of many requests' stats (zero requests gives an empty total)."""
        result = cls(requests=0, prompt_cost_units=0.0, cost_usd=0.0, cost_without_cache_usd=0.0)
        for item in stats:
            result = result + item
        return result

    def summary(self) -> str:
        """One line for logs: tokens, hit ratio and, when known, savings."""
        ttl = ", ".join(f"{k}: {v}" for k, v in sorted(self.written_by_ttl.items()))
        ratio = self.hit_ratio
        text = (
            f"{self.requests} request(s): {self.input_tokens} prompt tokens, "
            f"{self.cached_tokens} cached, {self.written_tokens} written"
            f"{f' ({ttl})' if ttl else ''}, {self.uncached_tokens} uncached, "
            f"hit ratio {'not reported' if ratio is None else f'{ratio:.1%}'}"
        )
        if self.unreported_requests:
            text += (
                f" ({self.unreported_requests} request(s) without cache counters: "
                f"{self.not_reported})"
            )
        if self.prompt_savings_ratio is not None:
            text += f", prompt cost {1 - self.prompt_savings_ratio:.1%} of uncached"
        if self.cost_usd is not None and self.savings_usd is not None:
            text += (
                f", USD {self.cost_usd:.6f} vs {self.cost_without_cache_usd:.6f} uncached "
                f"(saved {self.savings_usd:+.6f})"
            )
        if self.miss is not None:
            text += f"; {self.miss}"
        return text


def _sum_known(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
