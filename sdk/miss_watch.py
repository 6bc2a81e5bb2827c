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

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .cache_miss import CacheMiss
from .cache_stats import CacheStats
from .hit_rate import HitRateMonitor
from .miss_diagnostics import ANTHROPIC_DIAGNOSIS_BETA, anthropic_miss, no_diagnostics, openai_miss
from .miss_explanation import missed_cost
from .model_facts import model_info
from .prompt import Prompt
from .static_prefix_guard import MissProvider, StaticPrefixGuard

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
        if prompt.name is None:
            return None
        with self._lock:
            return self._last.get(prompt.name)

    def _remember(self, prompt: Prompt, response: Any) -> None:
        ident = getattr(response, "id", None)
        if prompt.name is None or not isinstance(ident, str):
            return
        with self._lock:
            self._last[prompt.name] = ident
            self._last.move_to_end(prompt.name)
            while len(self._last) > self.size:
                self._last.popitem(last=False)

    def anthropic_options(
        self, prompt: Prompt, options: dict[str, Any], client: Any
    ) -> dict[str, Any]:
        """`options` asking for Anthropic's diagnostics (when on, and offered)."""
        if not self.diagnostics or "diagnostics" in options or anthropic_platform(client):
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
            )
        miss = told if told is not None and told.conclusive else (local or told)
        if miss is told and told is not None:
            miss = self._priced(told, stats, provider, model)
            if local is not None and told.segment is None:
                # the provider says why; the local comparison says where
                miss = replace(miss, segment=local.segment, block=local.block)
        if miss is not None:
            stats = replace(stats, miss=miss)
        if self.monitor is not None and prompt.name is not None:
            self.monitor.record(prompt, stats)
        return stats

    @staticmethod
    def _priced(
        told: CacheMiss, stats: CacheStats, provider: MissProvider, model: str | None
    ) -> CacheMiss:
        """A provider's explanation with the cost of the tokens it says were missed."""
        info = model_info(provider, model) if model is not None else None
        if told.missed_tokens is None or info is None:
            return told
        return replace(told, missed_cost_usd=missed_cost(told.missed_tokens, stats, info.pricing))

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
