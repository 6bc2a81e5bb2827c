"""Exact Claude counts through the official clients: once per content, framing left out, async-safe.

Renders count only the cacheable prefix: N renders of one static prefix with
different questions make two count_tokens calls (the baseline and the prefix).

The counter talks to prefixkit.testing's MockProvider through the official
`anthropic` clients (a recording httpx transport), so every count_tokens call
the counter makes is seen and counted.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import anthropic
import httpx2
import pytest
from prefixkit.sdk import (
    AnthropicTokenCounter,
    AsyncAnthropicClient,
    Prompt,
    Segment,
    TiktokenTokenizer,
    TokenizerError,
    UncachedPrefixWarning,
    render_anthropic,
)
from prefixkit.testing.providers import MockProvider

MODEL = "claude-sonnet-4-5"
SENT_MODEL = "claude-sonnet-5"  # a model the API still serves, with the same 1024-token minimum
COUNT_PATH = "/v1/messages/count_tokens"
POLICY = "You answer billing questions for Example Cloud. Refunds take five days. " * 40


def _thread_recording_client(
    api: MockProvider, threads: list[str], only: str | None = None
) -> anthropic.Anthropic:
    """A sync official client on `api` that appends to `threads` the name of the thread each
    request (to the path `only`, when given) is sent from."""

    def recording(request: httpx2.Request) -> httpx2.Response:
        if only is None or request.url.path == only:
            threads.append(threading.current_thread().name)
        return api.handle(request)

    return anthropic.Anthropic(
        api_key="sk-ant-test",
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(transport=httpx2.MockTransport(recording)),
    )


def _counted(body: dict[str, Any]) -> int:
    """What the (mock) count_tokens API answers for `body`, asked on a fresh mock."""
    request = httpx2.Request("POST", f"https://api.anthropic.com{COUNT_PATH}", json=body)
    answer: int = json.loads(MockProvider().handle(request).content)["input_tokens"]
    return answer


def _calls(api: MockProvider) -> int:
    return api.paths.count(COUNT_PATH)


def test_a_one_letter_text_counts_one_token_not_its_message_framing() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    assert counter.count("x") == 1
    assert (
        counter.framing()
        == _counted({"model": MODEL, "messages": [{"role": "user", "content": "x"}]}) - 1
    )
    assert counter.framing() > 0


def test_a_static_prefix_is_counted_once_for_many_renders() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    system = [{"type": "text", "text": POLICY + " (prefix A)"}]
    counts = {counter.count_prefix(system=system) for _ in range(10)}
    assert len(counts) == 1
    assert _calls(api) == 2  # the one-letter baseline, then the prefix once
    counter.count_prefix(system=[{"type": "text", "text": POLICY + " (prefix B)"}])
    assert _calls(api) == 3


def test_a_prefix_count_is_the_prefix_as_the_provider_counts_it_without_framing(
    cl100k: TiktokenTokenizer,
) -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    text = POLICY + " (prefix C)"
    # The mock counts a system block as its cl100k tokens, a message with its role marker.
    assert counter.count_prefix(system=[{"type": "text", "text": text}]) == cl100k.count(text)


def test_the_prefix_memo_is_by_content_not_by_object() -> None:
    AnthropicTokenCounter(MODEL, client=MockProvider().anthropic_client()).count_prefix(
        system=[{"type": "text", "text": POLICY + " (prefix D)"}]
    )
    api = MockProvider()
    again = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    again.count_prefix(system=[{"text": POLICY + " (prefix D)", "type": "text"}])
    assert _calls(api) == 0


async def test_an_async_client_counts_without_a_blocking_call() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.async_anthropic_client())
    text = "\nAn async-counted segment, unique to this test."
    with pytest.raises(TokenizerError, match=r"await counter\.prepare"):
        counter.count(text)
    await counter.prepare([text, text])
    calls = _calls(api)
    assert counter.count(text) == await counter.acount(text)
    assert _calls(api) == calls == 2  # the baseline and the text, once each


async def test_an_async_prefix_count_is_memoised_like_a_sync_one() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.async_anthropic_client())
    system = [{"type": "text", "text": POLICY + " (prefix E)"}]
    first = await counter.acount_prefix(system=system)
    assert await counter.acount_prefix(system=system) == first
    assert _calls(api) == 2


async def test_a_sync_client_is_awaited_in_a_worker_thread() -> None:
    api = MockProvider()
    threads: list[str] = []
    loop_thread = threading.current_thread().name
    counter = AnthropicTokenCounter(MODEL, client=_thread_recording_client(api, threads))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await counter.acount("\nA segment counted from async code with a sync client.")
    ticker.cancel()
    assert threads and loop_thread not in threads
    assert ticks > 0


def _support_prompt(tag: str, question: str) -> Prompt:
    # Above the model's 1024-token minimum, so the static prefix alone is worth caching.
    return Prompt(system=POLICY * 2 + f" ({tag})", messages=[Segment.dynamic(question)])


def test_renders_of_one_static_prefix_count_it_once_and_never_the_question() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    for number in range(5):
        prompt = _support_prompt("render F", f"Question {number}: why is my bill higher?")
        render_anthropic(prompt, model=MODEL, max_tokens=64, tokenizer=counter)
    assert _calls(api) == 2  # the one-letter baseline, then the static prefix


def test_a_growing_conversation_is_not_counted_once_the_static_prefix_reaches_the_minimum() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    prompt = _support_prompt("render J", "Why is my bill higher?")
    for number in range(4):
        render_anthropic(prompt, model=MODEL, max_tokens=64, tokenizer=counter)
        prompt = prompt.next_turn(f"Answer {number}.", f"Follow-up {number}?")
    assert _calls(api) == 2


def test_a_prefix_below_the_minimum_warns_with_its_exact_count(
    cl100k: TiktokenTokenizer,
) -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(MODEL, client=api.anthropic_client())
    short = "Answer billing questions briefly (prefix G)."
    prompt = Prompt(system=short, messages=[Segment.dynamic("Why is my bill higher?")])
    with pytest.warns(UncachedPrefixWarning, match=rf"is {cl100k.count(short)} tokens \(counted"):
        render_anthropic(prompt, model=MODEL, max_tokens=64, tokenizer=counter)


async def test_the_async_client_counts_the_prefix_before_rendering_without_blocking() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(SENT_MODEL, client=api.async_anthropic_client())
    client = AsyncAnthropicClient(api.async_anthropic_client())
    for number in range(3):
        prompt = _support_prompt("render H", f"Question {number}: and in euros?")
        await client.create(prompt, model=SENT_MODEL, max_tokens=64, tokenizer=counter)
    assert _calls(api) == 2
    assert api.paths.count("/v1/messages") == 3


async def test_concurrent_first_requests_count_the_prefix_once() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter(SENT_MODEL, client=api.async_anthropic_client())
    client = AsyncAnthropicClient(api.async_anthropic_client())
    prompts = [_support_prompt("render C", f"Question {n}: and in yen?") for n in range(20)]
    await asyncio.gather(
        *(client.create(p, model=SENT_MODEL, max_tokens=64, tokenizer=counter) for p in prompts)
    )
    assert _calls(api) == 2  # the framing baseline and the static prefix
    assert api.paths.count("/v1/messages") == 20


async def test_the_async_client_runs_a_sync_counter_off_the_event_loop() -> None:
    api = MockProvider()
    threads: list[str] = []
    sync_client = _thread_recording_client(api, threads, only=COUNT_PATH)
    counter = AnthropicTokenCounter(SENT_MODEL, client=sync_client)
    result = await AsyncAnthropicClient(api.async_anthropic_client()).stream(
        _support_prompt("render I", "Why?"), model=SENT_MODEL, max_tokens=64, tokenizer=counter
    )
    assert result.text
    assert len(threads) == 2
    assert threading.current_thread().name not in threads
