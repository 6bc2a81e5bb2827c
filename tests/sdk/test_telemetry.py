"""OpenTelemetry: once `instrument()` is on, every request an SDK client sends is one GenAI
client span carrying the request's cache usage and prefixkit's prompt attributes, and its
tokens are counted in metrics; read here from the OpenTelemetry SDK's in-memory span
exporter and metric reader, through the official clients on the recording mock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncVLLMClient,
    HFTokenizer,
    MissingExtraError,
    OpenAIClient,
    Prompt,
    Segment,
    StaticPrefixGuard,
    VLLMClient,
    instrument,
    uninstrument,
)
from prefixkit.testing.providers import (
    ANTHROPIC_USAGE,
    CHAT_USAGE,
    RESPONSES_USAGE,
    MockProvider,
)

INSTRUCTIONS = "You are the support assistant of Nimbus Storage. Answer from the price list. " * 100
SUPPORT = {"prefixkit.prompt.name": "support", "prefixkit.prompt.version": "3"}
VLLM_URL = "http://127.0.0.1:8011/v1"


def support_prompt(question: str = "How much is 500 GB of egress?") -> Prompt:
    """A named prompt with a versioned segment (its version is "3")."""
    return Prompt(
        system=[
            Segment.static(INSTRUCTIONS, name="instructions"),
            Segment.versioned("Refunds within 30 days.", version="3", name="policy"),
        ],
        messages=[Segment.dynamic(question)],
        name="support",
    )


def _includes(have: Mapping[str, Any] | None, want: Mapping[str, Any]) -> bool:
    return all((have or {}).get(key) == value for key, value in want.items())


@dataclass(frozen=True)
class Telemetry:
    """The spans and metrics `instrument()` sent to the test's providers."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider

    def span(self) -> ReadableSpan:
        """The one finished span."""
        (span,) = self.spans.get_finished_spans()
        return span

    def attributes(self) -> dict[str, Any]:
        """The attributes of the one finished span."""
        return dict(self.span().attributes or {})

    def points(self, name: str) -> list[NumberDataPoint | HistogramDataPoint]:
        """The data points of the metric `name` (empty when it was never recorded)."""
        data = self.metrics.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data is not None else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
            if isinstance(point, (NumberDataPoint, HistogramDataPoint))
        ]

    def total(self, name: str, attributes: Mapping[str, Any]) -> float:
        """The sum of a counter's points whose attributes include `attributes`."""
        return sum(
            point.value
            for point in self.points(name)
            if isinstance(point, NumberDataPoint) and _includes(point.attributes, attributes)
        )

    def histogram(self, name: str, attributes: Mapping[str, Any]) -> HistogramDataPoint:
        """The one histogram point of `name` whose attributes include `attributes`."""
        (point,) = [
            point
            for point in self.points(name)
            if isinstance(point, HistogramDataPoint) and _includes(point.attributes, attributes)
        ]
        return point


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider([reader]))
    try:
        yield Telemetry(spans, reader, tracer_provider)
    finally:
        uninstrument()


@pytest.fixture
def api() -> MockProvider:
    return MockProvider(
        anthropic_usage=ANTHROPIC_USAGE, chat_usage=CHAT_USAGE, responses_usage=RESPONSES_USAGE
    )


def test_an_anthropic_request_is_one_client_span_named_for_its_operation_and_model(
    telemetry: Telemetry, api: MockProvider
) -> None:
    AnthropicClient(api.anthropic_client()).create(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    span = telemetry.span()
    assert (span.name, span.kind) == ("chat claude-opus-4-1", SpanKind.CLIENT)
    assert _includes(
        span.attributes,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.system": "anthropic",
            "gen_ai.request.model": "claude-opus-4-1",
            "server.address": "api.anthropic.com",
            "server.port": 443,  # the https default, which the base URL leaves out
        },
    )


