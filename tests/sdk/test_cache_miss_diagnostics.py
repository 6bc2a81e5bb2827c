"""Why a request missed, from the providers' own diagnostics and from the local comparison,
through the official clients on the recording mock (which answers diagnostics in the shapes
Anthropic and OpenAI document)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    CacheStats,
    HFTokenizer,
    MissReason,
    OpenAIClient,
    Prompt,
    PromptRegistry,
    Segment,
    StaticPrefixGuard,
    VLLMClient,
    write_lock,
)
from prefixkit.testing.fake_vllm import FakeVLLM
from prefixkit.testing.providers import MockProvider

RULES = (
    "You are the support assistant of Nimbus Storage. Answer from the price list only, show "
    "the arithmetic and quote the line you used. "
) * 80
TOOL: dict[str, object] = {
    "name": "lookup_invoice",
    "description": "Fetch an invoice by id.",
    "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
}
OTHER_TOOL: dict[str, object] = {
    **TOOL,
    "name": "lookup_order",
    "description": "Fetch an order by id.",
}


def support(
    day: str = "Monday",
    question: str = "How much is egress?",
    tools: list[dict[str, object]] | None = None,
) -> Prompt:
    return Prompt(
        tools=[TOOL] if tools is None else tools,
        system=[
            Segment.static(RULES, name="rules"),
            Segment.static(f"Today is {day}.", name="date"),
        ],
        messages=[Segment.dynamic(question)],
        name="support",
    )


def body(mock: MockProvider, index: int) -> dict[str, Any]:
    found = mock.bodies[index]
    assert found is not None
    return found


def test_diagnostics_are_off_by_default() -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        AnthropicClient(sdk).create(support(), model="claude-opus-4-1", max_tokens=32)
    assert "diagnostics" not in mock.body
    assert "anthropic-beta" not in mock.requests[-1].headers


def test_anthropic_diagnostics_opt_in_then_compare_with_the_previous_message() -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True)
        first, _ = client.create(support(), model="claude-opus-4-1", max_tokens=32)
        client.create(support(question="And storage?"), model="claude-opus-4-1", max_tokens=32)
    assert body(mock, 0)["diagnostics"] == {"previous_message_id": None}
    assert body(mock, 1)["diagnostics"] == {"previous_message_id": first.id}
    assert mock.requests[1].headers["anthropic-beta"] == "cache-diagnosis-2026-04-07"


def test_anthropic_names_the_changed_system_prompt() -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True)
        _, hit = client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = client.create(support("Tuesday"), model="claude-opus-4-1", max_tokens=32)
    assert hit.miss is None
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.source) == (MissReason.SYSTEM, "provider")
    assert stats.miss.provider_reason == "system_changed"
    assert stats.miss.missed_tokens == hit.input_tokens


def test_the_tokens_a_provider_says_were_missed_are_priced() -> None:
    """claude-opus-4-1: $15 per million input tokens, a cache read 0.1 of it."""
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True)
        client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = client.create(support("Tuesday"), model="claude-opus-4-1", max_tokens=32)
    assert stats.miss is not None and stats.miss.missed_tokens
    assert stats.miss.missed_cost_usd == pytest.approx(stats.miss.missed_tokens * 15 * 0.9 / 1e6)


def test_anthropic_streams_carry_the_diagnosis_too() -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True)
        client.stream(support(), model="claude-opus-4-1", max_tokens=32)
        result = client.stream(
            support(tools=[TOOL, OTHER_TOOL]), model="claude-opus-4-1", max_tokens=32
        )
    assert result.stats.miss is not None and result.stats.miss.reason is MissReason.TOOLS


def test_async_anthropic_reads_the_diagnosis() -> None:
    mock = MockProvider()

    async def run() -> CacheStats:
        client = AsyncAnthropicClient(mock.async_anthropic_client(), diagnostics=True)
        await client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = await client.create(support(), model="claude-sonnet-5", max_tokens=32)
        return stats

    stats = asyncio.run(run())
    assert stats.miss is not None and stats.miss.reason is MissReason.MODEL


def test_a_pending_anthropic_comparison_is_inconclusive() -> None:
    mock = MockProvider(anthropic_diagnostics={"cache_miss_reason": None})
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True)
        client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = client.create(support("Tuesday"), model="claude-opus-4-1", max_tokens=32)
    assert stats.miss is not None
    assert stats.miss.reason is MissReason.INCONCLUSIVE and not stats.miss.conclusive


def test_a_local_explanation_takes_over_an_inconclusive_diagnosis() -> None:
    mock = MockProvider(anthropic_diagnostics={"cache_miss_reason": None})
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True, guard=StaticPrefixGuard())
        client.create(support(), model="claude-opus-4-1", max_tokens=32)
        _, stats = client.create(support("Tuesday"), model="claude-opus-4-1", max_tokens=32)
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.source, stats.miss.segment) == (
        MissReason.STATIC_TEXT,
        "local",
        "date",
    )


def vertex_on(mock: MockProvider) -> httpx2.MockTransport:
    """Vertex AI's routes onto the mock's Messages route (the model moves into the body)."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        found = re.search(r"/models/([^/:]+):", request.url.path)
        assert found is not None, request.url.path
        body = {**json.loads(request.content), "model": found.group(1)}
        body.pop("anthropic_version", None)
        headers = {k: v for k, v in request.headers.items() if k != "content-length"}
        forwarded = httpx2.Request(
            "POST", "https://api.anthropic.com/v1/messages", headers=headers, json=body
        )
        return mock.handle(forwarded)

    return httpx2.MockTransport(handle)


