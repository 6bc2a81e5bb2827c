"""Cache statistics from any provider's usage: hits, writes, cost and savings.

`CacheStats.from_usage` reads the usage object (or its dict) of every
supported API and splits the prompt into three disjoint token counts:

| provider | cached (read) | written | uncached |
|---|---|---|---|
| Anthropic Messages | `cache_read_input_tokens` | `cache_creation_input_tokens` (per TTL in `cache_creation.ephemeral_5m/1h_input_tokens`) | `input_tokens` (Anthropic excludes cache tokens from it) |
| OpenAI Chat, vLLM | `prompt_tokens_details.cached_tokens` | `prompt_tokens_details.cache_write_tokens` | `prompt_tokens` minus both (OpenAI includes them) |
| OpenAI Responses | `input_tokens_details.cached_tokens` | `input_tokens_details.cache_write_tokens` (per TTL in `cache_write_tokens_details`) | `input_tokens` minus both |

Stats add up (`a + b`, `CacheStats.total(many)`) for reports over many requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .model_facts import Pricing, Provider, model_info, provider_limits

__all__ = ["CacheStats", "UsageShape"]

UsageShape = Literal["anthropic", "openai_chat", "openai_responses"]


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
    return int(value) if isinstance(value, (int, float)) else 0


def _shape(usage: Mapping[str, Any]) -> UsageShape:
    if "prompt_tokens" in usage:
        return "openai_chat"
    if "input_tokens_details" in usage or "total_tokens" in usage:
        return "openai_responses"
    if "input_tokens" in usage:
        return "anthropic"
    raise ValueError(
        f"unrecognised usage with keys {sorted(usage)}: expected Anthropic "
        "(input_tokens, cache_read_input_tokens), OpenAI chat (prompt_tokens) or "
        "Responses (input_tokens_details)"
    )


def _provider(shape: UsageShape) -> Provider:
    return "anthropic" if shape == "anthropic" else "openai"


@dataclass(frozen=True)
class CacheStats:
    """Prompt-cache outcome of one request, or the sum over many.

    `cached_tokens` were read from the cache, `written_tokens` were written to
    it (`written_by_ttl` splits them by TTL when the provider says), and
    `uncached_tokens` were neither. Costs are None when no price is known;
    `prompt_cost_units` is the prompt's cost in uncached-input-token units, so
    savings are known whenever the multipliers are, even without USD prices.
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

    @classmethod
    def from_usage(
        cls,
        usage: Any,
        *,
        model: str | None = None,
        pricing: Pricing | None = None,
        shape: UsageShape | None = None,
    ) -> CacheStats:
        """Parse a usage object or dict of any supported provider.

        Prices come from `pricing`, else from the data table entry of `model`
        (no prices for self-hosted vLLM: leave both None). `shape` overrides
        the detection of which API the usage came from.
        """
        data = _as_dict(usage)
        kind = shape or _shape(data)
        written_by_ttl: dict[str, int] = {}
        if kind == "anthropic":
            cached = _int(data.get("cache_read_input_tokens"))
            written = _int(data.get("cache_creation_input_tokens"))
            uncached = _int(data.get("input_tokens"))
            creation = data.get("cache_creation")
            if isinstance(creation, Mapping):
                for ttl in ("5m", "1h"):
                    count = _int(creation.get(f"ephemeral_{ttl}_input_tokens"))
                    if count:
                        written_by_ttl[ttl] = count
            output = _int(data.get("output_tokens"))
        else:
            total_key, details_key, output_key = (
                ("prompt_tokens", "prompt_tokens_details", "completion_tokens")
                if kind == "openai_chat"
                else ("input_tokens", "input_tokens_details", "output_tokens")
            )
            details = data.get(details_key)
            details = details if isinstance(details, Mapping) else {}
            cached = _int(details.get("cached_tokens"))
            written = _int(details.get("cache_write_tokens"))
            uncached = max(_int(data.get(total_key)) - cached - written, 0)
            ttl_details = details.get("cache_write_tokens_details")
            if isinstance(ttl_details, Mapping):
                for ttl in ("30m", "12h"):
                    count = _int(ttl_details.get(f"ttl_{ttl}_tokens"))
                    if count:
                        written_by_ttl[ttl] = count
            output = _int(data.get(output_key))
        if written and not written_by_ttl:
            # The usage does not say which TTL: the provider's default applies.
            written_by_ttl[provider_limits(_provider(kind)).default_ttl] = written
        if pricing is None and model is not None:
            info = model_info(_provider(kind), model)
            pricing = info.pricing if info is not None else None
        return cls._priced(cached, written, uncached, output, written_by_ttl, pricing)

    @classmethod
    def _priced(
        cls,
        cached: int,
        written: int,
        uncached: int,
        output: int,
        written_by_ttl: Mapping[str, int],
        pricing: Pricing | None,
    ) -> CacheStats:
        units = cost = cost_without = None
        if pricing is not None:
            units = uncached + cached * pricing.cache_read_multiplier
            units += sum(
                count * pricing.write_multiplier(ttl) for ttl, count in written_by_ttl.items()
            )
            if pricing.input_usd_per_mtok is not None and pricing.output_usd_per_mtok is not None:
                output_usd = output * pricing.output_usd_per_mtok / 1e6
                cost = units * pricing.input_usd_per_mtok / 1e6 + output_usd
                cost_without = (
                    cached + written + uncached
                ) * pricing.input_usd_per_mtok / 1e6 + output_usd
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
    def hit_ratio(self) -> float:
        """Share of prompt tokens read from the cache (0.0 for an empty prompt)."""
        total = self.input_tokens
        return self.cached_tokens / total if total else 0.0

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
        text = (
            f"{self.requests} request(s): {self.input_tokens} prompt tokens, "
            f"{self.cached_tokens} cached, {self.written_tokens} written"
            f"{f' ({ttl})' if ttl else ''}, {self.uncached_tokens} uncached, "
            f"hit ratio {self.hit_ratio:.1%}"
        )
        if self.prompt_savings_ratio is not None:
            text += f", prompt cost {1 - self.prompt_savings_ratio:.1%} of uncached"
        if self.cost_usd is not None and self.savings_usd is not None:
            text += (
                f", USD {self.cost_usd:.6f} vs {self.cost_without_cache_usd:.6f} uncached "
                f"(saved {self.savings_usd:+.6f})"
            )
        return text


def _sum_known(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
