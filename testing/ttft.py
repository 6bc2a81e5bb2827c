"""Time to first token of a streamed answer of an OpenAI-compatible server (vLLM's
``"stream": true`` server-sent events), with the usage its last event reports: what the
benches and the engine tests measure a warm prefix by.

    reading = StreamReading()                      # the clock starts here
    with httpx.stream("POST", url, json={**body, "stream": True,
                      "stream_options": {"include_usage": True}}) as response:
        for line in response.iter_lines():         # or `async for ... in aiter_lines()`
            reading.feed(line)
    answer = reading.answer()                      # .ttft_s, .prompt_tokens, .cached_tokens

The first token is the first event with ``choices`` (text or a role); ``[DONE]`` and
comments are skipped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

__all__ = ["StreamReading", "StreamedAnswer"]


@dataclass(frozen=True)
class StreamedAnswer:
    """`ttft_s`: seconds from the request to its first token; `prompt_tokens` and
    `cached_tokens`: the usage the stream reported (0 when it did not)."""

    ttft_s: float
    prompt_tokens: int
    cached_tokens: int


class StreamReading:
    """The server-sent events of one streamed answer, read line by line as they arrive."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.ttft_s: float | None = None
        self.prompt_tokens = 0
        self.cached_tokens = 0

    def feed(self, line: str) -> None:
        """One line of the stream, as soon as it arrives (the clock is read here)."""
        if not line.startswith("data: {"):
            return
        event = json.loads(line[len("data: ") :])
        if self.ttft_s is None and event.get("choices"):
            self.ttft_s = time.perf_counter() - self.started
        usage = event.get("usage")
        if usage:
            self.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            self.cached_tokens = int(details.get("cached_tokens") or 0)

    def answer(self) -> StreamedAnswer:
        """What the stream said; raises `ValueError` when no token came back."""
        if self.ttft_s is None:
            raise ValueError("no generated token in the stream")
        return StreamedAnswer(self.ttft_s, self.prompt_tokens, self.cached_tokens)
