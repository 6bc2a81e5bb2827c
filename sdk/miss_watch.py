"""What an SDK client does about misses: ask for diagnostics, explain, monitor.

Each client holds one `MissWatch` built from its options:

- `diagnostics=True`: ask the provider to compare each request with the
  previous one of the same prompt name (Anthropic `diagnostics`, with the beta
  header; OpenAI Responses `prompt_cache_options.comparison_response_id`).
  Off by default: Anthropic keeps a fingerprint of every request that asks.
  Anthropic on Bedrock or Vertex offers none: nothing is sent there, and a
  request that read nothing from the cache gets an inconclusive miss.
- `guard=StaticPrefixGuard(...)`: the local explanation (`StaticPrefixGuard.observe`),
  for every provider and vLLM.
- `monitor=HitRateMonitor(...)`: each named prompt's answer is recorded.

`CacheStats.miss` is the provider's explanation when it names a cause, else
the local one (whose segment and block complete the provider's), else the
provider's inconclusive one. Diagnostics the caller
passed themselves (``diagnostics=...``, ``comparison_response_id=...``) are sent
as given and read back the same way.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .cache_miss import CacheMiss, MissReason
from .cache_stats import CacheStats
from .hit_rate import HitRateMonitor, prompt_identity
from .miss_diagnostics import ANTHROPIC_DIAGNOSIS_BETA, anthropic_miss, no_diagnostics, openai_miss
from .model_facts import model_info
from .prompt import Prompt
from .static_prefix_guard import MissProvider, StaticPrefixGuard, ttl_seconds

__all__ = ["MissWatch", "anthropic_platform"]


def anthropic_platform(client: Any) -> str | None:
    """ "Amazon Bedrock" or "Vertex AI" for those clients (no cache diagnostics), else None."""
    kind = type(client).__name__
    if "Bedrock" in kind:
        return "Amazon Bedrock"
    if "Vertex" in kind:
        return "Vertex AI"
    return None


def _with_beta(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with the diagnosis beta: in `betas` for the beta API, else a header."""
    betas = options.get("betas")
    if betas:
        if ANTHROPIC_DIAGNOSIS_BETA not in betas:
            options["betas"] = [*betas, ANTHROPIC_DIAGNOSIS_BETA]
        return options
    headers = dict(options.get("extra_headers") or {})
    present = [b.strip() for b in str(headers.get("anthropic-beta", "")).split(",") if b.strip()]
    if ANTHROPIC_DIAGNOSIS_BETA not in present:
        headers["anthropic-beta"] = ",".join([*present, ANTHROPIC_DIAGNOSIS_BETA])
    options["extra_headers"] = headers
    return options


def _cache_key(request: Mapping[str, Any]) -> str | None:
    key = request.get("prompt_cache_key")
    if isinstance(key, str):
        return key
    extra = request.get("extra_body")
    salt = extra.get("cache_salt") if isinstance(extra, Mapping) else request.get("cache_salt")
    return salt if isinstance(salt, str) else None


