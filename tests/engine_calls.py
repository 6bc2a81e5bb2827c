"""Calls to a running vLLM server (or the gateway in front of it) for the engine tests:
a one-token completion, its cached tokens, a streamed time to first token, a token count."""

from __future__ import annotations

from typing import Any

import httpx
from prefixkit.testing.ttft import StreamReading


def complete(
    base_url: str,
    model: str,
    prompt: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """POST /v1/completions (max_tokens 1); returns the response JSON."""
    response = httpx.post(
        f"{base_url}/v1/completions",
        json={"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, **extra},
        headers=headers or {},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def cached_tokens(body: dict[str, Any]) -> int:
    details = body["usage"].get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def stream_ttft(
    base_url: str, model: str, prompt: str, headers: dict[str, str] | None = None
) -> tuple[float, int]:
    """Stream a completion; returns (seconds to the first generated text, cached tokens)."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": 4,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    reading = StreamReading()
    with httpx.stream(
        "POST", f"{base_url}/v1/completions", json=body, headers=headers or {}, timeout=300
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            reading.feed(line)
    answer = reading.answer()
    return answer.ttft_s, answer.cached_tokens


def token_count(base_url: str, model: str, prompt: str) -> int:
    response = httpx.post(
        f"{base_url}/tokenize", json={"model": model, "prompt": prompt}, timeout=60
    )
    response.raise_for_status()
    return int(response.json()["count"])
