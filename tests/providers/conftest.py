"""Provider fixtures: the official clients (sync and async, Anthropic, OpenAI, vLLM URL)
on one recording `MockProvider` (`api`) that answers with the fixed usage payloads of
`prefixkit.testing.providers`, so tests can assert on their numbers. The trained HF
tokenizer (`hf_tokenizer`) is in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from prefixkit.testing.providers import (
    ANTHROPIC_USAGE,
    CHAT_USAGE,
    RESPONSES_USAGE,
    MockProvider,
)

REPLY = "Egress costs $0.09/GB."


@pytest.fixture
def api() -> MockProvider:
    return MockProvider(
        anthropic_usage=ANTHROPIC_USAGE,
        chat_usage=CHAT_USAGE,
        responses_usage=RESPONSES_USAGE,
        reply=REPLY,
    )


@pytest.fixture
def anthropic_client(api: MockProvider) -> Iterator[anthropic.Anthropic]:
    with api.anthropic_client() as client:
        yield client


@pytest.fixture
def async_anthropic_client(api: MockProvider) -> anthropic.AsyncAnthropic:
    return api.async_anthropic_client()


@pytest.fixture
def openai_client(api: MockProvider) -> Iterator[openai.OpenAI]:
    with api.openai_client() as client:
        yield client


@pytest.fixture
def async_openai_client(api: MockProvider) -> openai.AsyncOpenAI:
    return api.async_openai_client()


@pytest.fixture
def vllm_openai_client(api: MockProvider) -> Iterator[openai.OpenAI]:
    with api.vllm_client("http://127.0.0.1:8011/v1") as client:
        yield client
