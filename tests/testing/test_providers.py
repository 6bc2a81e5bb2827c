"""prefixkit.testing.providers: the recording provider mock, through the official clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.sdk import TiktokenTokenizer
from prefixkit.testing.providers import (
    ANTHROPIC_USAGE,
    CHAT_USAGE,
    DEFAULT_REPLY,
    RESPONSES_USAGE,
    MockProvider,
)

CL100K = TiktokenTokenizer("cl100k_base")
SONNET = "claude-sonnet-5"  # minimum cacheable prefix: 1024 tokens
RULE = "Quote the price list line you used and show the arithmetic for every amount. "
LONG = RULE * 100  # about 1,500 tokens
MEDIUM = RULE * 50  # about 750 tokens
SHORT = "Answer briefly."


@pytest.fixture
def mock() -> MockProvider:
    return MockProvider()


@pytest.fixture
def claude(mock: MockProvider) -> Iterator[anthropic.Anthropic]:
    with mock.anthropic_client() as client:
        yield client


@pytest.fixture
def gpt(mock: MockProvider) -> Iterator[openai.OpenAI]:
    with mock.openai_client() as client:
        yield client


def ask_claude(
    client: anthropic.Anthropic, system: str, question: str, model: str = SONNET
) -> anthropic.types.Usage:
    message = client.messages.create(
        model=model,
        max_tokens=64,
        system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": question}],
    )
    return message.usage


def ask_gpt(client: openai.OpenAI, system: str, question: str, **options: Any) -> Any:
    completion = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        **options,
    )
    return completion.usage


def test_records_every_request_with_its_method_path_headers_and_body(
    mock: MockProvider, claude: anthropic.Anthropic, gpt: openai.OpenAI
) -> None:
    ask_claude(claude, SHORT, "q1")
    ask_gpt(gpt, SHORT, "q2")
    assert mock.paths == ["/v1/messages", "/v1/chat/completions"]
    first, second = mock.requests
    assert first.method == "POST"
    assert first.headers["authorization"] == "Bearer sk-ant-test"
    assert "anthropic-version" in first.headers
    assert first.body is not None and first.body["messages"][0]["content"] == "q1"
    assert second.headers["authorization"] == "Bearer sk-test"
    assert mock.body["messages"][1]["content"] == "q2"
    assert mock.bodies == [first.body, second.body]


def test_anthropic_stream_rebuilds_the_reply_and_carries_the_usage(
    mock: MockProvider, claude: anthropic.Anthropic
) -> None:
    mock.anthropic_usage = ANTHROPIC_USAGE
    with claude.messages.stream(
        model=SONNET, max_tokens=64, messages=[{"role": "user", "content": "q"}]
    ) as stream:
        deltas = list(stream.text_stream)
        message = stream.get_final_message()
    assert mock.body["stream"] is True
    assert len(deltas) > 1 and "".join(deltas) == DEFAULT_REPLY
    assert message.content[0].type == "text" and message.content[0].text == DEFAULT_REPLY
    assert message.usage.cache_read_input_tokens == 3584
    assert message.usage.output_tokens == 64


def test_chat_stream_ends_with_the_usage_chunk_when_asked(gpt: openai.OpenAI) -> None:
    with gpt.chat.completions.stream(
        model="gpt-4o",
        messages=[{"role": "user", "content": "q"}],
        stream_options={"include_usage": True},
    ) as stream:
        completion = stream.get_final_completion()
    assert completion.choices[0].message.content == DEFAULT_REPLY
    assert completion.usage is not None
    assert completion.usage.completion_tokens == CL100K.count(DEFAULT_REPLY)


def test_chat_stream_without_include_usage_has_no_usage_chunk(gpt: openai.OpenAI) -> None:
    chunks = list(
        gpt.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "q"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == DEFAULT_REPLY
    assert all(chunk.usage is None for chunk in chunks)


def test_responses_stream_rebuilds_the_final_response(
    mock: MockProvider, gpt: openai.OpenAI
) -> None:
    mock.responses_usage = RESPONSES_USAGE
    with gpt.responses.stream(model="gpt-5.6-sol", input="q") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        response = stream.get_final_response()
    assert "".join(deltas) == DEFAULT_REPLY
    assert response.output_text == DEFAULT_REPLY
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 1792


def test_vllm_completions_stream_counts_token_id_prompts_as_sent(mock: MockProvider) -> None:
    with mock.vllm_client("http://127.0.0.1:8011/v1") as client:
        chunks = list(
            client.completions.create(
                model="smollm2",
                prompt=[1, 2, 3, 4, 5],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert mock.requests[-1].url.host == "127.0.0.1"
    assert mock.paths == ["/v1/completions"]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == DEFAULT_REPLY
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 5


async def test_async_clients_answer_from_the_same_mock(mock: MockProvider) -> None:
    async with mock.async_anthropic_client() as claude, mock.async_openai_client() as gpt:
        message = await claude.messages.create(
            model=SONNET, max_tokens=8, messages=[{"role": "user", "content": "q"}]
        )
        response = await gpt.responses.create(model="gpt-5.6-sol", input="q")
    assert message.content[0].type == "text" and message.content[0].text == DEFAULT_REPLY
    assert response.output_text == DEFAULT_REPLY
    assert mock.paths == ["/v1/messages", "/v1/responses"]


def test_anthropic_repeat_of_a_long_prefix_is_read_from_the_cache(
    claude: anthropic.Anthropic,
) -> None:
    first = ask_claude(claude, LONG, "How much is egress?")
    second = ask_claude(claude, LONG, "And storage?")
    prefix = CL100K.count(LONG)
    assert prefix >= 1024
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (prefix, 0)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, prefix)
    assert second.input_tokens == CL100K.count("user:And storage?")


def test_anthropic_prefix_below_the_model_minimum_is_never_cached(
    claude: anthropic.Anthropic,
) -> None:
    assert 512 < CL100K.count(MEDIUM) < 1024
    ask_claude(claude, MEDIUM, "How much is egress?")
    second = ask_claude(claude, MEDIUM, "How much is egress?")
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, 0)
    assert second.input_tokens == CL100K.count(MEDIUM) + CL100K.count("user:How much is egress?")


def test_anthropic_minimum_is_the_models_own(claude: anthropic.Anthropic) -> None:
    usage = ask_claude(claude, MEDIUM, "q", model="claude-opus-5")  # minimum 512 tokens
    assert usage.cache_creation_input_tokens == CL100K.count(MEDIUM)


def test_anthropic_cache_is_per_model(claude: anthropic.Anthropic) -> None:
    ask_claude(claude, LONG, "q")
    usage = ask_claude(claude, LONG, "q", model="claude-sonnet-4-6")
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == CL100K.count(LONG)


@pytest.mark.parametrize(("blocks_after", "read"), [(19, True), (20, False)])
def test_anthropic_read_looks_back_at_most_20_blocks(blocks_after: int, read: bool) -> None:
    mock = MockProvider()
    with mock.anthropic_client() as client:
        ask_claude(client, LONG, "q")  # writes the entry ending with the system block
        turns: list[anthropic.types.TextBlockParam] = [
            {"type": "text", "text": f"note {n}"} for n in range(blocks_after)
        ]
        turns[-1]["cache_control"] = {"type": "ephemeral"}
        usage = client.messages.create(
            model=SONNET,
            max_tokens=8,
            system=LONG,
            messages=[{"role": "user", "content": turns}],
        ).usage
    assert usage.cache_read_input_tokens == (CL100K.count(LONG) if read else 0)


def test_clear_cache_forgets_every_entry(mock: MockProvider, claude: anthropic.Anthropic) -> None:
    ask_claude(claude, LONG, "q")
    mock.clear_cache()
    assert ask_claude(claude, LONG, "q").cache_read_input_tokens == 0


def test_openai_repeat_of_a_long_prefix_hits_in_128_token_steps(gpt: openai.OpenAI) -> None:
    first = ask_gpt(gpt, LONG, "How much is egress?", prompt_cache_key="pk-1")
    second = ask_gpt(gpt, LONG, "And storage?", prompt_cache_key="pk-1")
    assert first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens
    shared = CL100K.count(LONG)  # at least the system text is common to both prompts
    assert shared - 128 < cached <= second.prompt_tokens
    assert cached >= 1024 and (cached - 1024) % 128 == 0


def test_openai_prompt_below_1024_tokens_is_never_cached(gpt: openai.OpenAI) -> None:
    ask_gpt(gpt, MEDIUM, "How much is egress?")
    second = ask_gpt(gpt, MEDIUM, "How much is egress?")
    assert 512 < second.prompt_tokens < 1024
    assert second.prompt_tokens_details.cached_tokens == 0


def test_openai_other_prompt_cache_key_misses(gpt: openai.OpenAI) -> None:
    ask_gpt(gpt, LONG, "q", prompt_cache_key="pk-acme")
    other = ask_gpt(gpt, LONG, "q", prompt_cache_key="pk-globex")
    assert other.prompt_tokens_details.cached_tokens == 0


def test_openai_explicit_breakpoint_is_written_then_read(gpt: openai.OpenAI) -> None:
    def send(question: str) -> Any:
        # the breakpoint is a field the client's types do not have yet: the items as JSON
        items: list[Any] = [
            {
                "role": "system",
                "content": [
                    {
                        "type": "input_text",
                        "text": LONG,
                        "prompt_cache_breakpoint": {"mode": "explicit"},
                    }
                ],
            },
            {"role": "user", "content": [{"type": "input_text", "text": question}]},
        ]
        usage = gpt.responses.create(
            model="gpt-5.6-sol",
            input=items,
            extra_body={"prompt_cache_options": {"mode": "explicit", "ttl": "12h"}},
        ).usage
        assert usage is not None
        return usage.input_tokens_details

    first, second = send("q1"), send("q2")
    written = first.cache_write_tokens
    assert first.cached_tokens == 0 and written > CL100K.count(LONG)
    assert first.cache_write_tokens_details.ttl_12h_tokens == written
    assert (second.cached_tokens, second.cache_write_tokens) == (written, 0)


def test_fixed_usage_replaces_the_simulation() -> None:
    mock = MockProvider(anthropic_usage=ANTHROPIC_USAGE, chat_usage=CHAT_USAGE)
    with mock.anthropic_client() as fixed_claude, mock.openai_client() as fixed_gpt:
        usage = ask_claude(fixed_claude, SHORT, "q")
        chat = ask_gpt(fixed_gpt, SHORT, "q")
    assert usage.model_dump(exclude_none=True) == ANTHROPIC_USAGE
    assert chat.model_dump(exclude_none=True) == CHAT_USAGE


def test_unreadable_body_answers_400_in_anthropic_error_shape(
    mock: MockProvider, claude: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.post("/v1/messages", content=b"{not json", cast_to=anthropic.types.Message)
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict)
    assert body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": body["error"]["message"]},
        "request_id": "req_mock0001",
    }
    assert "not valid JSON" in body["error"]["message"]
    assert mock.requests[0].body is None and mock.requests[0].content == b"{not json"


def test_unreadable_body_answers_400_in_openai_error_shape(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gpt.post("/chat/completions", content=b"[1, 2]", cast_to=openai.types.chat.ChatCompletion)
    assert caught.value.status_code == 400
    assert caught.value.code is None and caught.value.type == "invalid_request_error"
    assert "must be a JSON object" in caught.value.message


def test_a_field_of_the_wrong_shape_answers_400_naming_it(claude: anthropic.Anthropic) -> None:
    wrong_shape: Any = [{"role": "user", "content": [42]}]  # sent as it is, on purpose
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.0\.content\.0"):
        claude.messages.create(model=SONNET, max_tokens=8, messages=wrong_shape)


SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4)
JSON = SCALARS | st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "text", "role", "content", "ttl"]), inner)
    ),
    max_leaves=10,
)
VALID: dict[str, dict[str, Any]] = {
    "/v1/messages": {
        "model": SONNET,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "q"}],
    },
    "/v1/chat/completions": {"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}]},
    "/v1/responses": {"model": "gpt-5.6-sol", "input": "q"},
}
FIELDS = ["max_tokens", "messages", "system", "tools", "input", "stream", "cache_control"]
FIELDS += ["prompt_cache_options", "prompt_cache_key", "instructions", "stream_options"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(sorted(VALID)),
    changes=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=3),
)
def test_any_json_body_is_answered_or_refused_with_400(path: str, changes: dict[str, Any]) -> None:
    mock = MockProvider()
    with mock.anthropic_client() as claude, mock.openai_client() as gpt:
        client: Any = claude if path == "/v1/messages" else gpt
        try:
            response = client.post(path, body=VALID[path] | changes, cast_to=httpx2.Response)
        except (anthropic.BadRequestError, openai.BadRequestError) as error:
            assert error.status_code == 400
        else:
            assert response.status_code == 200


def test_more_than_four_breakpoints_answer_400_like_the_api(claude: anthropic.Anthropic) -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    with pytest.raises(anthropic.BadRequestError, match=r"A maximum of 4 blocks .* Found 5"):
        claude.messages.create(
            model=SONNET,
            max_tokens=8,
            system=[marked] * 5,  # type: ignore[list-item]
            messages=[{"role": "user", "content": "q"}],
        )


def test_a_cache_ttl_the_api_does_not_take_answers_400(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="the chat API takes 30m, got '12h'"):
        ask_gpt(gpt, SHORT, "q", extra_body={"prompt_cache_options": {"ttl": "12h"}})


def test_unknown_path_answers_404(gpt: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="Invalid URL"):
        gpt.embeddings.create(model="text-embedding-3-small", input="q")


def test_count_tokens_estimates_the_prompt_without_caching(
    mock: MockProvider, claude: anthropic.Anthropic
) -> None:
    counted = claude.messages.count_tokens(
        model=SONNET,
        system=[{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "q"}],
    )
    assert counted.input_tokens == CL100K.count(LONG) + CL100K.count("user:q")
    assert ask_claude(claude, LONG, "q").cache_read_input_tokens == 0