def test_vertex_gets_no_diagnostics_and_a_full_miss_is_inconclusive() -> None:
    mock = MockProvider()
    vertex = anthropic.AnthropicVertex(
        region="us-east5",
        project_id="p",
        access_token="token",
        http_client=anthropic.DefaultHttpxClient(transport=vertex_on(mock)),
        max_retries=0,
    )
    client = AnthropicClient(vertex, diagnostics=True)  # type: ignore[arg-type]
    client.create(support(), model="claude-opus-4-1", max_tokens=32)
    mock.clear_cache()
    _, stats = client.create(support(), model="claude-opus-4-1", max_tokens=32)
    assert all("diagnostics" not in body for body in mock.bodies if body is not None)
    assert stats.miss is not None and stats.miss.reason is MissReason.INCONCLUSIVE
    assert "Vertex AI" in stats.miss.detail


def test_responses_compare_with_the_previous_response_of_the_prompt() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        first, _ = client.responses(support(), model="gpt-5.6-sol", prompt_cache_key="support")
        _, stats = client.responses(
            support(tools=[OTHER_TOOL]), model="gpt-5.6-sol", prompt_cache_key="support"
        )
    assert "comparison_response_id" not in body(mock, 0).get("prompt_cache_options", {})
    assert body(mock, 1)["prompt_cache_options"]["comparison_response_id"] == first.id
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.provider_reason) == (MissReason.TOOLS, "tools_changed")
    assert stats.miss.missed_tokens is not None and stats.miss.missed_tokens > 0


def test_a_responses_cache_hit_explains_nothing() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        client.responses(support(), model="gpt-5.6-sol")
        response, stats = client.responses(support(), model="gpt-5.6-sol")
    assert response.prompt_cache_diagnostics is not None
    assert response.prompt_cache_diagnostics.type == "cache_hit"
    assert stats.miss is None


def test_responses_settings_changes_are_named() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        client.responses(support(), model="gpt-5.6-sol", reasoning={"effort": "low"})
        _, stats = client.responses(support(), model="gpt-5.6-sol", reasoning={"effort": "high"})
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.provider_reason) == (
        MissReason.SETTINGS,
        "reasoning_effort_changed",
    )


def test_an_unavailable_responses_diagnosis_says_so() -> None:
    mock = MockProvider(responses_diagnostics={"type": "unavailable"})
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        client.responses(support(), model="gpt-5.6-sol")
        _, stats = client.responses(support(), model="gpt-5.6-sol")
    assert stats.miss is not None and stats.miss.reason is MissReason.UNAVAILABLE