def test_an_anthropic_span_carries_the_usage_with_cache_reads_in_the_input_tokens(
    telemetry: Telemetry, api: MockProvider
) -> None:
    # Anthropic's input_tokens (21) leave the cache out; the conventions' input tokens count it
    AnthropicClient(api.anthropic_client()).create(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert _includes(
        telemetry.attributes(),
        {
            "gen_ai.usage.input_tokens": 21 + 3584,
            "gen_ai.usage.output_tokens": 64,
            "gen_ai.usage.cache_read.input_tokens": 3584,
            "gen_ai.usage.cache_creation.input_tokens": 0,
            "prefixkit.cache.hit_ratio": 3584 / 3605,
            "prefixkit.cache.reported": True,
            "prefixkit.request.streamed": False,
        },
    )


def test_a_span_names_the_prompt_and_the_versions_it_is_built_from(
    telemetry: Telemetry, api: MockProvider
) -> None:
    AnthropicClient(api.anthropic_client()).create(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert _includes(telemetry.attributes(), {**SUPPORT, "gen_ai.prompt.name": "support"})


def test_a_prompt_without_a_name_or_versions_leaves_those_attributes_out(
    telemetry: Telemetry, api: MockProvider
) -> None:
    prompt = Prompt(system=[Segment.static(INSTRUCTIONS)], messages=[Segment.dynamic("Hi")])
    AnthropicClient(api.anthropic_client()).create(prompt, model="claude-opus-4-1", max_tokens=8)
    attributes = telemetry.attributes()
    assert not {*SUPPORT, "gen_ai.prompt.name"} & set(attributes)


def test_a_prompt_without_a_name_is_named_by_its_first_versioned_segment(
    telemetry: Telemetry, api: MockProvider
) -> None:
    # a prompt file loaded from a registry: support@v3.md
    registered = Segment.versioned(INSTRUCTIONS, version="v3", name="support")
    prompt = Prompt(system=[registered], messages=[Segment.dynamic("Hi")])
    AnthropicClient(api.anthropic_client()).create(prompt, model="claude-opus-4-1", max_tokens=8)
    assert _includes(
        telemetry.attributes(),
        {"prefixkit.prompt.name": "support", "prefixkit.prompt.version": "v3"},
    )


def test_a_span_carries_the_response_id_and_model(telemetry: Telemetry, api: MockProvider) -> None:
    message, _ = AnthropicClient(api.anthropic_client()).create(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert _includes(
        telemetry.attributes(),
        {"gen_ai.response.id": message.id, "gen_ai.response.model": message.model},
    )


def test_a_request_span_is_a_child_of_the_span_current_at_the_call(
    telemetry: Telemetry, api: MockProvider
) -> None:
    client = AnthropicClient(api.anthropic_client())
    tracer = telemetry.tracer_provider.get_tracer("the application")
    with tracer.start_as_current_span("answer a ticket") as parent:
        client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    request = next(s for s in telemetry.spans.get_finished_spans() if s.name.startswith("chat"))
    assert request.parent is not None
    assert request.parent.span_id == parent.get_span_context().span_id


def test_an_anthropic_stream_span_carries_the_usage_and_the_time_to_first_chunk(
    telemetry: Telemetry, api: MockProvider
) -> None:
    result = AnthropicClient(api.anthropic_client()).stream(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert _includes(
        telemetry.attributes(),
        {
            "gen_ai.usage.input_tokens": 3605,
            "gen_ai.usage.cache_read.input_tokens": 3584,
            "gen_ai.response.time_to_first_chunk": result.ttft_seconds,
            "prefixkit.request.streamed": True,
        },
    )


async def test_async_anthropic_requests_are_spans_too(
    telemetry: Telemetry, api: MockProvider
) -> None:
    client = AsyncAnthropicClient(api.async_anthropic_client())
    await client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    await client.stream(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    spans = telemetry.spans.get_finished_spans()
    assert [dict(s.attributes or {}).get("prefixkit.request.streamed") for s in spans] == [
        False,
        True,
    ]
    assert {
        dict(s.attributes or {}).get("gen_ai.usage.cache_read.input_tokens") for s in spans
    } == {3584}


def test_an_openai_responses_span_carries_the_tokens_written_to_the_cache(
    telemetry: Telemetry, api: MockProvider
) -> None:
    OpenAIClient(api.openai_client()).responses(support_prompt(), model="gpt-5.1")
    assert _includes(
        telemetry.attributes(),
        {
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": 2006,
            "gen_ai.usage.cache_read.input_tokens": 1792,
            "gen_ai.usage.cache_creation.input_tokens": 128,
            "gen_ai.usage.cache_write.input_tokens": 128,
            "gen_ai.usage.output_tokens": 300,
        },
    )


def test_an_openai_chat_stream_span_carries_the_usage_of_the_last_chunk(
    telemetry: Telemetry, api: MockProvider
) -> None:
    OpenAIClient(api.openai_client()).stream_chat(support_prompt(), model="gpt-5.1")
    assert _includes(
        telemetry.attributes(),
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 2006,
            "gen_ai.usage.cache_read.input_tokens": 1920,
            "prefixkit.request.streamed": True,
        },
    )


async def test_async_openai_chat_and_streamed_responses_are_spans(
    telemetry: Telemetry, api: MockProvider
) -> None:
    client = AsyncOpenAIClient(api.async_openai_client())
    await client.chat(support_prompt(), model="gpt-5.1")
    await client.stream_responses(support_prompt(), model="gpt-5.1")
    reads = [
        dict(s.attributes or {}).get("gen_ai.usage.cache_read.input_tokens")
        for s in telemetry.spans.get_finished_spans()
    ]
    assert reads == [1920, 1792]


def test_a_vllm_completion_is_a_text_completion_span_naming_the_server(
    telemetry: Telemetry, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    client = VLLMClient(tokenizer=hf_tokenizer, block_size=32, client=api.vllm_client(VLLM_URL))
    client.complete(support_prompt(), model="smollm2")
    span = telemetry.span()
    assert span.name == "text_completion smollm2"
    assert _includes(
        span.attributes,
        {
            "gen_ai.provider.name": "vllm",
            "gen_ai.operation.name": "text_completion",
            "server.address": "127.0.0.1",
            "server.port": 8011,
            "gen_ai.usage.cache_read.input_tokens": 1920,
        },
    )


async def test_an_async_vllm_stream_is_a_chat_span(
    telemetry: Telemetry, api: MockProvider, hf_tokenizer: HFTokenizer
) -> None:
    official = api.async_vllm_client(VLLM_URL)
    client = AsyncVLLMClient(tokenizer=hf_tokenizer, block_size=32, client=official)
    await client.stream_chat(support_prompt(), model="smollm2")
    assert _includes(
        telemetry.attributes(),
        {
            "gen_ai.provider.name": "vllm",
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.cache_read.input_tokens": 1920,
            "prefixkit.request.streamed": True,
        },
    )


def test_usage_without_cache_counters_leaves_the_cache_attributes_out(
    telemetry: Telemetry, hf_tokenizer: HFTokenizer
) -> None:
    # a vLLM server started without --enable-prompt-tokens-details: unknown, not 0 hits
    api = MockProvider(
        chat_usage={"prompt_tokens": 1630, "completion_tokens": 8, "prompt_tokens_details": None}
    )
    client = VLLMClient(tokenizer=hf_tokenizer, block_size=32, client=api.vllm_client(VLLM_URL))
    client.chat(support_prompt(), model="smollm2")
    attributes = telemetry.attributes()
    assert attributes["gen_ai.usage.input_tokens"] == 1630
    assert attributes["prefixkit.cache.reported"] is False
    assert not {
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "prefixkit.cache.hit_ratio",
    } & set(attributes)


def test_a_failed_request_is_an_error_span_with_its_error_type() -> None:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider([reader]))
    overloaded = httpx2.MockTransport(
        lambda request: httpx2.Response(
            500, json={"type": "error", "error": {"type": "api_error", "message": "down"}}
        )
    )
    official = anthropic.Anthropic(
        api_key="sk-ant-test",
        http_client=anthropic.DefaultHttpxClient(transport=overloaded),
        max_retries=0,
    )
    try:
        with pytest.raises(anthropic.InternalServerError):
            AnthropicClient(official).create(
                support_prompt(), model="claude-opus-4-1", max_tokens=64
            )
    finally:
        uninstrument()
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "InternalServerError"
    assert [event.name for event in span.events] == ["exception"]


def dated(day: str, question: str = "How much is egress?") -> Prompt:
    """The support prompt with a static segment that names the day (a cache breaker)."""
    return Prompt(
        system=[
            Segment.static(INSTRUCTIONS, name="instructions"),
            Segment.static(f"Today is {day}.", name="date"),
        ],
        messages=[Segment.dynamic(question)],
        name="support",
    )


def test_a_span_carries_the_reason_the_provider_gives_for_a_miss(telemetry: Telemetry) -> None:
    api = MockProvider()  # simulated caching, answering Anthropic's diagnostics
    client = AnthropicClient(api.anthropic_client(), diagnostics=True)
    _, hit = client.create(dated("Monday"), model="claude-opus-4-1", max_tokens=32)
    client.create(dated("Tuesday"), model="claude-opus-4-1", max_tokens=32)
    first, second = (dict(s.attributes or {}) for s in telemetry.spans.get_finished_spans())
    assert not {"prefixkit.cache.miss.reason", "prefixkit.cache.miss.source"} & set(first)
    assert _includes(
        second,
        {
            "prefixkit.cache.miss.reason": "system",
            "prefixkit.cache.miss.source": "provider",
            "prefixkit.cache.miss.tokens": hit.input_tokens,
        },
    )


def test_a_span_carries_the_local_explanation_of_a_miss(telemetry: Telemetry) -> None:
    api = MockProvider()
    client = OpenAIClient(api.openai_client(), guard=StaticPrefixGuard())
    client.chat(dated("Monday"), model="gpt-5")
    client.chat(dated("Tuesday"), model="gpt-5")
    last = dict(telemetry.spans.get_finished_spans()[-1].attributes or {})
    assert _includes(
        last,
        {
            "prefixkit.cache.miss.reason": "static_text",
            "prefixkit.cache.miss.source": "local",
            "prefixkit.cache.miss.segment": "date",
        },
    )


def test_requests_are_counted_by_the_reason_of_their_miss(telemetry: Telemetry) -> None:
    client = AnthropicClient(MockProvider().anthropic_client(), diagnostics=True)
    for day in ("Monday", "Tuesday", "Tuesday"):
        client.create(dated(day), model="claude-opus-4-1", max_tokens=32)
    support = {"prefixkit.prompt.name": "support"}
    assert telemetry.total("prefixkit.requests", support) == 3
    assert (
        telemetry.total("prefixkit.requests", {**support, "prefixkit.cache.miss.reason": "system"})
        == 1
    )


def test_metrics_count_the_tokens_read_written_and_sent_per_prompt_name_and_version(
    telemetry: Telemetry, api: MockProvider
) -> None:
    client = AnthropicClient(api.anthropic_client())
    for _ in range(2):
        client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    OpenAIClient(api.openai_client()).responses(support_prompt(), model="gpt-5.1")
    anthropic_support = {**SUPPORT, "gen_ai.provider.name": "anthropic"}
    assert telemetry.total("prefixkit.usage.cache_read.input_tokens", anthropic_support) == 7168
    assert telemetry.total("prefixkit.usage.input_tokens", anthropic_support) == 7210
    assert telemetry.total("prefixkit.usage.cache_read.input_tokens", SUPPORT) == 7168 + 1792
    assert telemetry.total("prefixkit.usage.cache_creation.input_tokens", SUPPORT) == 128
    assert telemetry.total("prefixkit.requests", SUPPORT) == 3


def test_the_conventions_histograms_record_tokens_by_type_and_the_duration(
    telemetry: Telemetry, api: MockProvider
) -> None:
    client = AnthropicClient(api.anthropic_client())
    for _ in range(2):
        client.create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    tokens = "gen_ai.client.token.usage"
    inputs = telemetry.histogram(tokens, {"gen_ai.token.type": "input", **SUPPORT})
    outputs = telemetry.histogram(tokens, {"gen_ai.token.type": "output"})
    assert (inputs.count, inputs.sum, outputs.sum) == (2, 7210, 128)
    duration = telemetry.histogram("gen_ai.client.operation.duration", SUPPORT)
    assert duration.count == 2 and duration.sum > 0


def test_unreported_cache_counters_are_counted_apart_in_the_input_tokens(
    telemetry: Telemetry, hf_tokenizer: HFTokenizer
) -> None:
    api = MockProvider(
        chat_usage={"prompt_tokens": 1630, "completion_tokens": 8, "prompt_tokens_details": None}
    )
    client = VLLMClient(tokenizer=hf_tokenizer, block_size=32, client=api.vllm_client(VLLM_URL))
    client.chat(support_prompt(), model="smollm2")
    unreported = {**SUPPORT, "prefixkit.cache.reported": False}
    assert telemetry.total("prefixkit.usage.input_tokens", unreported) == 1630
    assert telemetry.points("prefixkit.usage.cache_read.input_tokens") == []


def test_nothing_is_traced_after_uninstrument(telemetry: Telemetry, api: MockProvider) -> None:
    uninstrument()
    AnthropicClient(api.anthropic_client()).create(
        support_prompt(), model="claude-opus-4-1", max_tokens=64
    )
    assert telemetry.spans.get_finished_spans() == ()
    assert telemetry.points("prefixkit.requests") == []


GLOBAL_PROVIDERS = """
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prefixkit.sdk import AnthropicClient, Prompt, Segment, instrument
from prefixkit.testing.providers import ANTHROPIC_USAGE, MockProvider

spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tracer_provider)
metrics.set_meter_provider(MeterProvider([reader]))
api = MockProvider(anthropic_usage=ANTHROPIC_USAGE)
client = AnthropicClient(api.anthropic_client(open_telemetry=False))  # the SDK's own spans off
prompt = Prompt(system=[Segment.static("x " * 3000)], messages=[Segment.dynamic("Hi")])
client.create(prompt, model="claude-opus-4-1", max_tokens=8)
print(len(spans.get_finished_spans()), reader.get_metrics_data() is None)
instrument()
client.create(prompt, model="claude-opus-4-1", max_tokens=8)
print(len(spans.get_finished_spans()), reader.get_metrics_data() is None)
"""


def test_instrument_without_providers_uses_the_global_ones_and_nothing_is_sent_before() -> None:
    # the global providers can be set once per process: a process of its own
    run = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDERS], capture_output=True, text=True, check=True
    )
    assert run.stdout.split("\n")[:2] == ["0 True", "1 False"]


def test_instrument_without_opentelemetry_names_the_otel_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError, match=r"needs opentelemetry, .*prefixkit\[otel\]'$"):
        instrument()


@settings(max_examples=25)
@given(
    uncached=st.integers(0, 10**6),
    read=st.integers(0, 10**6),
    written=st.integers(0, 10**6),
)
def test_input_tokens_are_the_sum_of_the_read_written_and_uncached_tokens(
    uncached: int, read: int, written: int
) -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    usage = {
        "input_tokens": uncached,
        "output_tokens": 1,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }
    api = MockProvider(anthropic_usage=usage)
    instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    try:
        AnthropicClient(api.anthropic_client()).create(
            support_prompt(), model="claude-opus-4-1", max_tokens=8
        )
    finally:
        uninstrument()
    (span,) = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == uncached + read + written
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == read
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == written
