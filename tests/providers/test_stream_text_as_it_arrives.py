"""A chat app shows the reply while it streams: every prefixkit stream method hands each
text delta to `on_text` as it arrives, through the official clients on the provider mock;
each delta separately, in order, joining to the streamed text."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncVLLMClient,
    HFTokenizer,
    OpenAIClient,
    StreamResult,
    VLLMClient,
)
from prefixkit.testing.providers import MockProvider

from .prompts import support_prompt

OnText = Callable[[str], None]


def sync_streams(
    mock: MockProvider, tokenizer: HFTokenizer
) -> dict[str, Callable[[OnText], StreamResult]]:
    prompt = support_prompt()
    anthropic_client = AnthropicClient(mock.anthropic_client())
    openai_client = OpenAIClient(mock.openai_client())
    vllm = VLLMClient(tokenizer=tokenizer, block_size=32, client=mock.vllm_client())
    return {
        "anthropic": lambda on: anthropic_client.stream(
            prompt, model="claude-sonnet-5", max_tokens=64, on_text=on
        ),
        "chat": lambda on: openai_client.stream_chat(prompt, model="gpt-5.6-sol", on_text=on),
        "responses": lambda on: openai_client.stream_responses(
            prompt, model="gpt-5.6-sol", on_text=on
        ),
        "vllm": lambda on: vllm.stream_chat(prompt, model="smollm2", on_text=on),
    }


def async_streams(
    mock: MockProvider, tokenizer: HFTokenizer
) -> dict[str, Callable[[OnText], Awaitable[StreamResult]]]:
    prompt = support_prompt()
    anthropic_client = AsyncAnthropicClient(mock.async_anthropic_client())
    openai_client = AsyncOpenAIClient(mock.async_openai_client())
    vllm = AsyncVLLMClient(tokenizer=tokenizer, block_size=32, client=mock.async_vllm_client())
    return {
        "anthropic": lambda on: anthropic_client.stream(
            prompt, model="claude-sonnet-5", max_tokens=64, on_text=on
        ),
        "chat": lambda on: openai_client.stream_chat(prompt, model="gpt-5.6-sol", on_text=on),
        "responses": lambda on: openai_client.stream_responses(
            prompt, model="gpt-5.6-sol", on_text=on
        ),
        "vllm": lambda on: vllm.stream_chat(prompt, model="smollm2", on_text=on),
    }


class Screen:
    """What the app shows, piece by piece."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def show(self, piece: str) -> None:
        self.pieces.append(piece)


def deltas(text: str) -> list[str]:
    """The text deltas the mock streams `text` in (one per word, spaces kept)."""
    return re.split(r"(?<=\s)(?=\S)", text)


KINDS = ["anthropic", "chat", "responses", "vllm"]


@pytest.mark.parametrize("kind", KINDS)
def test_each_text_delta_reaches_on_text_as_it_arrives(
    kind: str, hf_tokenizer: HFTokenizer
) -> None:
    screen = Screen()
    result = sync_streams(MockProvider(), hf_tokenizer)[kind](screen.show)
    assert screen.pieces == deltas(result.text)
    assert result.ttft_seconds is not None


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_stream_hands_each_delta_to_on_text(kind: str, hf_tokenizer: HFTokenizer) -> None:
    screen = Screen()

    async def run() -> Any:
        return await async_streams(MockProvider(), hf_tokenizer)[kind](screen.show)

    result = asyncio.run(run())
    assert screen.pieces == deltas(result.text)
