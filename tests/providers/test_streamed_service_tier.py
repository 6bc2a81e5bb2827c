"""A streamed OpenAI answer is priced at the service tier it was served on, as the same
answer unstreamed is: a flex or priority app that streams its replies sees the cost it
pays. OpenAI names the tier in every chat chunk and in the streamed response."""

from __future__ import annotations

import asyncio

import pytest
from prefixkit.sdk import AsyncOpenAIClient, CacheStats, OpenAIClient
from prefixkit.testing.providers import CHAT_USAGE, RESPONSES_USAGE, MockProvider

from .prompts import support_prompt

MODEL = "gpt-5.6-sol"


def mock() -> MockProvider:
    return MockProvider(chat_usage=CHAT_USAGE, responses_usage=RESPONSES_USAGE)


@pytest.mark.parametrize("tier", ["flex", "priority"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_streamed_answer_costs_what_the_same_answer_unstreamed_costs(api: str, tier: str) -> None:
    provider = mock()
    with provider.openai_client() as raw:
        client = OpenAIClient(raw)
        prompt = support_prompt()
        if api == "chat":
            _, whole = client.chat(prompt, model=MODEL, service_tier=tier)
            streamed = client.stream_chat(prompt, model=MODEL, service_tier=tier).stats
            _, standard = client.chat(prompt, model=MODEL)
        else:
            _, whole = client.responses(prompt, model=MODEL, service_tier=tier)
            streamed = client.stream_responses(prompt, model=MODEL, service_tier=tier).stats
            _, standard = client.responses(prompt, model=MODEL)
    assert whole.cost_usd is not None and standard.cost_usd is not None
    assert whole.cost_usd != standard.cost_usd
    assert streamed.cost_usd == pytest.approx(whole.cost_usd)


def test_an_async_stream_is_priced_at_its_tier() -> None:
    provider = mock()

    async def run() -> tuple[CacheStats, CacheStats, CacheStats, CacheStats]:
        async with provider.async_openai_client() as raw:
            client = AsyncOpenAIClient(raw)
            prompt = support_prompt()
            chat = (await client.stream_chat(prompt, model=MODEL, service_tier="flex")).stats
            _, chat_whole = await client.chat(prompt, model=MODEL, service_tier="flex")
            streamed = await client.stream_responses(prompt, model=MODEL, service_tier="flex")
            _, whole = await client.responses(prompt, model=MODEL, service_tier="flex")
        return chat, chat_whole, streamed.stats, whole

    chat, chat_whole, responses, responses_whole = asyncio.run(run())
    assert chat.cost_usd == pytest.approx(chat_whole.cost_usd)
    assert responses.cost_usd == pytest.approx(responses_whole.cost_usd)
