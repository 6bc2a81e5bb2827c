"""A tenant's numbers come from the usage of each answer the gateway relayed: OpenAI's,
the Responses API's and Anthropic's shapes, whole or streamed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.serving.tenant_usage import TenantUsage, Usage, usage_of


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {
                "id": "c",
                "usage": {"prompt_tokens": 90, "prompt_tokens_details": {"cached_tokens": 64}},
            },
            Usage(1, 90, 64),
        ),
        (
            {"usage": {"input_tokens": 90, "input_tokens_details": {"cached_tokens": 32}}},
            Usage(1, 90, 32),
        ),
        (
            {
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 64,
                    "cache_creation_input_tokens": 16,
                }
            },
            Usage(1, 90, 64),
        ),
    ],
)
def test_a_whole_answers_usage_is_read_in_each_apis_shape(
    answer: dict[str, object], expected: Usage
) -> None:
    assert usage_of(json.dumps(answer).encode()) == expected


def test_a_streamed_answer_counts_its_last_usage_chunk() -> None:
    stream = (
        b"".join(
            b"data: " + json.dumps(chunk).encode() + b"\n\n"
            for chunk in (
                {"choices": [{"delta": {"content": "ok"}}], "usage": None},
                {
                    "choices": [],
                    "usage": {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}},
                },
            )
        )
        + b"data: [DONE]\n\n"
    )
    assert usage_of(stream) == Usage(1, 40, 32)


def test_anthropics_stream_counts_the_usage_of_its_message_start() -> None:
    start = {
        "type": "message_start",
        "message": {"usage": {"input_tokens": 8, "cache_read_input_tokens": 32}},
    }
    delta = {"type": "message_delta", "usage": {"output_tokens": 4}}
    stream = f"event: message_start\ndata: {json.dumps(start)}\n\nevent: message_delta\ndata: {json.dumps(delta)}\n\n"
    assert usage_of(stream.encode()) == Usage(1, 40, 32)


@given(st.binary(max_size=200))
def test_any_bytes_give_a_usage_or_none_and_never_raise(data: bytes) -> None:
    assert usage_of(data) is None or isinstance(usage_of(data), Usage)


def test_a_tenants_exposition_names_only_the_tenants_asked_for() -> None:
    usage = TenantUsage()
    usage.record("acme", Usage(1, 90, 64))
    usage.record("globex", Usage(1, 10, 0))
    usage.record("acme", None)
    text = usage.exposition(["acme"])
    assert 'prefixkit_tenant_requests_total{tenant="acme"} 2' in text
    assert 'prefixkit_tenant_cached_tokens_total{tenant="acme"} 64' in text
    assert "globex" not in text
