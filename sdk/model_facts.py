"""Provider facts per model: minimum cacheable length, prices, marker support.

The facts live in `sdk/data/models.json` (one place to correct when a provider
changes), each model with the page its facts were read from and the date;
this module only reads them. `known_models()` lists every model the SDK knows. A model is found by its exact id or by
its id plus a snapshot suffix (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`,
`...-latest`), and an Anthropic model by its Amazon Bedrock id
(`anthropic.claude-sonnet-4-5-20250929-v1:0`, with a region prefix such as
`us.` or `global.`, or an ARN ending in one) or its Google Vertex AI id
(`claude-sonnet-4-5@20250929`); anything else is unknown, and callers warn
instead of guessing.

Prices depend on the service tier a request ran in (`Pricing.tier_multipliers`,
from the table's `service_tiers`): Anthropic's Message Batches and OpenAI's
Batch and Flex cost half, OpenAI's Priority more; a tier priced by commitment
(Anthropic Priority, OpenAI Scale) or unknown has no USD price.
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
# The names the providers give their standard tier (Anthropic "standard", OpenAI
# "default", and "auto" as a request asks for it): standard prices.
STANDARD_TIERS = frozenset({"standard", "default", "auto"})
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")
# Amazon Bedrock: [arn:...:inference-profile/ or foundation-model/][us.|eu.|apac.|global.]
# anthropic.<id>[-<snapshot>]-v<n>[:<n>]; Google Vertex AI: <id>@<snapshot> (or @latest).
_BEDROCK_ID = re.compile(
    r"^(?:arn:[^/]*/)?(?:[a-z]{2,6}\.)?anthropic\.(?P<id>claude-.+?)(?:-v\d+(?::\d+)?)?$"
)
_VERTEX_ID = re.compile(r"^(?P<id>claude-[^@]+)@(?:\d{8}|latest)$")


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
    tier_multipliers: Mapping[str, float | None] = field(default_factory=dict)

    def missed_cost(self, missed_tokens: int, prompt_tokens: int) -> float | None:
        """What `missed_tokens` prompt tokens not read from the cache cost beyond reading
        them from it, in USD, for a request of `prompt_tokens` (None: not priced)."""
        input_usd, _ = self.prices_for(prompt_tokens)
        if input_usd is None:
            return None
        return missed_tokens * input_usd * (1 - self.cache_read_multiplier) / 1e6

    def prices_for(
        self, prompt_tokens: int, service_tier: str | None = None
    ) -> tuple[float | None, float | None]:
        """USD per million input and output tokens of a request with this prompt length,
        run in `service_tier` (the standard tier when None).

        A tier the table prices by commitment, or does not know, has no USD
        price (None, None); the cache multipliers are the same in every tier.
        """
        long = self.long_prompt
        prices: tuple[float | None, float | None] = (
            (long.input_usd_per_mtok, long.output_usd_per_mtok)
            if long is not None and prompt_tokens > long.above_tokens
            else (self.input_usd_per_mtok, self.output_usd_per_mtok)
        )
        if service_tier is None or service_tier in STANDARD_TIERS:
            return prices
        multiplier = self.tier_multipliers.get(service_tier)
        if multiplier is None:
            return None, None
        input_usd, output_usd = prices
        return (
            None if input_usd is None else input_usd * multiplier,
            None if output_usd is None else output_usd * multiplier,
        )

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


@functools.cache
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
    name = _table_name(model, models)
    if name is None:
        return None
    return _entry(provider, name, {**section["defaults"], **models[name]})


def _table_name(model: str, models: Mapping[str, Any]) -> str | None:
    """The table's name for `model`: itself, without a snapshot suffix, or the model
    behind a Bedrock or Vertex AI id."""
    candidates = [model]
    for form in (_BEDROCK_ID, _VERTEX_ID):
        match = form.match(model)
        if match is not None:
            candidates.append(match["id"])
    for candidate in candidates:
        for name in (candidate, _SNAPSHOT_SUFFIX.sub("", candidate)):
            if name in models:
                return name
    return None


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
        tier_multipliers={
            str(tier): None if value is None else float(value)
            for tier, value in (entry.get("service_tiers") or {}).items()
        },
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
