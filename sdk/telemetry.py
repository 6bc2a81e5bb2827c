"""OpenTelemetry for the SDK clients' requests (the `otel` extra).

`instrument()` turns it on for the process: from then on every request an SDK
client sends (`AnthropicClient.create`, `OpenAIClient.stream_chat`, ... sync and
async, streamed or not) is one CLIENT span named ``"{operation} {model}"``,
as the OpenTelemetry GenAI semantic conventions describe an inference call,
child of the span current when the call was made. When the reply arrives the
span carries the GenAI usage attributes (`gen_ai.usage.input_tokens`,
`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`,
...) read from the request's `CacheStats`, and prefixkit's own (`prefixkit.prompt.name`,
`prefixkit.prompt.version`, `prefixkit.cache.hit_ratio`, `prefixkit.cache.miss.reason`).
Metrics go to the meter: the conventions' `gen_ai.client.token.usage` and
`gen_ai.client.operation.duration` histograms, and counters of the prompt tokens
read from the cache, written to it and sent in all, per prompt name and version.

Until `instrument()` is called (and after `uninstrument()`) a client method does
what it did before, behind one check of a module variable: prefixkit imports nothing
from OpenTelemetry and nothing is measured. The clients' methods are marked with
`traced`, the one hook, in `clients.py`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .cache_stats import CacheStats
from .extras import require_extra
from .hit_rate import prompt_identity
from .prompt import Prompt

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.trace import Span, SpanKind, Tracer, TracerProvider

__all__ = ["instrument", "traced", "uninstrument"]

P = ParamSpec("P")
R = TypeVar("R")

INSTRUMENTATION_SCOPE = "prefixkit"
"""The name of prefixkit's tracer and meter."""

# The GenAI conventions' names (opentelemetry-semantic-conventions spells them the same;
# tests/sdk/test_telemetry_conventions.py checks)
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the name before gen_ai.provider.name, still read by many tools
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
PROMPT_NAME_CONVENTION = "gen_ai.prompt.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
# what the GenAI conventions call CACHE_CREATION_TOKENS since they moved to their own
# repository (the semantic-conventions package has no constant for it yet); the anthropic
# SDK's own spans use it: both names are set
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_write.input_tokens"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
TOKEN_USAGE_METRIC = "gen_ai.client.token.usage"
DURATION_METRIC = "gen_ai.client.operation.duration"

# prefixkit's own
PROMPT_NAME = "prefixkit.prompt.name"
PROMPT_VERSION = "prefixkit.prompt.version"
HIT_RATIO = "prefixkit.cache.hit_ratio"
REPORTED = "prefixkit.cache.reported"
STREAMED = "prefixkit.request.streamed"
MISS_REASON = "prefixkit.cache.miss.reason"
MISS_SOURCE = "prefixkit.cache.miss.source"
MISSED_TOKENS = "prefixkit.cache.miss.tokens"
MISS_SEGMENT = "prefixkit.cache.miss.segment"
INPUT_TOKENS_METRIC = "prefixkit.usage.input_tokens"
CACHE_READ_METRIC = "prefixkit.usage.cache_read.input_tokens"
CACHE_CREATION_METRIC = "prefixkit.usage.cache_creation.input_tokens"
REQUESTS_METRIC = "prefixkit.requests"

# the bucket boundaries the conventions advise for their two histograms
_TOKEN_BUCKETS = [4.0**n for n in range(14)]  # 1, 4, 16, ... 67,108,864
_DURATION_BUCKETS = [0.01 * 2.0**n for n in range(14)]  # 0.01 s ... 81.92 s


@dataclass(frozen=True)
class _Instruments:
    """What `instrument()` made: the tracer, the meter's instruments, the span kind."""

    tracer: Tracer
    client_kind: SpanKind
    token_usage: Histogram
    duration: Histogram
    input_tokens: Counter
    cache_read: Counter
    cache_creation: Counter
    requests: Counter


_active: _Instruments | None = None


