"""The fake vLLM replica's Anthropic Messages API (``/v1/messages``), through the official
``anthropic`` client: answers and streams it parses, ``usage`` from the fake's prefix cache
under the request's ``cache_salt``, as vLLM reports it in Anthropic's terms."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest
from anthropic.types import Message, MessageParam
from prefixkit.testing.fake_vllm import FakeVLLM

SYSTEM = "You answer questions about the fake replica. " * 20
MESSAGES: list[MessageParam] = [{"role": "user", "content": "What do you cache?"}]


@pytest.fixture
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM() as started:
        yield started


@pytest.fixture
def client(replica: FakeVLLM) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=replica.url, api_key="x", max_retries=0) as started:
        yield started


def _create(client: anthropic.Anthropic, salt: str) -> Message:
    return client.messages.create(
        model="fake-model",
        max_tokens=4,
        system=SYSTEM,
        messages=MESSAGES,
        extra_body={"cache_salt": salt},
    )


def test_a_message_is_answered_in_anthropics_shape(client: anthropic.Anthropic) -> None:
    answer = _create(client, "tenant-a")
    assert [block.type for block in answer.content] == ["text"]
    assert answer.content[0].type == "text" and answer.content[0].text == "ok" * 4
    assert (answer.role, answer.stop_reason, answer.usage.output_tokens) == (
        "assistant",
        "max_tokens",
        4,
    )


def test_a_repeated_message_reads_its_whole_blocks_from_the_cache(
    client: anthropic.Anthropic, replica: FakeVLLM
) -> None:
    prompt = len(replica.token_ids({"system": SYSTEM, "messages": MESSAGES}, "/v1/messages"))
    first = _create(client, "tenant-a").usage
    second = _create(client, "tenant-a").usage
    assert (first.cache_read_input_tokens, first.cache_creation_input_tokens) == (0, 7 * 32)
    assert (second.cache_read_input_tokens, prompt) == (7 * 32, 7 * 32 + 14)
    assert second.input_tokens + 7 * 32 + (second.cache_creation_input_tokens or 0) == prompt


def test_another_salt_reads_nothing_from_the_cache(client: anthropic.Anthropic) -> None:
    _create(client, "tenant-a")
    assert _create(client, "tenant-b").usage.cache_read_input_tokens == 0


def test_a_streamed_message_arrives_as_anthropics_events(client: anthropic.Anthropic) -> None:
    events = client.messages.create(
        model="fake-model", max_tokens=2, messages=MESSAGES, stream=True
    )
    assert [event.type for event in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_the_stream_helper_gives_the_final_message_with_its_cache_reads(
    client: anthropic.Anthropic,
) -> None:
    _create(client, "tenant-a")
    with client.messages.stream(
        model="fake-model",
        max_tokens=4,
        system=SYSTEM,
        messages=MESSAGES,
        extra_body={"cache_salt": "tenant-a"},
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "text" and final.content[0].text == "ok" * 4
    assert (final.usage.cache_read_input_tokens or 0) > 0


def test_count_tokens_counts_the_prompt_the_replica_sees(
    client: anthropic.Anthropic, replica: FakeVLLM
) -> None:
    counted = client.messages.count_tokens(model="fake-model", system=SYSTEM, messages=MESSAGES)
    body = {"system": SYSTEM, "messages": MESSAGES}
    assert counted.input_tokens == len(replica.token_ids(body, "/v1/messages"))


def test_a_model_it_does_not_serve_is_anthropics_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="other", max_tokens=4, messages=MESSAGES)
    assert "does not exist" in caught.value.message