def test_streamed_responses_carry_the_diagnosis() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        client.stream_responses(support(), model="gpt-5.6-sol")
        result = client.stream_responses(support(), model="gpt-5.6-terra")
    assert result.stats.miss is not None and result.stats.miss.reason is MissReason.MODEL


def test_chat_misses_are_explained_locally() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, guard=StaticPrefixGuard())
        _, first = client.chat(support(), model="gpt-5")
        _, second = client.chat(support(question="And storage?"), model="gpt-5")
        _, third = client.chat(support("Tuesday"), model="gpt-5")
    assert first.miss is None and second.miss is None
    assert third.miss is not None
    assert (third.miss.reason, third.miss.segment) == (MissReason.STATIC_TEXT, "date")
    assert third.miss.missed_cost_usd is not None and third.miss.missed_cost_usd > 0


def test_vllm_misses_name_the_first_changed_block(
    hf_tokenizer: HFTokenizer, hf_tokenizer_dir: Path
) -> None:
    with FakeVLLM(model="m", block_size=16, model_dir=hf_tokenizer_dir) as fake:
        client = VLLMClient(
            f"{fake.url}/v1", tokenizer=hf_tokenizer, block_size=16, guard=StaticPrefixGuard()
        )
        _, first = client.chat(support(), model="m")
        _, second = client.chat(support(question="And storage?"), model="m")
        _, third = client.chat(support("Tuesday"), model="m")
    assert first.miss is None and second.miss is None
    assert third.miss is not None
    assert (third.miss.reason, third.miss.segment) == (MissReason.STATIC_TEXT, "date")
    assert third.miss.block == third.cached_tokens // 16


def test_chat_has_no_diagnostics_and_a_full_miss_is_inconclusive() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, diagnostics=True)
        client.chat(support(), model="gpt-5")
        mock.clear_cache()
        _, stats = client.chat(support(), model="gpt-5")
    assert "prompt_cache_options" not in body(mock, 1)
    assert stats.miss is not None and stats.miss.reason is MissReason.INCONCLUSIVE
    assert "OpenAI Chat Completions" in stats.miss.detail


def test_async_responses_read_the_diagnosis() -> None:
    mock = MockProvider()

    async def run() -> CacheStats:
        client = AsyncOpenAIClient(mock.async_openai_client(), diagnostics=True)
        await client.responses(support(), model="gpt-5.6-sol", prompt_cache_key="support")
        _, stats = await client.responses(
            support(), model="gpt-5.6-sol", prompt_cache_key="support", text={"verbosity": "low"}
        )
        return stats

    stats = asyncio.run(run())
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.provider_reason) == (
        MissReason.SETTINGS,
        "verbosity_changed",
    )


def test_streamed_chat_misses_are_explained_locally() -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk, guard=StaticPrefixGuard())
        client.stream_chat(support(), model="gpt-5")
        result = client.stream_chat(support(tools=[OTHER_TOOL, TOOL]), model="gpt-5")
    assert result.stats.miss is not None
    assert (result.stats.miss.reason, result.stats.miss.segment) == (
        MissReason.TOOLS,
        "lookup_order",  # the tool added, where the sorted list first differs
    )


def test_a_registered_prompt_changed_mid_run_is_named_by_both(prompt_root: Path) -> None:
    """A run that moves a registered prompt from v1 to v2: the provider says the system
    prompt changed, the guard names the versioned segment."""
    write_lock(prompt_root)
    registry = PromptRegistry(prompt_root)
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk, diagnostics=True, guard=StaticPrefixGuard())
        for version in ("v1", "v1", "v2"):
            prompt = Prompt(
                system=[Segment.static(RULES, name="rules"), registry.load("support", version)],
                messages=[Segment.dynamic("How much is egress?")],
                name="support",
            )
            _, stats = client.create(prompt, model="claude-opus-4-1", max_tokens=32)
    assert stats.miss is not None
    assert (stats.miss.reason, stats.miss.source) == (MissReason.SYSTEM, "provider")
    assert stats.miss.segment == "support@v2"