def _version() -> str:
    try:
        return importlib.metadata.version("prefixkit")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0"


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    """Trace and measure every request the SDK clients send, from now on.

    Spans go to `tracer_provider` and metrics to `meter_provider`, each by
    default the one set globally (`opentelemetry.trace.set_tracer_provider`,
    `opentelemetry.metrics.set_meter_provider`, or by an agent such as
    `opentelemetry-instrument`). Calling it again replaces the providers;
    `uninstrument()` turns it off. Raises `MissingExtraError` naming the `otel`
    extra when OpenTelemetry is not installed.
    """
    global _active
    require_extra("otel", "prefixkit.sdk.instrument", "opentelemetry")
    from opentelemetry import metrics, trace

    version = _version()
    tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, version, tracer_provider=tracer_provider)
    meter = metrics.get_meter(INSTRUMENTATION_SCOPE, version, meter_provider=meter_provider)
    _active = _Instruments(
        tracer=tracer,
        client_kind=trace.SpanKind.CLIENT,
        token_usage=meter.create_histogram(
            TOKEN_USAGE_METRIC,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        ),
        duration=meter.create_histogram(
            DURATION_METRIC,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        ),
        input_tokens=meter.create_counter(
            INPUT_TOKENS_METRIC,
            unit="{token}",
            description="Prompt tokens sent: read from the cache, written to it and neither.",
        ),
        cache_read=meter.create_counter(
            CACHE_READ_METRIC, unit="{token}", description="Prompt tokens read from the cache."
        ),
        cache_creation=meter.create_counter(
            CACHE_CREATION_METRIC, unit="{token}", description="Prompt tokens written to the cache."
        ),
        requests=meter.create_counter(
            REQUESTS_METRIC,
            unit="{request}",
            description="Requests sent, with the reason of their cache miss when one is known.",
        ),
    )


def uninstrument() -> None:
    """Stop tracing and measuring the SDK clients' requests (`instrument()` undone)."""
    global _active
    _active = None


