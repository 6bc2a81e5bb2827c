"""Anthropic beta blocks in an assistant turn (`compaction`, `mcp_tool_listing`,
`fallback`) are Anthropic blocks: sent back to `beta.messages.create` exactly as the
response had them, as dicts or as the SDK's beta objects."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import anthropic
import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    Native,
    Prompt,
    RenderError,
    Segment,
    render_anthropic,
    render_openai_responses,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS

CLAUDE = "claude-sonnet-5"

COMPACTION = {
    "type": "compaction",
    "content": "The user asked about Paris; the weather tool said 21 C.",
    "encrypted_content": "enc-abc",
    "signature": "sig-123",
}
FAILED_COMPACTION = {"type": "compaction", "content": None}
MCP_LISTING = {
    "type": "mcp_tool_listing",
    "mcp_server_name": "weather",
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
}
FALLBACK = {
    "type": "fallback",
    "from": {"model": "claude-opus-5"},
    "to": {"model": "claude-sonnet-5"},
    "trigger": None,
}
BLOCKS = {
    "compaction": COMPACTION,
    "failed compaction": FAILED_COMPACTION,
    "mcp_tool_listing": MCP_LISTING,
    "fallback": FALLBACK,
}


def conversation(block: Any) -> Prompt:
    return Prompt(
        system=[Segment.static(LONG_INSTRUCTIONS)],
        messages=[
            Segment.session("What is the weather in Paris?"),
            Segment.session([block, {"type": "text", "text": "It is 21 C."}], role="assistant"),
            Segment.dynamic("And in Rome?"),
        ],
    )


def without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_markers(item) for item in value]
    return value


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_beta_block_reaches_beta_messages_create_exactly(name: str) -> None:
    block = copy.deepcopy(BLOCKS[name])
    mock = MockProvider()
    kwargs: Any = render_anthropic(conversation(block), model=CLAUDE, max_tokens=64)
    mock.anthropic_client().beta.messages.create(**kwargs, betas=["compact-2026-01-12"])
    sent = mock.body["messages"][1]["content"][0]
    assert without_markers(sent) == BLOCKS[name]


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_beta_block_is_an_anthropic_block(name: str) -> None:
    segment = Segment.session([copy.deepcopy(BLOCKS[name])], role="assistant")
    assert isinstance(segment.blocks[0], Native)
    assert segment.blocks[0].dialect == "anthropic"


def test_the_sdks_beta_compaction_object_is_sent_back_as_the_sdk_sends_it() -> None:
    block = anthropic.types.beta.BetaCompactionBlock.model_validate(COMPACTION)
    segment = Segment.session([block], role="assistant")
    assert isinstance(segment.blocks[0], Native)
    assert (segment.blocks[0].dialect, dict(segment.blocks[0].item)) == ("anthropic", COMPACTION)


def test_an_openai_compaction_item_stays_a_responses_item() -> None:
    item = {"type": "compaction", "encrypted_content": "enc-abc", "id": "cmp_1"}
    segment = Segment.session([item], role="assistant")
    assert isinstance(segment.blocks[0], Native)
    assert segment.blocks[0].dialect == "responses"


def test_an_anthropic_compaction_block_is_refused_for_openai_responses() -> None:
    with pytest.raises(RenderError, match="compaction"):
        render_openai_responses(conversation(copy.deepcopy(COMPACTION)), model="gpt-4o")


def test_anthropic_client_sends_betas_through_the_beta_messages_api() -> None:
    mock = MockProvider()
    prompt = Prompt(
        system=[Segment.static(LONG_INSTRUCTIONS)],
        messages=[Segment.dynamic("Summarise clause 4.")],
    )
    client = AnthropicClient(mock.anthropic_client())
    message, stats = client.create(
        prompt, model="claude-sonnet-5", max_tokens=64, betas=["context-management-2025-06-27"]
    )
    sent = mock.requests[-1]
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
    assert sent.body is not None and "betas" not in sent.body
    assert message.content and stats is not None


def test_async_anthropic_client_streams_with_betas() -> None:
    mock = MockProvider()
    prompt = Prompt(messages=[Segment.dynamic("Hello.")])

    async def run() -> None:
        client = AsyncAnthropicClient(mock.async_anthropic_client())
        await client.stream(prompt, model="claude-sonnet-5", max_tokens=16, betas=["b-1"])

    asyncio.run(run())
    assert mock.requests[-1].headers["anthropic-beta"] == "b-1"
