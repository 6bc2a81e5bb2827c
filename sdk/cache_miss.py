"""Why a request missed the prompt cache, in one provider-neutral form.

A `CacheMiss` comes from one of two places (`source`):

- ``"provider"``: the provider's own diagnostics, asked for on the request
  (Anthropic's `diagnostics.previous_message_id`, OpenAI Responses'
  `prompt_cache_options.comparison_response_id`) and read from the response;
- ``"local"``: prefixkit's comparison of a request with the previous request
  of the same prompt name (`StaticPrefixGuard.observe`), for every provider
  and vLLM.

Both speak `MissReason`. The providers' reasons map onto it as follows:

| provider says | `MissReason` |
|---|---|
| Anthropic `model_changed`, OpenAI `model_changed` | `model` |
| Anthropic `system_changed` | `system` |
| Anthropic `tools_changed`, OpenAI `tools_changed` | `tools` |
| Anthropic `messages_changed`, OpenAI `input_changed` | `messages` |
| OpenAI `context_compacted` | `compacted` |
| OpenAI `prompt_cache_key_changed` | `cache_key` |
| OpenAI `text_format_changed`, `reasoning_effort_changed`, `verbosity_changed`, `service_tier_changed` | `settings` |
| Anthropic `previous_message_not_found`, OpenAI `comparison_response_not_found` | `previous_not_found` |
| Anthropic and OpenAI `unavailable` | `unavailable` |
| Anthropic `cache_miss_reason: null` (comparison still running), no diagnostics on the platform (Bedrock, Vertex), a reason this version does not know | `inconclusive` |

The local comparison adds what only the client can see: `static_text`
(a static segment's text changed), `tools_order` (the same tools in another
order), `session` (a session or dynamic part before the cached end changed),
`ttl_expired` (nothing changed, but the previous request is older than the
cache entry lives) and `replica` (nothing changed and the entry is young: the
request reached another vLLM replica or the provider evicted it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = ["CacheMiss", "MissReason", "MissSource"]

MissSource = Literal["provider", "local"]


class MissReason(StrEnum):
    """Why the cache was not (fully) reused: what changed, or why it cannot be said."""

    MODEL = "model"
    """The model (or Anthropic's `speed`) differs from the previous request's."""
    SYSTEM = "system"
    """The system prompt differs."""
    TOOLS = "tools"
    """Tools were added, removed or changed."""
    TOOLS_ORDER = "tools_order"
    """The same tools, in another order."""
    MESSAGES = "messages"
    """An earlier message or input item differs (not only appended to)."""
    STATIC_TEXT = "static_text"
    """A STATIC or VERSIONED segment's text changed (a value formatted into it)."""
    SESSION = "session"
    """A session or dynamic part before the cached end changed."""
    SETTINGS = "settings"
    """A prompt-affecting setting changed (output format, reasoning effort, verbosity, tier)."""
    CACHE_KEY = "cache_key"
    """The `prompt_cache_key` (or vLLM `cache_salt`) changed."""
    COMPACTED = "compacted"
    """The conversation was compacted."""
    TTL_EXPIRED = "ttl_expired"
    """Nothing changed, but the previous request is older than the cache entry's TTL."""
    REPLICA = "replica"
    """Nothing changed and the entry should live: another replica answered, or it was evicted."""
    PREVIOUS_NOT_FOUND = "previous_not_found"
    """The provider has no record of the request it was asked to compare with."""
    UNAVAILABLE = "unavailable"
    """The provider could not diagnose this request (it was served normally)."""
    INCONCLUSIVE = "inconclusive"
    """No explanation: diagnostics not available on this platform, or not ready yet."""


@dataclass(frozen=True)
class CacheMiss:
    """Why one request read fewer tokens from the cache than expected.

    `reason` is provider-neutral (`MissReason`); `provider_reason` keeps the
    provider's own word when it gave one (``"reasoning_effort_changed"``).
    `missed_tokens` is how many prompt tokens would have been read had the
    prefix matched (the provider's estimate, or the local shortfall), None when
    unknown; `missed_cost_usd` their extra cost where the model is priced (None
    otherwise).
    `segment` names the first segment that changed (its label) and `block` the
    first vLLM block that differs, when known. `detail` is one sentence: what
    changed and how to fix it.
    """

    reason: MissReason
    source: MissSource
    detail: str
    missed_tokens: int | None = None
    segment: str | None = None
    block: int | None = None
    provider_reason: str | None = None
    missed_cost_usd: float | None = None

    @property
    def conclusive(self) -> bool:
        """False when the miss has no explanation (`MissReason.INCONCLUSIVE`)."""
        return self.reason is not MissReason.INCONCLUSIVE

    def __str__(self) -> str:
        return f"cache miss ({self.source}: {self.reason}): {self.detail}"
