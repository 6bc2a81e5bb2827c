"""Reading a request body in the provider mock: each field the simulation reads is
type-checked first, so a body of the wrong shape is answered with HTTP 400."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from prefixkit.sdk import TiktokenTokenizer, provider_limits

from .openai_answers import Event

__all__ = ["UNKNOWN_MODEL_MIN_TOKENS", "Answer"]

UNKNOWN_MODEL_MIN_TOKENS = 1024
Answer = dict[str, Any] | list[Event]  # a JSON payload, or the events of a stream


class _BadRequest(Exception):
    """A body the mock cannot read: answered with HTTP 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@functools.cache
def _counter() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


def _digest(parts: list[str]) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _require(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in body:
        raise _BadRequest(f"{name}: Field required", name)
    value = body[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _BadRequest(f"{name}: expected {wanted}, got {type(value).__name__}", name)
    return value


def _optional_list(body: Mapping[str, Any], name: str) -> list[Any]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadRequest(f"{name}: expected list, got {type(value).__name__}", name)
    return value


def _optional_str(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _BadRequest(f"{name}: expected str, got {type(value).__name__}", name)
    return value


def _options(body: Mapping[str, Any], api: str | None = None) -> dict[str, Any]:
    """`prompt_cache_options`, its TTL checked against what `api` ("chat", "responses") takes."""
    options = body.get("prompt_cache_options") or {}
    if not isinstance(options, dict):
        raise _BadRequest("prompt_cache_options must be an object", "prompt_cache_options")
    if options.get("mode", "implicit") not in ("implicit", "explicit"):
        raise _BadRequest(
            f"prompt_cache_options.mode: expected 'implicit' or 'explicit', got "
            f"{options['mode']!r}",
            "prompt_cache_options.mode",
        )
    ttls = provider_limits("openai").api_ttls.get(api or "", ())
    if api is not None and "ttl" in options and options["ttl"] not in ttls:
        raise _BadRequest(
            f"prompt_cache_options.ttl: the {api} API takes {', '.join(ttls)}, got "
            f"{options['ttl']!r}",
            "prompt_cache_options.ttl",
        )
    return options


def _streamed(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _BadRequest("stream must be a boolean", "stream")
    return stream


def _pieces(text: str) -> list[str]:
    """`text` in word-sized stream deltas that join back to it exactly."""
    return re.split(r"(?<=\s)(?=\S)", text)
