"""stream_chat (OpenAI and vLLM, sync and async) assembles a streamed tool call: the
chunks' argument pieces become the call of the final ChatCompletion and of
StreamResult.tool_calls, with the usage of the last chunk; stream_responses returns
the streamed function call too."""

from __future__ import annotations

import json

import httpx2
import openai
from prefixkit.sdk import (
    AsyncOpenAIClient,
    AsyncVLLMClient,
    HFTokenizer,
    OpenAIClient,
    StreamResult,
    ToolCall,
    VLLMClient,
)
from prefixkit.testing.providers import CHAT_USAGE, RESPONSES_USAGE, MockProvider

from .openai_tool_answers import ToolCallingProvider
from .prompts import support_prompt

VLLM_URL = "http://127.0.0.1:8011/v1"
CALL = ToolCall("call_1", "lookup_invoice", json.dumps({"invoice_id": "INV-1"}))


def provider() -> ToolCallingProvider:
    return ToolCallingProvider(MockProvider(chat_usage=CHAT_USAGE), calls=1)


def assert_the_call(streamed: StreamResult) -> None:
    assert streamed.text == ""
    assert streamed.tool_calls == (CALL,)
    choice = streamed.response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        (CALL.id, CALL.name, CALL.arguments)
    ]
    assert streamed.stats.cached_tokens == 1920 and streamed.ttft_seconds is not None


def test_openai_stream_chat_returns_the_streamed_tool_call() -> None:
    answers = provider()
    with answers.openai_client() as client:
        assert_the_call(OpenAIClient(client).stream_chat(support_prompt(), model="gpt-4o"))


async def test_async_openai_stream_chat_returns_the_streamed_tool_call() -> None:
    answers = provider()
    async with answers.async_openai_client() as client:
        assert_the_call(
            await AsyncOpenAIClient(client).stream_chat(support_prompt(), model="gpt-4o")
        )


def test_vllm_stream_chat_returns_the_streamed_tool_call(hf_tokenizer: HFTokenizer) -> None:
    answers = provider()
    with answers.openai_client(base_url=VLLM_URL) as client:
        vllm = VLLMClient(tokenizer=hf_tokenizer, block_size=32, client=client)
        assert_the_call(vllm.stream_chat(support_prompt(), model="smollm2"))


async def test_async_vllm_stream_chat_returns_the_streamed_tool_call(
    hf_tokenizer: HFTokenizer,
) -> None:
    answers = provider()
    async with answers.async_openai_client(base_url=VLLM_URL) as client:
        vllm = AsyncVLLMClient(tokenizer=hf_tokenizer, block_size=32, client=client)
        assert_the_call(await vllm.stream_chat(support_prompt(), model="smollm2"))


def test_a_streamed_text_answer_has_no_tool_calls_and_its_completion() -> None:
    mock = MockProvider(chat_usage=CHAT_USAGE, reply="No tool needed.")
    with mock.openai_client() as client:
        streamed = OpenAIClient(client).stream_chat(support_prompt(), model="gpt-4o")
    assert streamed.text == "No tool needed." and streamed.tool_calls == ()
    assert streamed.response.choices[0].message.content == "No tool needed."


def test_a_stream_cut_by_the_token_limit_keeps_its_text_and_completion() -> None:
    mock = MockProvider(chat_usage=CHAT_USAGE, reply="The answer is")

    def truncated(request: httpx2.Request) -> httpx2.Response:
        answer = mock.handle(request)
        content = answer.content.replace(b'"finish_reason": "stop"', b'"finish_reason": "length"')
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(truncated))
    with openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0) as client:
        streamed = OpenAIClient(client).stream_chat(support_prompt(), model="gpt-4o")
    assert streamed.text == "The answer is"
    assert streamed.response.choices[0].finish_reason == "length"


def test_stream_responses_returns_the_streamed_function_call() -> None:
    answers = ToolCallingProvider(MockProvider(responses_usage=RESPONSES_USAGE), calls=1)
    with answers.openai_client() as client:
        streamed = OpenAIClient(client).stream_responses(support_prompt(), model="gpt-5.6-sol")
    assert streamed.tool_calls == (CALL,) and streamed.text == ""
    assert streamed.stats.cached_tokens == 1792
