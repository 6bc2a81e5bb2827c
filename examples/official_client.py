"""The official client an example talks to, and what its requests carry.

`official_client` returns the real API client when the provider's key is set,
or with `--dry-run` one on `prefixkit.testing.providers.MockProvider`, the
mock that simulates the provider's documented prompt caching; either way with
a function giving the last request body, which `summarize_body` reduces to
where its cache markers sit.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import httpx2
from prefixkit.testing.providers import MockProvider

__all__ = ["official_client", "recording_hook", "summarize_body"]

# provider -> (its client class, the API key variable, a dry-run key)
_PROVIDERS: dict[str, tuple[str, str, str]] = {
    "anthropic": ("Anthropic", "ANTHROPIC_API_KEY", "sk-ant-dry-run"),
    "openai": ("OpenAI", "OPENAI_API_KEY", "sk-dry-run"),
}


def recording_hook(bodies: list[dict[str, Any]]) -> Callable[[httpx2.Request], None]:
    """An httpx2 request hook that keeps each JSON body (for real API runs)."""

    def hook(request: httpx2.Request) -> None:
        request.read()
        bodies.append(json.loads(request.content))

    return hook


def official_client(
    provider: str, dry_run: bool
) -> tuple[Any, Callable[[], dict[str, Any]]] | None:
    """The official `provider` client ("anthropic" or "openai") and a function
    returning the last request body it sent: on the mock with `dry_run`, else on
    the real API. None (after saying which key to set) when there is no API key."""
    client_class, key_variable, dry_run_key = _PROVIDERS[provider]
    if dry_run:
        mock = MockProvider()
        if provider == "anthropic":
            return mock.anthropic_client(api_key=dry_run_key), lambda: mock.body
        return mock.openai_client(api_key=dry_run_key), lambda: mock.body
    if os.environ.get(key_variable):
        sdk = importlib.import_module(provider)
        bodies: list[dict[str, Any]] = []
        http = sdk.DefaultHttpxClient(event_hooks={"request": [recording_hook(bodies)]})
        return getattr(sdk, client_class)(http_client=http), lambda: bodies[-1]
    print(f"set {key_variable} to call the API, or pass --dry-run", file=sys.stderr)
    return None


def summarize_body(body: dict[str, Any]) -> str:
    """Where the cache markers sit in a request body, one line per marker."""
    lines = [f"  model={body['model']}"]
    for key in ("prompt_cache_key", "prompt_cache_options", "cache_control", "cache_salt"):
        if key in body:
            lines.append(f"  {key}={json.dumps(body[key])}")
    for index, tool in enumerate(body.get("tools", [])):
        if "cache_control" in tool:
            lines.append(f"  tools[{index}] cache_control ttl={tool['cache_control'].get('ttl')}")
    for index, block in enumerate(body.get("system", [])):
        if isinstance(block, dict) and "cache_control" in block:
            head = block["text"][:40].replace("\n", " ")
            lines.append(
                f"  system[{index}] {head!r}... cache_control ttl={block['cache_control'].get('ttl')}"
            )
    for m, message in enumerate(body.get("messages", body.get("input", []))):
        content = message["content"]
        for p, part in enumerate(content if isinstance(content, list) else []):
            marker = part.get("cache_control") or part.get("prompt_cache_breakpoint")
            if marker:
                head = part["text"][:40].replace("\n", " ")
                lines.append(
                    f"  {message['role']}[{m}].content[{p}] {head!r}... {json.dumps(marker)}"
                )
    return "\n".join(lines)
