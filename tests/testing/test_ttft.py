"""`StreamReading`: the time to the first token of a streamed answer and the usage its
last event reports, read from fake vLLM's server-sent events as from vLLM's."""

from __future__ import annotations

import httpx
import pytest
from prefixkit.testing.fake_vllm import FakeVLLM
from prefixkit.testing.ttft import StreamReading


def test_a_streamed_answer_gives_its_first_token_time_and_cached_tokens() -> None:
    body = {
        "model": "fake-model",
        "prompt": "word " * 100,
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with FakeVLLM(model="fake-model", block_size=16) as server:
        answers = []
        for _ in range(2):
            reading = StreamReading()
            with httpx.stream("POST", f"{server.url}/v1/completions", json=body) as response:
                for line in response.iter_lines():
                    reading.feed(line)
            answers.append(reading.answer())
    assert all(0 < answer.ttft_s < 10 for answer in answers)
    assert answers[0].cached_tokens == 0
    assert answers[1].cached_tokens > 0
    assert answers[1].prompt_tokens >= answers[1].cached_tokens


def test_a_stream_without_a_token_is_refused() -> None:
    reading = StreamReading()
    for line in ("", ": keep-alive", "data: [DONE]"):
        reading.feed(line)
    with pytest.raises(ValueError, match="no generated token"):
        reading.answer()