def _server(client: Any) -> dict[str, str | int]:
    """`server.address` and `server.port` of an official client's base URL."""
    url = getattr(client, "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    if port is None:  # the scheme's own (httpx leaves it out of the URL)
        port = {"https": 443, "http": 80}.get(str(getattr(url, "scheme", "")))
    attributes: dict[str, str | int] = {}
    if isinstance(host, str) and host:
        attributes[SERVER_ADDRESS] = host
    if isinstance(port, int):
        attributes[SERVER_PORT] = port
    return attributes


def _outcome(result: Any) -> tuple[Any, CacheStats, float | None] | None:
    """(response, stats, time to first chunk) of what a client method returned."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], CacheStats):
        return result[0], result[1], None
    stats = getattr(result, "stats", None)
    if isinstance(stats, CacheStats):  # a StreamResult
        return getattr(result, "response", None), stats, getattr(result, "ttft_seconds", None)
    return None


def _usage_attributes(stats: CacheStats) -> dict[str, Any]:
    """The span attributes of a request's `CacheStats`."""
    attributes: dict[str, Any] = {
        INPUT_TOKENS: stats.input_tokens,
        OUTPUT_TOKENS: stats.output_tokens,
        REPORTED: stats.reported,
    }
    if stats.reported:  # else the cache counters are unknown, not 0
        attributes[CACHE_READ_TOKENS] = stats.cached_tokens
        attributes[CACHE_CREATION_TOKENS] = stats.written_tokens
        attributes[CACHE_WRITE_TOKENS] = stats.written_tokens
    if stats.hit_ratio is not None:
        attributes[HIT_RATIO] = stats.hit_ratio
    miss = stats.miss
    if miss is not None:
        attributes[MISS_REASON] = str(miss.reason)
        attributes[MISS_SOURCE] = miss.source
        if miss.missed_tokens is not None:
            attributes[MISSED_TOKENS] = miss.missed_tokens
        if miss.segment is not None:
            attributes[MISS_SEGMENT] = miss.segment
    return attributes


class _Request:
    """One traced request: its span, made current while the client method runs, and the
    duration, token and cache metrics recorded when it ends."""

    def __init__(
        self,
        instruments: _Instruments,
        provider: str,
        operation: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> None:
        self.instruments = instruments
        prompt = args[1] if len(args) > 1 else kwargs.get("prompt")
        model = kwargs.get("model")
        common: dict[str, Any] = {OPERATION: operation, PROVIDER: provider}
        if isinstance(model, str):
            common[REQUEST_MODEL] = model
        if isinstance(prompt, Prompt):
            name, version = prompt_identity(prompt)
            if name is not None:
                common[PROMPT_NAME] = name
            if version is not None:
                common[PROMPT_VERSION] = version
        server = _server(getattr(args[0], "client", None)) if args else {}
        self.metric_attributes: dict[str, Any] = {**common, **server}
        self.span_attributes: dict[str, Any] = {**self.metric_attributes, SYSTEM: provider}
        if PROMPT_NAME in common:
            self.span_attributes[PROMPT_NAME_CONVENTION] = common[PROMPT_NAME]
        self.span_name = f"{operation} {model}" if isinstance(model, str) else operation
        self.start = 0.0
        self.scope: AbstractContextManager[Span] | None = None
        self.span: Span | None = None

    def __enter__(self) -> _Request:
        self.scope = self.instruments.tracer.start_as_current_span(
            self.span_name, kind=self.instruments.client_kind, attributes=self.span_attributes
        )
        self.span = self.scope.__enter__()
        self.start = time.perf_counter()
        return self

    def finish(self, result: Any) -> None:
        """Put the reply's usage on the span and count its tokens."""
        outcome = _outcome(result)
        if outcome is None or self.span is None:
            return
        response, stats, first_chunk = outcome
        attributes = _usage_attributes(stats)
        attributes[STREAMED] = not isinstance(result, tuple)  # a StreamResult
        response_id = getattr(response, "id", None)
        response_model = getattr(response, "model", None)
        if isinstance(response_id, str):
            attributes[RESPONSE_ID] = response_id
        if isinstance(response_model, str):
            attributes[RESPONSE_MODEL] = response_model
        if first_chunk is not None:
            attributes[TIME_TO_FIRST_CHUNK] = first_chunk
        self.span.set_attributes(attributes)
        self._count(stats, response_model if isinstance(response_model, str) else None)

    def _count(self, stats: CacheStats, response_model: str | None) -> None:
        instruments, common = self.instruments, dict(self.metric_attributes)
        if response_model is not None:
            common[RESPONSE_MODEL] = response_model
        instruments.token_usage.record(stats.input_tokens, {**common, TOKEN_TYPE: "input"})
        instruments.token_usage.record(stats.output_tokens, {**common, TOKEN_TYPE: "output"})
        instruments.input_tokens.add(stats.input_tokens, {**common, REPORTED: stats.reported})
        if stats.reported:
            instruments.cache_read.add(stats.cached_tokens, common)
            instruments.cache_creation.add(stats.written_tokens, common)
        reason = {MISS_REASON: str(stats.miss.reason)} if stats.miss is not None else {}
        instruments.requests.add(1, {**common, **reason})

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        seconds = time.perf_counter() - self.start
        attributes = self.metric_attributes
        if kind is not None and self.span is not None:
            error_type = kind.__qualname__
            self.span.set_attribute(ERROR_TYPE, error_type)
            attributes = {**attributes, ERROR_TYPE: error_type}
        self.instruments.duration.record(seconds, attributes)
        if self.scope is not None:  # records the exception and the error status
            self.scope.__exit__(kind, error, traceback)


def traced(provider: str, operation: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a client method (sync or async) as one GenAI request to `provider`.

    `provider` is the `gen_ai.provider.name` (``"anthropic"``, ``"openai"``,
    ``"vllm"``), `operation` the `gen_ai.operation.name` (``"chat"``,
    ``"text_completion"``). The method takes the `Prompt` first and `model=`,
    and returns ``(response, CacheStats)`` or a `StreamResult`. While
    `instrument()` is off the mark costs one check per call.
    """

    def mark(method: Callable[P, R]) -> Callable[P, R]:
        if inspect.iscoroutinefunction(method):
            coroutine = cast(Callable[..., Any], method)

            @functools.wraps(method)
            async def traced_coroutine(*args: Any, **kwargs: Any) -> Any:
                instruments = _active
                if instruments is None:
                    return await coroutine(*args, **kwargs)
                with _Request(instruments, provider, operation, args, kwargs) as request:
                    result = await coroutine(*args, **kwargs)
                    request.finish(result)
                return result

            return cast(Callable[P, R], traced_coroutine)

        @functools.wraps(method)
        def traced_method(*args: P.args, **kwargs: P.kwargs) -> R:
            instruments = _active
            if instruments is None:
                return method(*args, **kwargs)
            with _Request(instruments, provider, operation, args, kwargs) as request:
                result = method(*args, **kwargs)
                request.finish(result)
            return result

        return traced_method

    return mark
