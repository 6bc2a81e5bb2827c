"""The OpenTelemetry names prefixkit emits outside its own `prefixkit.` namespace are spelled
as the semantic conventions spell them: the GenAI attributes and metrics, `server.*` and
`error.type`, checked against the constants of the `opentelemetry-semantic-conventions`
package (what the spans and metrics of real requests carry, and every name the telemetry
module declares)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import anthropic
import httpx2
import prefixkit.sdk.telemetry as prefixkit_telemetry
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from prefixkit.sdk import AnthropicClient, OpenAIClient, instrument, uninstrument
from prefixkit.testing.providers import ANTHROPIC_USAGE, RESPONSES_USAGE, MockProvider

from .test_telemetry import support_prompt


def _names(*modules: ModuleType) -> set[str]:
    """The string constants (the names) a semantic-conventions module defines."""
    return {
        value
        for module in modules
        for key, value in vars(module).items()
        if key.isupper() and isinstance(value, str)
    }


# semantic-conventions-genai renamed gen_ai.usage.cache_creation.input_tokens; the package has
# no constant for the new name yet (the anthropic SDK's own spans use it: see below)
RENAMED_SINCE_THE_PACKAGE = {"gen_ai.usage.cache_write.input_tokens"}
CONVENTIONS = _names(gen_ai_attributes, server_attributes, error_attributes)
METRICS = _names(gen_ai_metrics)


def _outside_prefixkit(names: set[str]) -> set[str]:
    return {name for name in names if not name.startswith("prefixkit.")}


def _emitted() -> tuple[set[str], set[str]]:
    """The attribute names and metric names of an answered and a failed request."""
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider([reader]))
    api = MockProvider(anthropic_usage=ANTHROPIC_USAGE, responses_usage=RESPONSES_USAGE)
    failing = httpx2.MockTransport(lambda request: httpx2.Response(500, json={}))
    broken = anthropic.Anthropic(
        api_key="sk-ant-test",
        http_client=anthropic.DefaultHttpxClient(transport=failing),
        max_retries=0,
    )
    try:
        AnthropicClient(api.anthropic_client()).stream(
            support_prompt(), model="claude-opus-4-1", max_tokens=64
        )
        OpenAIClient(api.openai_client()).responses(support_prompt(), model="gpt-5.1")
        with pytest.raises(anthropic.InternalServerError):
            AnthropicClient(broken).create(support_prompt(), model="claude-opus-4-1", max_tokens=8)
    finally:
        uninstrument()
    attributes = {name for span in spans.get_finished_spans() for name in span.attributes or {}}
    data = reader.get_metrics_data()
    assert data is not None
    metrics = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    ]
    attributes |= {
        name
        for metric in metrics
        for point in metric.data.data_points
        for name in point.attributes or {}
    }
    return attributes, {metric.name for metric in metrics}


def test_every_attribute_outside_prefixkits_namespace_is_spelled_as_in_the_conventions() -> None:
    attributes, _ = _emitted()
    assert {
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "error.type",
    } <= attributes
    assert _outside_prefixkit(attributes) - CONVENTIONS - RENAMED_SINCE_THE_PACKAGE == set()


def test_every_metric_outside_prefixkits_namespace_is_spelled_as_in_the_conventions() -> None:
    _, metrics = _emitted()
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= metrics
    assert _outside_prefixkit(metrics) - METRICS == set()


def test_every_convention_name_the_telemetry_module_declares_is_spelled_as_in_the_conventions() -> (
    None
):
    declared = _names(prefixkit_telemetry) - {prefixkit_telemetry.INSTRUMENTATION_SCOPE}
    assert len(declared) > 30
    outside = _outside_prefixkit(declared)
    assert outside - CONVENTIONS - METRICS - RENAMED_SINCE_THE_PACKAGE == set()


def test_the_usage_attributes_are_those_the_anthropic_sdks_own_span_sets_with_its_values() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    api = MockProvider(anthropic_usage=ANTHROPIC_USAGE)
    official = api.anthropic_client(open_telemetry={"tracer_provider": tracer_provider})
    instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    try:
        AnthropicClient(official).create(support_prompt(), model="claude-opus-4-1", max_tokens=64)
    finally:
        uninstrument()
    sdk_span, prefixkit_span = spans.get_finished_spans()  # the SDK's ends first
    scope = sdk_span.instrumentation_scope
    assert scope is not None and scope.name == "com.anthropic.sdk.python"
    usage = {
        name: value
        for name, value in (sdk_span.attributes or {}).items()
        if name.startswith("gen_ai.usage.")
    }
    assert set(usage) >= RENAMED_SINCE_THE_PACKAGE
    assert usage.items() <= dict(prefixkit_span.attributes or {}).items()


DOC = Path(__file__).parents[2] / "docs" / "sdk" / "opentelemetry.md"


def _documented(section: str) -> set[str]:
    """The names in the first column of the tables under the heading `section`."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    rows = text[start : end if end != -1 else None].splitlines()
    return {
        name
        for row in rows
        if row.startswith("| `")
        for name in re.findall(r"`([\w.]+)`", row.split("|")[1])
    }


def test_the_docs_page_lists_every_attribute_a_span_carries_and_no_other() -> None:
    attributes, _ = _emitted()
    documented = _documented("Spans")
    assert attributes <= documented | {"gen_ai.token.type"}  # the metrics table names it
    assert documented <= _names(prefixkit_telemetry)


def test_the_docs_page_lists_every_metric_and_no_other() -> None:
    _, metrics = _emitted()
    assert _documented("Metrics") == metrics
