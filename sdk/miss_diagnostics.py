"""The providers' cache diagnostics: how to ask for them, and their answers as a `CacheMiss`.

Anthropic (Claude API only, not Bedrock or Vertex): a request with
``diagnostics={"previous_message_id": id}`` (``None`` on the first turn: it opts
in) and the beta header ``cache-diagnosis-2026-04-07`` is compared with the
request that produced message `id`; the message carries
``diagnostics.cache_miss_reason`` ``{"type": "tools_changed",
"cache_missed_input_tokens": 4096}`` at the first divergence, ``diagnostics:
null`` when nothing diverged, and ``cache_miss_reason: null`` while the
comparison is still running.

OpenAI Responses (gpt-5.6 and later): ``prompt_cache_options.comparison_response_id``
names the response to compare with; the response carries
``prompt_cache_diagnostics``: ``{"type": "cache_miss", "reason": "tools_changed",
"cache_missed_tokens": 4096, "comparison_reusable_tokens": 5000}``, or
``cache_hit``, ``comparison_response_not_found``, ``unavailable``.

Both are read from the SDK's objects or plain dicts (a field the installed SDK
does not type is read from its `model_extra`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cache_miss import CacheMiss, MissReason

__all__ = [
    "ANTHROPIC_DIAGNOSIS_BETA",
    "anthropic_miss",
    "no_diagnostics",
    "openai_miss",
]

ANTHROPIC_DIAGNOSIS_BETA = "cache-diagnosis-2026-04-07"
"""The beta header value that turns Anthropic's cache diagnostics on."""

# provider reason -> (neutral reason, what changed and how to fix it)
_ANTHROPIC: Mapping[str, tuple[MissReason, str]] = {
    "model_changed": (
        MissReason.MODEL,
        "the model (or speed) differs from the previous request's: each model has its own "
        "cache; keep one model per conversation",
    ),
    "system_changed": (
        MissReason.SYSTEM,
        "the system prompt differs from the previous request's: keep volatile values "
        "(dates, ids, names) out of it and put them after the cached prefix",
    ),
    "tools_changed": (
        MissReason.TOOLS,
        "the tools differ from the previous request's (added, removed, changed or "
        "reordered): send the same tool list in a stable order",
    ),
    "messages_changed": (
        MissReason.MESSAGES,
        "an earlier message differs from the previous request's: append to the history, "
        "never rewrite it (whitespace, block lists, summaries)",
    ),
    "previous_message_not_found": (
        MissReason.PREVIOUS_NOT_FOUND,
        "Anthropic keeps no record of the previous message (too old, another workspace, or "
        "sent without diagnostics): nothing is known about this request",
    ),
    "unavailable": (
        MissReason.UNAVAILABLE,
        "Anthropic could not diagnose this request (a parameter such as thinking or "
        "tool_choice may differ): compare the two requests with `prefixkit explain`",
    ),
}

_OPENAI: Mapping[str, tuple[MissReason, str]] = {
    "model_changed": _ANTHROPIC["model_changed"],
    "tools_changed": _ANTHROPIC["tools_changed"],
    "input_changed": (
        MissReason.MESSAGES,
        "an earlier input item or the instructions differ from the compared response's: "
        "append to the input, never rewrite it",
    ),
    "prompt_cache_key_changed": (
        MissReason.CACHE_KEY,
        "the prompt_cache_key differs from the compared response's: the key prefixkit "
        "derives follows the static prefix, so that prefix changed (a StaticPrefixGuard, "
        "guard=, names the segment), or the caller gave another key",
    ),
    "context_compacted": (
        MissReason.COMPACTED,
        "the conversation was compacted since the compared response: the compacted "
        "history is a new prefix, expected once per compaction",
    ),
    "text_format_changed": (
        MissReason.SETTINGS,
        "the output format (text.format) differs from the compared response's: keep it fixed",
    ),
    "reasoning_effort_changed": (
        MissReason.SETTINGS,
        "the reasoning effort differs from the compared response's: keep it fixed",
    ),
    "verbosity_changed": (
        MissReason.SETTINGS,
        "the verbosity differs from the compared response's: keep it fixed",
    ),
    "service_tier_changed": (
        MissReason.SETTINGS,
        "the service tier differs from the compared response's: each tier has its own cache",
    ),
    "comparison_response_not_found": (
        MissReason.PREVIOUS_NOT_FOUND,
        "OpenAI has no record of the compared response (too old, not stored, or another "
        "organization): nothing is known about this request",
    ),
    "unavailable": (
        MissReason.UNAVAILABLE,
        "OpenAI could not diagnose this request: compare the two requests with `prefixkit explain`",
    ),
}


def _field(value: Any, name: str) -> Any:
    """`value.name` of an SDK object (typed or in its `model_extra`) or `value[name]`."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(name)
    found = getattr(value, name, None)
    if found is None:
        extra = getattr(value, "model_extra", None)
        if isinstance(extra, Mapping):
            found = extra.get(name)
    return found


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mapped(
    table: Mapping[str, tuple[MissReason, str]], word: str, provider: str, missed: int | None
) -> CacheMiss:
    found = table.get(word)
    if found is None:
        return CacheMiss(
            MissReason.INCONCLUSIVE,
            "provider",
            f"{provider} gave a cache-miss reason this prefixkit version does not know "
            f"({word!r}): upgrade prefixkit, or compare the requests with `prefixkit explain`",
            missed_tokens=missed,
            provider_reason=word,
        )
    reason, detail = found
    return CacheMiss(reason, "provider", detail, missed_tokens=missed, provider_reason=word)


def anthropic_miss(message: Any) -> CacheMiss | None:
    """The miss an Anthropic message's `diagnostics` explains; None when nothing diverged.

    `message` is the SDK's `Message` or its dict. A pending comparison
    (``cache_miss_reason: null``) is `MissReason.INCONCLUSIVE`.
    """
    diagnostics = _field(message, "diagnostics")
    if diagnostics is None:
        return None
    reason = _field(diagnostics, "cache_miss_reason")
    if reason is None:
        return CacheMiss(
            MissReason.INCONCLUSIVE,
            "provider",
            "Anthropic's comparison was still running when the answer was sent: the next "
            "request's diagnostics will say",
        )
    word = _field(reason, "type")
    missed = _tokens(_field(reason, "cache_missed_input_tokens"))
    return _mapped(_ANTHROPIC, str(word), "Anthropic", missed)


def openai_miss(response: Any) -> CacheMiss | None:
    """The miss a Responses `Response`'s `prompt_cache_diagnostics` explains.

    None for ``cache_hit`` and when the response has no diagnostics.
    """
    diagnostics = _field(response, "prompt_cache_diagnostics")
    if diagnostics is None:
        return None
    kind = str(_field(diagnostics, "type"))
    if kind == "cache_hit":
        return None
    if kind == "cache_miss":
        word = str(_field(diagnostics, "reason"))
        missed = _tokens(_field(diagnostics, "cache_missed_tokens"))
        return _mapped(_OPENAI, word, "OpenAI", missed)
    return _mapped(_OPENAI, kind, "OpenAI", None)


def no_diagnostics(platform: str) -> CacheMiss:
    """The miss of a request whose platform gave no diagnostics (`MissReason.INCONCLUSIVE`)."""
    return CacheMiss(
        MissReason.INCONCLUSIVE,
        "provider",
        f"{platform} sent no cache diagnostics (not offered there, or not for this model): "
        "compare the requests with `prefixkit explain`, or pass a StaticPrefixGuard to the "
        "client for a local explanation",
    )
