"""Per-tenant numbers the gateway keeps: requests, prompt tokens, cached prompt tokens.

A tenant's ``GET /metrics`` shows its own numbers and nothing else (never the engines'
metrics, which count every tenant's requests); an operator's shows every tenant's beside
the engines'. The token counts come from the ``usage`` object of each answer the relay
passed through (`usage_of`: the last one in the answer's first and last bytes, so a
stream's final usage chunk counts), in OpenAI's, the Responses API's and Anthropic's
shapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PROMETHEUS_TEXT", "TenantUsage", "Usage", "usage_of"]

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the exposition's media type

# a "usage" object with objects one level inside it (prompt_tokens_details)
_USAGE = re.compile(rb'"usage"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})')


@dataclass
class Usage:
    """One tenant's counts (or one answer's, for `usage_of`)."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0


def usage_of(data: bytes) -> Usage | None:
    """The prompt and cached tokens of an answer from the last ``usage`` object in `data`
    that counts prompt tokens (None: no such object)."""
    for match in reversed(list(_USAGE.finditer(data))):
        try:
            usage = json.loads(match.group(1))
        except ValueError:
            continue
        counted = _counted(usage)
        if counted is not None:
            return counted
    return None


def _counted(usage: dict[str, object]) -> Usage | None:
    def number(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def details(key: str) -> int:
        value = usage.get(key)
        return number(value.get("cached_tokens")) if isinstance(value, dict) else 0

    if "prompt_tokens" in usage:  # chat / completions
        return Usage(1, number(usage["prompt_tokens"]), details("prompt_tokens_details"))
    if "cache_read_input_tokens" in usage:  # Anthropic: input_tokens excludes the cache
        read = number(usage["cache_read_input_tokens"])
        prompt = number(usage.get("input_tokens")) + read
        return Usage(1, prompt + number(usage.get("cache_creation_input_tokens")), read)
    if "input_tokens" in usage:  # Responses
        return Usage(1, number(usage["input_tokens"]), details("input_tokens_details"))
    return None


class TenantUsage:
    """Counts per tenant, in the serving app's memory (module docstring)."""

    def __init__(self) -> None:
        self._counts: dict[str, Usage] = {}

    def record(self, tenant: str, answer: Usage | None) -> None:
        """One request of `tenant` ended; `answer`: its usage, if it said."""
        counts = self._counts.setdefault(tenant, Usage())
        counts.requests += 1
        if answer is not None:
            counts.prompt_tokens += answer.prompt_tokens
            counts.cached_tokens += answer.cached_tokens

    def of(self, tenant: str) -> Usage:
        counts = self._counts.get(tenant, Usage())
        return Usage(counts.requests, counts.prompt_tokens, counts.cached_tokens)

    def exposition(self, tenants: Iterable[str]) -> str:
        """Prometheus text of the counts of `tenants` (each labelled with its id)."""
        lines = []
        for name, help_text in (
            ("requests", "Generation requests of the tenant the gateway admitted"),
            ("prompt_tokens", "Prompt tokens of the tenant's answered requests"),
            ("cached_tokens", "Prompt tokens served from the prefix cache"),
        ):
            metric = f"prefixkit_tenant_{name}_total"
            lines += [f"# HELP {metric} {help_text}.", f"# TYPE {metric} counter"]
            for tenant in sorted(tenants):
                value = getattr(self.of(tenant), name)
                lines.append(f'{metric}{{tenant="{_label(tenant)}"}} {value}')
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
