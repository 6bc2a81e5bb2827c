"""Provider fixtures: the official clients (sync and async, Anthropic, OpenAI, vLLM URL)
over a recording `httpx2.MockTransport` (see `wire.py`). The trained HF tokenizer
(`hf_tokenizer`) is in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from .wire import Wire


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def anthropic_client(wire: Wire) -> Iterator[anthropic.Anthropic]:
    http = httpx2.Client(transport=httpx2.MockTransport(wire.handle))
    client = anthropic.Anthropic(api_key="sk-ant-test", http_client=http, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def async_anthropic_client(wire: Wire) -> anthropic.AsyncAnthropic:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(wire.handle))
    return anthropic.AsyncAnthropic(api_key="sk-ant-test", http_client=http, max_retries=0)


@pytest.fixture
def openai_client(wire: Wire) -> Iterator[openai.OpenAI]:
    http = httpx2.Client(transport=httpx2.MockTransport(wire.handle))
    client = openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def async_openai_client(wire: Wire) -> openai.AsyncOpenAI:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(wire.handle))
    return openai.AsyncOpenAI(api_key="sk-test", http_client=http, max_retries=0)


@pytest.fixture
def vllm_openai_client(wire: Wire) -> Iterator[openai.OpenAI]:
    http = httpx2.Client(transport=httpx2.MockTransport(wire.handle))
    client = openai.OpenAI(
        base_url="http://127.0.0.1:8011/v1", api_key="EMPTY", http_client=http, max_retries=0
    )
    yield client
    client.close()
