"""Provider facts per model: minimum cacheable length, prices, marker support.

The facts live in `sdk/data/models.json` (one place to correct when a provider
changes), each model with the page its facts were read from and the date;
this module only reads them. `known_models()` lists every model the SDK knows. A model is found by its exact id or by
its id plus a snapshot suffix (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`,
`...-latest`); anything else is unknown, and callers warn instead of guessing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from .errors import RenderError

__all__ = [
    "LongPromptPricing",
    "ModelInfo",
    "Pricing",
    "Provider",
    "ProviderLimits",
    "known_models",
    "model_info",
    "provider_limits",
]

Provider = Literal["anthropic", "openai"]
_PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


@dataclass(frozen=True)
class LongPromptPricing:
    """Prices of a request whose prompt is longer than `above_tokens`.

    Some models bill every token of such a request (cache reads and writes
    included, output too) at higher rates; the cache multipliers stay the same.
    """

    above_tokens: int
    input_usd_per_mtok: float
    output_usd_per_mtok: float


@dataclass(frozen=True)
class Pricing:
    """What a model charges for prompt tokens, relative to uncached input.

    `input_usd_per_mtok` / `output_usd_per_mtok` are USD per million tokens
    (None when not known: costs are then reported in input-token units only).
    `cache_read_multiplier` prices a cached token (0.1 = 90% discount);
    `cache_write_multipliers` prices a written token per TTL (Anthropic 5m
    1.25x, 1h 2x); `default_ttl` prices writes whose TTL the usage omits;
    `long_prompt` holds the rates of prompts above a length, when the model
    has them.
    """

    input_usd_per_mtok: float | None
    output_usd_per_mtok: float | None
    cache_read_multiplier: float
    cache_write_multipliers: Mapping[str, float] = field(default_factory=dict)
    default_ttl: str = "5m"
    long_prompt: LongPromptPricing | None = None

    def prices_for(self, prompt_tokens: int) -> tuple[float | None, float | None]:
        """USD per million input and output tokens of a request with this prompt length."""
        long = self.long_prompt
        if long is not None and prompt_tokens > long.above_tokens:
            return long.input_usd_per_mtok, long.output_usd_per_mtok
        return self.input_usd_per_mtok, self.output_usd_per_mtok

    def write_multiplier(self, ttl: str | None = None) -> float:
        """The price multiplier of a token written with `ttl` (default TTL if None)."""
        key = ttl or self.default_ttl
        if key in self.cache_write_multipliers:
            return self.cache_write_multipliers[key]
        return self.cache_write_multipliers.get(self.default_ttl, 1.0)


@dataclass(frozen=True)
class ModelInfo:
    """One model's caching facts (`min_cache_tokens` None means unknown).

    `source` is where the facts were read and `read_on` the date (ISO);
    `price_note` says why a price is missing; `unverified` lists facts seen
    only in secondary sources.
    """

    provider: Provider
    name: str
    min_cache_tokens: int | None
    pricing: Pricing
    explicit_breakpoints: bool = False
    encoding: str | None = None
    unverified: tuple[str, ...] = ()
    source: str | None = None
    read_on: str | None = None
    price_note: str | None = None


@dataclass(frozen=True)
class ProviderLimits:
    """Per-request limits of a provider.

    `lookback_blocks` is Anthropic's read lookback; `api_ttls` lists the TTLs
    each OpenAI API accepts in `prompt_cache_options.ttl` ("chat", "responses").
    """

    max_breakpoints: int
    default_ttl: str
    ttls: tuple[str, ...]
    lookback_blocks: int | None = None
    min_cache_tokens: int | None = None
    api_ttls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("data/models.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _check_provider(provider: str) -> Provider:
    for known in _PROVIDERS:
        if provider == known:
            return known
    raise RenderError(
        f"provider {provider!r} is not one of {', '.join(_PROVIDERS)}", provider=provider
    )


def provider_limits(provider: Provider) -> ProviderLimits:
    """The request-level limits of `provider` from the data table."""
    limits = _table()[_check_provider(provider)]["limits"]
    ttls = limits.get("ttls") or limits.get("responses_ttls") or [limits["default_ttl"]]
    return ProviderLimits(
        max_breakpoints=int(limits["max_breakpoints"]),
        default_ttl=str(limits["default_ttl"]),
        ttls=tuple(str(t) for t in ttls),
        lookback_blocks=limits.get("lookback_blocks"),
        min_cache_tokens=limits.get("min_cache_tokens"),
        api_ttls={
            key.removesuffix("_ttls"): tuple(str(t) for t in value)
            for key, value in limits.items()
            if key.endswith("_ttls")
        },
    )


@functools.cache
def model_info(provider: Provider, model: str) -> ModelInfo | None:
    """The facts for `model` of `provider`, or None if prefixkit does not know it."""
    section = _table()[_check_provider(provider)]
    models: dict[str, Any] = section["models"]
    name = model if model in models else _SNAPSHOT_SUFFIX.sub("", model)
    if name not in models:
        return None
    return _entry(provider, name, {**section["defaults"], **models[name]})


def known_models(provider: Provider | None = None) -> tuple[ModelInfo, ...]:
    """Every model in the data table (of `provider`, or of both), in table order."""
    providers = _PROVIDERS if provider is None else (_check_provider(provider),)
    return tuple(
        info
        for name in providers
        for model in _table()[name]["models"]
        if (info := model_info(name, model)) is not None
    )


def _entry(provider: Provider, name: str, entry: Mapping[str, Any]) -> ModelInfo:
    long = entry.get("long_prompt")
    pricing = Pricing(
        input_usd_per_mtok=entry.get("input_usd_per_mtok"),
        output_usd_per_mtok=entry.get("output_usd_per_mtok"),
        cache_read_multiplier=float(entry["cache_read_multiplier"]),
        cache_write_multipliers={
            str(k): float(v) for k, v in entry["cache_write_multipliers"].items()
        },
        default_ttl=str(_table()[provider]["limits"]["default_ttl"]),
        long_prompt=None
        if long is None
        else LongPromptPricing(
            above_tokens=int(long["above_tokens"]),
            input_usd_per_mtok=float(long["input_usd_per_mtok"]),
            output_usd_per_mtok=float(long["output_usd_per_mtok"]),
        ),
    )
    return ModelInfo(
        provider=provider,
        name=name,
        min_cache_tokens=entry.get("min_cache_tokens"),
        pricing=pricing,
        explicit_breakpoints=bool(entry.get("explicit_breakpoints", False)),
        encoding=entry.get("encoding"),
        unverified=tuple(entry.get("unverified", ())),
        source=entry.get("source"),
        read_on=entry.get("read_on"),
        price_note=entry.get("price_note"),
    )
