"""Provider fixtures: the official clients (sync and async, Anthropic, OpenAI, vLLM URL)
over a recording `httpx2.MockTransport` (see `wire.py`), and a trained HF tokenizer."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from prefixkit.sdk import HFTokenizer

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


def _sdk_fixture_module() -> Any:
    """tests/sdk/conftest.py, loaded by path: its tokenizer builder is reused, not copied."""
    path = Path(__file__).parents[1] / "sdk" / "conftest.py"
    spec = importlib.util.spec_from_file_location("prefixkit_tests_sdk_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def chatml_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder: Path = _sdk_fixture_module().build_chatml_tokenizer(
        tmp_path_factory.mktemp("providers-chatml-bpe")
    )
    return folder


@pytest.fixture(scope="session")
def chatml_tokenizer(chatml_tokenizer_dir: Path) -> HFTokenizer:
    return HFTokenizer(chatml_tokenizer_dir)