def _ttls(value: Any) -> Iterator[str]:
    """Every cache lifetime a request body sets: Anthropic's ``cache_control`` (5m unless
    it says), OpenAI's ``prompt_cache_breakpoint`` and ``prompt_cache_options`` ``ttl``, and
    ``prompt_cache_retention: "24h"``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "cache_control" and isinstance(item, Mapping):
                yield str(item.get("ttl") or "5m")
            elif key in ("prompt_cache_breakpoint", "prompt_cache_options") and isinstance(
                item, Mapping
            ):
                if isinstance(item.get("ttl"), str):
                    yield item["ttl"]
            elif key == "prompt_cache_retention" and item == "24h":
                yield "24h"
            else:
                yield from _ttls(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _ttls(item)


def sent_ttl(request: Mapping[str, Any]) -> str | None:
    """The longest cache lifetime `request` asks for ("5m", "1h", "30m", ...), None when it
    sets none (the provider's default then)."""
    lifetimes = [ttl for ttl in _ttls(request) if re.fullmatch(r"\d+(\.\d+)?[smh]", ttl)]
    return max(lifetimes, key=ttl_seconds, default=None)


class MissWatch:
    """A client's diagnostics option, guard and monitor, and the last response id per prompt."""

    def __init__(
        self,
        *,
        diagnostics: bool = False,
        guard: StaticPrefixGuard | None = None,
        monitor: HitRateMonitor | None = None,
        size: int = 4096,
    ) -> None:
        self.diagnostics = diagnostics
        self.guard = guard
        self.monitor = monitor
        self.size = size
        self._last: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def _previous(self, prompt: Prompt) -> str | None:
        name, _ = prompt_identity(prompt)
        if name is None:
            return None
        with self._lock:
            return self._last.get(name)

    def _remember(self, prompt: Prompt, response: Any) -> None:
        ident = getattr(response, "id", None)
        name, _ = prompt_identity(prompt)
        if name is None or not isinstance(ident, str):
            return
        with self._lock:
            self._last[name] = ident
            self._last.move_to_end(name)
            while len(self._last) > self.size:
                self._last.popitem(last=False)

    def anthropic_options(
        self, prompt: Prompt, options: dict[str, Any], client: Any
    ) -> dict[str, Any]:
        """`options` asking for Anthropic's diagnostics (when on, and offered)."""
        unnamed = prompt_identity(prompt)[0] is None  # nothing to compare it with, ever
        if not self.diagnostics or unnamed or "diagnostics" in options:
            return options
        if anthropic_platform(client):
            return options
        asked = {**options, "diagnostics": {"previous_message_id": self._previous(prompt)}}
        return _with_beta(asked)

    def responses_options(
        self, prompt: Prompt, model: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        """`options` naming the response to compare with (when on, there is one, and the
        model takes `prompt_cache_options`: GPT-5.6 and later)."""
        if not self.diagnostics or options.get("comparison_response_id") is not None:
            return options
        info = model_info("openai", model)
        if info is None or not info.explicit_breakpoints:
            return options
        previous = self._previous(prompt) or options.get("previous_response_id")
        return options if previous is None else {**options, "comparison_response_id": previous}

    def finish(
        self,
        prompt: Prompt,
        stats: CacheStats,
        *,
        model: str | None,
        provider: MissProvider,
        response: Any,
        request: Mapping[str, Any],
        client: Any = None,
        blocks: Sequence[bytes] = (),
        block_size: int | None = None,
    ) -> CacheStats:
        """`stats` with the miss explained; the response remembered; the monitor fed."""
        told = self._provider_miss(prompt, stats, provider, response, request, client)
        self._remember(prompt, response)
        local = None
        if self.guard is not None:
            local = self.guard.observe(
                prompt,
                stats,
                model=model,
                provider=provider,
                cache_key=_cache_key(request),
                blocks=blocks,
                block_size=block_size,
                ttl=sent_ttl(request),
            )
        if self.guard is not None and local is None:
            told = None  # the guard saw the request read all the cache could give it
        elif told is not None and told.reason is MissReason.CACHE_KEY and local is not None:
            told = None  # the key prefixkit derives changed with the segment the guard names
        miss = told if told is not None and told.conclusive else (local or told)
        if miss is told and told is not None:
            miss = self._priced(told, stats, provider, model)
            if local is not None and told.segment is None:
                # the provider says why; the local comparison says where
                miss = replace(miss, segment=local.segment, block=local.block)
        if miss is not None:
            stats = replace(stats, miss=miss)
        if self.monitor is not None and prompt_identity(prompt)[0] is not None:
            self.monitor.record(prompt, stats)
        return stats

    @staticmethod
    def _priced(
        told: CacheMiss, stats: CacheStats, provider: MissProvider, model: str | None
    ) -> CacheMiss:
        """A provider's explanation with the cost of the tokens it says were missed."""
        info = model_info(provider, model) if model is not None else None
        if told.missed_tokens is None or info is None or info.pricing is None:
            return told
        cost = info.pricing.missed_cost(told.missed_tokens, stats.input_tokens)
        return replace(told, missed_cost_usd=cost)

    def _provider_miss(
        self,
        prompt: Prompt,
        stats: CacheStats,
        provider: MissProvider,
        response: Any,
        request: Mapping[str, Any],
        client: Any,
    ) -> CacheMiss | None:
        missed_all = stats.reported and stats.cached_tokens == 0 and stats.input_tokens > 0
        # asked, with an earlier request to compare with, and nothing came back
        unanswered = self.diagnostics and missed_all and self._previous(prompt) is not None
        if provider == "anthropic":
            platform = anthropic_platform(client)
            if platform is not None:
                return no_diagnostics(platform) if unanswered else None
            told = anthropic_miss(response)
            asked = "diagnostics" in request
            return told or (no_diagnostics("Anthropic") if unanswered and not asked else None)
        if provider != "openai":
            return None
        told = openai_miss(response)
        if told is not None:
            return told
        answered = getattr(response, "prompt_cache_diagnostics", None) is not None
        if unanswered and not answered:
            api = "Responses" if "input" in request else "Chat Completions"
            return no_diagnostics(f"OpenAI {api} ({request.get('model')})")
        return None
