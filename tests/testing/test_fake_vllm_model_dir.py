"""A fake vLLM replica given a model folder computes prompt tokens as vLLM 0.32 does from
that folder (`PromptTokenizer`), for ``/tokenize``, usage and its KV events, and the
default way for what `PromptTokenizer` cannot reproduce exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens
from prefixkit.testing.fake_vllm import FakeVLLM, chars_tokenizer, chat_text

from tests.testing.conftest import published

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You answer questions about rivers and gardens. " * 12},
    {"role": "user", "content": "Which river runs past the old market?"},
    {"role": "assistant", "content": "The one by the garden."},
    {"role": "user", "content": "And in the morning?"},
]


@pytest.fixture(scope="module")
def prompt_tokenizer(hf_tokenizer_dir: Path) -> PromptTokenizer:
    loaded = PromptTokenizer.load(hf_tokenizer_dir)
    assert isinstance(loaded, PromptTokenizer), loaded
    return loaded


@pytest.fixture
def replica(hf_tokenizer_dir: Path) -> Iterator[FakeVLLM]:
    with FakeVLLM(kv_events=True, block_size=16, model_dir=hf_tokenizer_dir) as started:
        yield started


def chat_ids(tokenizer: PromptTokenizer, body: dict[str, Any]) -> list[int]:
    outcome = tokenizer.tokens("/v1/chat/completions", body)
    assert isinstance(outcome, PromptTokens), outcome
    return outcome.token_ids


def tokenized(replica: FakeVLLM, body: dict[str, Any]) -> list[int]:
    response = httpx.post(f"{replica.url}/tokenize", json=body, timeout=10)
    response.raise_for_status()
    return [int(t) for t in response.json()["tokens"]]


def test_tokenize_answers_a_chat_with_the_model_folders_tokens(
    replica: FakeVLLM, prompt_tokenizer: PromptTokenizer
) -> None:
    body: dict[str, Any] = {"model": "fake-model", "messages": MESSAGES}
    expected = chat_ids(prompt_tokenizer, body)
    assert tokenized(replica, body) == expected
    assert expected != chars_tokenizer(chat_text(body["messages"]))


def test_a_chat_completions_usage_and_events_carry_the_model_folders_tokens(
    replica: FakeVLLM, prompt_tokenizer: PromptTokenizer
) -> None:
    expected = chat_ids(prompt_tokenizer, {"messages": MESSAGES})
    client = openai.OpenAI(base_url=f"{replica.url}/v1", api_key="none", max_retries=0)
    answers: list[int] = []

    def send() -> None:
        answer = client.chat.completions.create(model="fake-model", messages=MESSAGES)
        assert answer.usage is not None
        answers.append(answer.usage.prompt_tokens)

    assert replica.kv_events_endpoint is not None
    events = published(replica.kv_events_endpoint, send)
    (stored,) = [e for e in events if e["type"] == "BlockStored"]
    assert answers == [len(expected)]
    assert stored["token_ids"] == expected[: len(expected) // 16 * 16]


def test_what_the_model_folder_cannot_reproduce_is_tokenized_the_default_way(
    replica: FakeVLLM, prompt_tokenizer: PromptTokenizer
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]
    body = {"model": "fake-model", "messages": messages}
    assert not isinstance(prompt_tokenizer.tokens("/v1/chat/completions", body), PromptTokens)
    assert tokenized(replica, body) == chars_tokenizer(chat_text(messages))


def test_a_folder_without_a_fast_tokenizer_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"has no tokenizer\.json"):
        FakeVLLM(model_dir=tmp_path)


def test_its_endpoint_names_the_model_folder_for_the_routers(hf_tokenizer_dir: Path) -> None:
    assert FakeVLLM(model_dir=hf_tokenizer_dir).endpoint.model == hf_tokenizer_dir
