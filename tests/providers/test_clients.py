"""Client wrappers: render, send through the official client, return (response, CacheStats)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncVLLMClient,
    HFTokenizer,
    OpenAIClient,
    ToolCall,
    VLLMClient,
    tenant_salt,
)
from prefixkit.testing.openai_answers import sse
from prefixkit.testing.providers import MockProvider

from .prompts import support_prompt

SECRET = "test-salt-secret"


def test_anthropic_create_returns_message_and_stats(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    client = AnthropicClient(anthropic_client)
    message, stats = client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    assert message.content[0].type == "text"
    assert "cache_control" in api.body["system"][0]
    assert (stats.cached_tokens, stats.uncached_tokens) == (3584, 21)
    assert stats.savings_usd is not None and stats.savings_usd > 0


def test_anthropic_stream_measures_ttft_and_reads_usage_from_message_start(
    anthropic_client: anthropic.Anthropic, api: MockProvider
) -> None:
    result = AnthropicClient(anthropic_client).stream(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert api.body["stream"] is True
    assert result.text == "Egress costs $0.09/GB."
    assert result.ttft_seconds is not None and 0 <= result.ttft_seconds <= result.total_seconds
    assert result.stats.cached_tokens == 3584
    assert result.stats.output_tokens == 64


def test_anthropic_stream_returns_a_streamed_tool_use(api: MockProvider) -> None:
    def tool_use(request: httpx2.Request) -> httpx2.Response:
        answer = api.handle(request)
        start = next(
            json.loads(line[len("data: ") :])
            for line in answer.content.decode().splitlines()
            if '"message_start"' in line and line.startswith("data: ")
        )
        block = {"type": "tool_use", "id": "toolu_1", "name": "lookup_invoice", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": '{"invoice_id": "INV-1"}'}
        events: list[tuple[str | None, dict[str, Any] | str]] = [
            ("message_start", start),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"".join(sse(events))
        )

    http = anthropic.DefaultHttpxClient(transport=httpx2.MockTransport(tool_use))
    with anthropic.Anthropic(api_key="sk-ant-test", http_client=http, max_retries=0) as client:
        result = AnthropicClient(client).stream(
            support_prompt(), model="claude-opus-4-1", max_tokens=64
        )
    assert result.text == ""
    assert result.tool_calls == (ToolCall("toolu_1", "lookup_invoice", {"invoice_id": "INV-1"}),)
    assert result.stats.cached_tokens == 3584


async def test_async_anthropic_create_and_stream(
    async_anthropic_client: anthropic.AsyncAnthropic, api: MockProvider
) -> None:
    client = AsyncAnthropicClient(async_anthropic_client)
    _, stats = await client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    streamed = await client.stream(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    assert stats.cached_tokens == streamed.stats.cached_tokens == 3584
    assert streamed.ttft_seconds is not None


def test_openai_chat_sends_the_cache_key_and_returns_stats(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    completion, stats = OpenAIClient(openai_client).chat(
        support_prompt(), model="gpt-4o", tenant="acme", salt_secret=SECRET, temperature=0
    )
    assert completion.choices[0].message.content == "Egress costs $0.09/GB."
    assert api.body["prompt_cache_key"].startswith("pk-")
    assert api.body["temperature"] == 0
    assert (stats.cached_tokens, stats.uncached_tokens) == (1920, 86)
    assert stats.cost_usd is not None


def test_openai_stream_chat_asks_for_usage_and_measures_ttft(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    result = OpenAIClient(openai_client).stream_chat(support_prompt(), model="gpt-4o")
    assert api.body["stream_options"] == {"include_usage": True}
    assert result.text == "Egress costs $0.09/GB."
    assert result.ttft_seconds is not None
    assert result.stats.cached_tokens == 1920


def test_openai_responses_and_stream_responses(
    openai_client: openai.OpenAI, api: MockProvider
) -> None:
    client = OpenAIClient(openai_client)
    response, stats = client.responses(support_prompt(), model="gpt-5.6-sol")
    assert api.paths[-1] == "/v1/responses"
    assert api.body["prompt_cache_options"] == {"mode": "explicit"}
    assert response.output_text == "Egress costs $0.09/GB."
    assert (stats.cached_tokens, stats.written_tokens) == (1792, 128)
    streamed = client.stream_responses(support_prompt(), model="gpt-5.6-sol")
    assert streamed.text == "Egress costs $0.09/GB."
    assert streamed.stats == stats
    assert streamed.response is not None and streamed.ttft_seconds is not None


async def test_async_openai_chat_responses_and_stream(
    async_openai_client: openai.AsyncOpenAI, api: MockProvider
) -> None:
    client = AsyncOpenAIClient(async_openai_client)
    _, chat_stats = await client.chat(support_prompt(), model="gpt-4o")
    _, responses_stats = await client.responses(support_prompt(), model="gpt-5.6-sol")
    streamed = await client.stream_chat(support_prompt(), model="gpt-4o")
    streamed_responses = await client.stream_responses(support_prompt(), model="gpt-5.6-sol")
    assert chat_stats.cached_tokens == streamed.stats.cached_tokens == 1920
    assert responses_stats == streamed_responses.stats


def test_vllm_client_salts_chat_and_token_id_requests(
    vllm_openai_client: openai.OpenAI, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    client = VLLMClient(
        tokenizer=hf_tokenizer, block_size=32, salt_secret=SECRET, client=vllm_openai_client
    )
    _, stats = client.chat(support_prompt(), model="smollm2", tenant="acme", max_tokens=8)
    assert api.body["cache_salt"] == tenant_salt("acme", SECRET)
    assert stats.cached_tokens == 1920 and stats.cost_usd is None
    client.complete(support_prompt(), model="smollm2", tenant="acme", max_tokens=8)
    assert api.paths[-1] == "/v1/completions"
    assert all(isinstance(token, int) for token in api.body["prompt"])
    streamed = client.stream_chat(support_prompt(), model="smollm2", tenant="acme")
    assert streamed.stats.cached_tokens == 1920 and streamed.ttft_seconds is not None


async def test_async_vllm_client(api: MockProvider, hf_tokenizer: HFTokenizer) -> None:
    official = api.async_vllm_client("http://127.0.0.1:8011/v1")
    client = AsyncVLLMClient(
        tokenizer=hf_tokenizer, block_size=32, salt_secret=SECRET, client=official
    )
    _, stats = await client.chat(support_prompt(), model="smollm2", tenant="globex")
    assert api.body["cache_salt"] == tenant_salt("globex", SECRET)
    await client.complete(support_prompt(), model="smollm2")
    assert "cache_salt" not in api.body
    streamed = await client.stream_chat(support_prompt(), model="smollm2")
    assert stats.cached_tokens == streamed.stats.cached_tokens


def test_wrappers_build_their_own_official_client() -> None:
    assert isinstance(AnthropicClient(api_key="k").client, anthropic.Anthropic)
    assert isinstance(OpenAIClient(api_key="k").client, openai.OpenAI)
    no_tokenizer: Any = None  # building the client does not use the tokenizer
    vllm = VLLMClient("http://127.0.0.1:8011/v1", tokenizer=no_tokenizer, block_size=32)
    assert str(vllm.client.base_url) == "http://127.0.0.1:8011/v1/"


@pytest.mark.parametrize("shape", ["anthropic", "openai"])
def test_render_errors_surface_before_any_request(
    shape: str,
    anthropic_client: anthropic.Anthropic,
    openai_client: openai.OpenAI,
    api: MockProvider,
) -> None:
    from prefixkit.sdk import Prompt, RenderError

    with pytest.raises(RenderError):
        if shape == "anthropic":
            AnthropicClient(anthropic_client).create(Prompt(system="x"), model="m", max_tokens=1)
        else:
            OpenAIClient(openai_client).chat(Prompt(system="x"), model="gpt-4o")
    assert api.bodies == []
