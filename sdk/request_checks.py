"""What every renderer refuses before it renders: a request parameter the renderer sets
itself, tools given both in the `Prompt` and as `tools=...`, and a prompt without
messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import RenderError
from .prompt import Prompt

__all__ = ["check_request"]


# prefixkit's arguments naming a tenant: never a provider's request parameter (a renderer
# that salts takes them as its own arguments)
_TENANT_ARGUMENTS = frozenset({"tenant", "salt_secret"})


def check_request(
    prompt: Prompt,
    request: Mapping[str, Any],
    *,
    renderer: str,
    reserved: Mapping[str, str],
    provider: str,
    model: str,
) -> None:
    """Raise `RenderError` unless `renderer` (`render_vllm`) can render `prompt` with the
    extra `request` parameters; `reserved` maps each parameter the renderer sets to the way
    to give it instead."""
    own = sorted(set(request) & _TENANT_ARGUMENTS)
    if own:
        raise RenderError(
            f"{renderer} takes no {' or '.join(own)}: {provider} has no per-tenant cache "
            "field, its cache is shared by every request of a workspace; give each tenant "
            "its own workspace (API key) to keep their caches apart",
            provider=provider,
            model=model,
        )
    clash = sorted(set(request) & set(reserved))
    if clash:
        raise RenderError(
            f"{renderer} sets "
            + "; ".join(f"{name} (give it as {reserved[name]})" for name in clash)
            + ", not as an extra request parameter",
            provider=provider,
            model=model,
        )
    if prompt.tools and "tools" in request:
        raise RenderError(
            "tools come from both the Prompt and tools=...: give them in one place "
            "(Prompt(tools=...) keeps them in a stable order, part of the cached prefix)",
            provider=provider,
            model=model,
        )
    if not prompt.messages and not prompt.context:
        raise RenderError(
            "the prompt has no messages: add Segment.dynamic(question) to Prompt(messages=...)",
            provider=provider,
            model=model,
        )
