"""Does caching a prefix pay? Write premium once, read discount on every reuse.

Without caching, 1 + `reuses` requests pay the prefix at the input price each
time. With caching, the first request writes it (`write` multiplier, e.g.
1.25x for a 5-minute Anthropic entry) and each reuse within the TTL reads it
(`read` multiplier, e.g. 0.1x). Caching pays once
`reuses > (write - 1) / (1 - read)`: one reuse for 5m entries, two for 1h.
A prefix below the model's minimum is never cached (and never charged a
premium), so it cannot pay.

Which TTL (`choose_ttl`): an entry is refreshed by every read, so requests
that reuse a prefix every `reuse_interval` seconds keep an entry alive exactly
when the TTL is at least that interval; otherwise every request writes again
(1.25x or 2x input each time, dearer than not caching at 1x). Among the TTLs
that outlive the interval, the cheapest over 1 + `reuses` requests is
`write + reuses * read` per prefix token, against `1 + reuses` uncached. With
Anthropic's multipliers (5m 1.25x, 1h 2x, read 0.1x):

- reused at least every 5 minutes: 5m (1.25 + 0.1n; 1h would cost 0.75 more
  per cold write for nothing);
- every 5 to 60 minutes: only 1h survives; it pays from 2 reuses
  (2 + 0.1 * 2 = 2.2 < 3), so 1h when `reuses` >= 2, else no marker;
- less often than hourly: every request would write (2x), so no marker, and
  the caller is told.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import RenderError, UsageError
from .model_facts import Pricing, Provider, model_info

__all__ = ["BreakEven", "TTLChoice", "break_even", "choose_ttl"]

# How long each TTL keeps an entry (seconds).
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "30m": 1800.0, "1h": 3600.0, "12h": 43200.0}


@dataclass(frozen=True)
class BreakEven:
    """The verdict for one prefix; costs are in uncached-input-token units.

    `usd_saved` is filled when the price table knows the model's input price.
    `reuses_needed` is the smallest reuse count at which caching pays (None
    when it never can, e.g. below the minimum length).
    """

    pays: bool
    prefix_tokens: int
    reuses: int
    reuses_needed: int | None
    cost_without_cache: float
    cost_with_cache: float
    usd_saved: float | None
    reason: str

    @property
    def saved(self) -> float:
        """Token units saved (negative: caching costs more)."""
        return self.cost_without_cache - self.cost_with_cache

    @property
    def saved_ratio(self) -> float:
        """Share of the prefix cost saved (negative: caching costs more)."""
        return self.saved / self.cost_without_cache if self.cost_without_cache else 0.0


def break_even(
    prefix_tokens: int,
    reuses: int,
    *,
    pricing: Pricing | None = None,
    provider: Provider | None = None,
    model: str | None = None,
    ttl: str | None = None,
    min_cache_tokens: int | None = None,
) -> BreakEven:
    """Whether caching a `prefix_tokens` prefix reused `reuses` times within the TTL pays.

    Give either `pricing` (and optionally `min_cache_tokens`) or `provider` +
    `model` to use the data table. `ttl` picks the write premium ("5m", "1h",
    "30m", "12h"; default: the provider's default TTL).

    >>> break_even(5000, 3, provider="anthropic", model="claude-sonnet-4-5").pays
    True
    """
    if prefix_tokens < 0 or reuses < 0:
        raise UsageError(
            f"prefix_tokens ({prefix_tokens}) and reuses ({reuses}) must be >= 0",
            argument="prefix_tokens" if prefix_tokens < 0 else "reuses",
            value=prefix_tokens if prefix_tokens < 0 else reuses,
        )
    if pricing is None:
        if provider is None or model is None:
            raise RenderError(
                "break_even needs pricing=..., or provider=... and model=...",
                provider=provider,
                model=model,
            )
        info = model_info(provider, model)
        if info is None:
            raise RenderError(
                f"{provider} model {model!r} is not in prefixkit's data table "
                "(sdk/data/models.json): pass pricing=Pricing(...) instead",
                provider=provider,
                model=model,
            )
        pricing = info.pricing
        if min_cache_tokens is None:
            min_cache_tokens = info.min_cache_tokens
    if ttl is not None and ttl not in pricing.cache_write_multipliers:
        raise UsageError(
            f"ttl {ttl!r} has no write price: use one of "
            f"{', '.join(pricing.cache_write_multipliers) or 'the default (ttl=None)'}",
            argument="ttl",
            value=ttl,
        )
    write = pricing.write_multiplier(ttl)
    read = pricing.cache_read_multiplier
    without = float(prefix_tokens * (1 + reuses))
    if min_cache_tokens is not None and prefix_tokens < min_cache_tokens:
        return BreakEven(
            pays=False,
            prefix_tokens=prefix_tokens,
            reuses=reuses,
            reuses_needed=None,
            cost_without_cache=without,
            cost_with_cache=without,
            usd_saved=0.0 if pricing.input_usd_per_mtok is not None else None,
            reason=(
                f"{prefix_tokens} tokens is below the minimum cacheable prefix of "
                f"{min_cache_tokens}: nothing is cached"
            ),
        )
    with_cache = prefix_tokens * (write + reuses * read)
    needed = _reuses_needed(write, read)
    pays = prefix_tokens > 0 and _pays(write, read, reuses)
    usd = (
        (without - with_cache) * pricing.input_usd_per_mtok / 1e6
        if pricing.input_usd_per_mtok is not None
        else None
    )
    if needed is None:
        reason = f"reads cost {read}x input, so no number of reuses recovers a {write}x write"
    else:
        reason = (
            f"write {write}x once, read {read}x per reuse: pays from {needed} reuse(s) "
            f"within the TTL; {reuses} planned"
        )
    return BreakEven(
        pays=pays,
        prefix_tokens=prefix_tokens,
        reuses=reuses,
        reuses_needed=needed,
        cost_without_cache=without,
        cost_with_cache=with_cache,
        usd_saved=usd,
        reason=reason,
    )


def _pays(write: float, read: float, reuses: int) -> bool:
    """Per prefix token: one write and `reuses` reads cost less than 1 + `reuses` inputs."""
    return write + reuses * read < 1 + reuses


def _reuses_needed(write: float, read: float) -> int | None:
    """Smallest n with `_pays(write, read, n)`, or None if no n pays."""
    if read >= 1.0:
        return 0 if _pays(write, read, 0) else None
    # The closed form (write - 1) / (1 - read) can land one off after rounding:
    # settle on the exact comparison `_pays` makes.
    needed = max(0, math.floor((write - 1.0) / (1.0 - read)) + 1)
    while needed > 0 and _pays(write, read, needed - 1):
        needed -= 1
    while not _pays(write, read, needed):
        needed += 1
    return needed


@dataclass(frozen=True)
class TTLChoice:
    """The TTL to mark a prefix with (None: do not mark it) and why.

    `cost_ratio` is the cost of the chosen option over 1 + `reuses`
    requests relative to sending the prefix uncached (1.0 when not cached).
    """

    ttl: str | None
    reuse_interval: float
    reuses: int
    cost_ratio: float
    reason: str


def choose_ttl(
    reuse_interval: float,
    *,
    reuses: int = 10,
    pricing: Pricing | None = None,
    provider: Provider = "anthropic",
    model: str | None = None,
) -> TTLChoice:
    """The cheapest TTL for a prefix reused every `reuse_interval` seconds, `reuses` times.

    Prices come from `pricing`, else the data table's entry for `model`,
    else the provider's multipliers (Anthropic: 5m 1.25x, 1h 2x, read 0.1x).
    Only TTLs the pricing lists are considered. See the module docstring for
    the rule and its arithmetic.

    >>> choose_ttl(60).ttl, choose_ttl(1200).ttl, choose_ttl(7200).ttl
    ('5m', '1h', None)
    """
    if not reuse_interval > 0 or reuses < 0:
        raise UsageError(
            f"reuse_interval ({reuse_interval}) must be > 0 seconds and reuses ({reuses}) >= 0",
            argument="reuses" if reuse_interval > 0 else "reuse_interval",
            value=reuses if reuse_interval > 0 else reuse_interval,
        )
    if pricing is None:
        info = model_info(provider, model) if model is not None else None
        pricing = info.pricing if info is not None else _PROVIDER_PRICING[provider]
    read = pricing.cache_read_multiplier
    uncached = float(1 + reuses)
    options = sorted(
        (
            (write + reuses * read, TTL_SECONDS[ttl], ttl)
            for ttl, write in pricing.cache_write_multipliers.items()
            if ttl in TTL_SECONDS and TTL_SECONDS[ttl] >= reuse_interval
        ),
    )
    minutes = reuse_interval / 60
    if not options:
        longest = max(
            (t for t in pricing.cache_write_multipliers if t in TTL_SECONDS),
            key=TTL_SECONDS.__getitem__,
            default="none",
        )
        return TTLChoice(
            None,
            reuse_interval,
            reuses,
            1.0,
            f"a prefix reused every {minutes:.1f} minutes outlives the longest cache TTL "
            f"({longest}): every request would pay a cache write, dearer than no cache; "
            "prefixkit leaves the static tiers unmarked (the conversation's own breakpoint "
            "still caches within a session)",
        )
    cost, _, ttl = options[0]
    write = pricing.cache_write_multipliers[ttl]
    if cost >= uncached:
        return TTLChoice(
            None,
            reuse_interval,
            reuses,
            1.0,
            f"a {ttl} entry (write {write}x, read {read}x) costs {cost:.2f} over "
            f"{1 + reuses} requests against {uncached:.2f} uncached: not worth marking",
        )
    return TTLChoice(
        ttl,
        reuse_interval,
        reuses,
        cost / uncached,
        f"reused every {minutes:.1f} minutes: {ttl} is the cheapest TTL that outlives the "
        f"interval (write {write}x once, read {read}x per reuse: {cost:.2f} against "
        f"{uncached:.2f} uncached over {1 + reuses} requests)",
    )


_PROVIDER_PRICING: dict[Provider, Pricing] = {
    "anthropic": Pricing(None, None, 0.1, {"5m": 1.25, "1h": 2.0}),
    "openai": Pricing(None, None, 0.1, {"30m": 1.25, "12h": 1.25}),
}
