"""A recording mock of the Anthropic and OpenAI HTTP APIs for the official clients.

`MockProvider` is an `httpx2.MockTransport` handler (anthropic 2.x and openai 3.x
are built on `httpx2`): it records every request and answers like the provider
would, in the shapes the official clients parse, streaming or not:

- Anthropic Messages (`POST /v1/messages`, events `message_start` ... `message_stop`)
  and token counting (`POST /v1/messages/count_tokens`);
- OpenAI Chat Completions (chunks, then a usage chunk when
  `stream_options.include_usage` is set), Responses (`response.created` ...
  `response.completed`) and Completions (the vLLM server's token-id endpoint).

Its methods build ready official clients on it (sync and async; Anthropic,
OpenAI, and OpenAI pointed at a vLLM base URL)::

    mock = MockProvider()
    with mock.anthropic_client() as client:
        client.messages.create(model="claude-sonnet-5", max_tokens=64, system=[...],
                               messages=[...])
    mock.body["system"]                  # the body the client sent
    mock.requests[-1].headers            # and its headers

Usage payloads are simulated from the providers' documented prompt caching
(prefixkit's model table supplies minimum lengths and limits), per mock:

- Anthropic: entries are written at `cache_control` breakpoints (and at the
  last block with a top-level `cache_control`, automatic mode); a read finds
  the longest earlier entry ending within 20 blocks before a breakpoint;
  prefixes under the model's minimum (1024 tokens for a model prefixkit does
  not know) are never cached; a model switch misses; more than 4 breakpoints
  answer HTTP 400 as the API does.
- OpenAI (and vLLM's OpenAI-compatible endpoints): prompts of at least the
  model's minimum (1024 tokens) are cached implicitly per model,
  `prompt_cache_key` and `cache_salt`, hits in 128-token steps; with `prompt_cache_options` set, entries also end exactly
  at `prompt_cache_breakpoint` markers (content parts, and `function_call_output`
  parts at the end of their item), and explicit mode caches only there;
  a `prompt_cache_options.ttl` the API does not take (12h on Chat) answers 400.
- Responses keeps conversations as OpenAI does: a response (unless `store` is false)
  and a conversation (`POST /conversations`) hold their input and output items, and
  a request with `previous_response_id` or `conversation` is read (and cached) as
  those items followed by its own input; an unknown `previous_response_id` answers
  400, an unknown conversation id starts an empty conversation. The items kept
  are the mock's own answers (a handler that rewrites an answer changes what the
  client reads, not what the mock keeps).

Cache diagnostics are answered as the providers document them. Anthropic: a
request with `diagnostics` is remembered by its message id; one naming a
`previous_message_id` gets `diagnostics.cache_miss_reason` at the first
difference from that request (model, then tools, system, messages: earlier
messages must be kept, new ones may follow), with `cache_missed_input_tokens`
the earlier request's prompt tokens; `diagnostics: null` when nothing
diverged, `previous_message_not_found` for an id it does not know. Responses:
every response is remembered; `prompt_cache_options.comparison_response_id`
gets `prompt_cache_diagnostics`: `cache_miss` with the first difference
(`model_changed`, `prompt_cache_key_changed`, `tools_changed`,
`text_format_changed`, `reasoning_effort_changed`, `verbosity_changed`,
`service_tier_changed`, `input_changed`), `cache_hit`, or
`comparison_response_not_found`. Set `anthropic_diagnostics` or
`responses_diagnostics` to answer with that fixed object instead (e.g.
`{"cache_miss_reason": None}`, a comparison still running, or
`{"type": "unavailable"}`).

Set `anthropic_usage`, `chat_usage` or `responses_usage` to answer with that
fixed payload instead (`ANTHROPIC_USAGE`, `CHAT_USAGE` and `RESPONSES_USAGE`
are realistic ones); Completions answer with `chat_usage` (the same shape).

Streams carry the same usage as the answer would. Not simulated: token counts
are cl100k_base estimates of each block or part, with tools as JSON and a role
marker per message, not the providers' tokenizers and chat formats (nor vLLM's
model tokenizer: token-id prompts are counted as sent); no TTL expiry
(`clear_cache` forgets everything); entries exist as soon as an answer is sent
(parallel first requests can hit each other); no invalidation by `tool_choice`,
images or thinking parameters; no Anthropic TTL-order check and no OpenAI
4-write limit; no spill-over between machines; no vLLM block granularity (see
`prefixkit.testing.fake_vllm`). Every reply is the same text (`reply`), never
a tool call. A body the mock
cannot read (not JSON, or a field of the wrong shape) answers HTTP 400 in the
provider's error shape; an unknown path answers 404.

The Anthropic routes are `prefixkit.testing.anthropic_mock`, the OpenAI ones
`prefixkit.testing.openai_mock`, and the reading of request bodies
`prefixkit.testing.mock_bodies`; this module puts them together and records.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import httpx2
import openai

from .anthropic_mock import ANTHROPIC_USAGE, AnthropicMock
from .mock_bodies import Answer, _BadRequest
from .openai_answers import Event, sse
from .openai_mock import CHAT_USAGE, RESPONSES_USAGE, OpenAIMock

__all__ = [
    "ANTHROPIC_USAGE",
    "CHAT_USAGE",
    "DEFAULT_REPLY",
    "RESPONSES_USAGE",
    "MockProvider",
    "RecordedRequest",
]


DEFAULT_REPLY = "Based on the documents: the answer is in section 2 of the price list."


_Provider = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock received it.

    `body` is the JSON object sent, or None when the content was not one
    (the mock answered 400 then).
    """

    method: str
    url: httpx2.URL
    headers: httpx2.Headers
    content: bytes
    body: dict[str, Any] | None

    @property
    def path(self) -> str:
        """The URL path, e.g. `/v1/messages`."""
        return self.url.path


class MockProvider(AnthropicMock, OpenAIMock):
    """A recording mock of the provider APIs; one instance is one provider account.

    Pass `handle` (or the instance itself) to `httpx2.MockTransport`, or use the
    client methods. The `*_usage` payloads, when set, replace the simulated
    usage of that API (attributes: change them between requests if needed);
    `reply` is the assistant text of every answer.
    """

    def __init__(
        self,
        *,
        anthropic_usage: Mapping[str, Any] | None = None,
        chat_usage: Mapping[str, Any] | None = None,
        responses_usage: Mapping[str, Any] | None = None,
        reply: str = DEFAULT_REPLY,
        anthropic_diagnostics: Mapping[str, Any] | None = None,
        responses_diagnostics: Mapping[str, Any] | None = None,
    ) -> None:
        self.anthropic_usage = anthropic_usage
        self.chat_usage = chat_usage
        self.responses_usage = responses_usage
        self.reply = reply
        self.anthropic_diagnostics = anthropic_diagnostics
        self.responses_diagnostics = responses_diagnostics
        self._fingerprints: dict[str, dict[str, Any]] = {}
        self.requests: list[RecordedRequest] = []
        self._anthropic_entries: set[str] = set()
        self._openai_prompts: dict[tuple[str, ...], list[list[int]]] = {}
        self._openai_entries: set[str] = set()
        self._stored_responses: dict[str, list[Any]] = {}
        self._conversation_items: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    @property
    def bodies(self) -> list[dict[str, Any] | None]:
        """The body of every request, in order (None where it was not a JSON object)."""
        return [request.body for request in self.requests]

    @property
    def paths(self) -> list[str]:
        """The path of every request, in order."""
        return [request.path for request in self.requests]

    @property
    def body(self) -> dict[str, Any]:
        """The last request's JSON body."""
        if not self.requests:
            raise LookupError("the mock has received no request yet")
        last = self.requests[-1]
        if last.body is None:
            raise LookupError(f"the last request ({last.method} {last.path}) had no JSON body")
        return last.body

    def clear_cache(self) -> None:
        """Forget every simulated cache entry, as if their TTLs had run out."""
        with self._lock:
            self._anthropic_entries.clear()
            self._openai_prompts.clear()
            self._openai_entries.clear()

    def transport(self) -> httpx2.MockTransport:
        """An `httpx2.MockTransport` answering with this mock."""
        return httpx2.MockTransport(self.handle)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        return self.handle(request)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        """Record `request` and answer it like the provider would."""
        path = request.url.path
        route = next((_ROUTES[r] for r in _ROUTES if path.endswith(r)), None)
        if route is None:  # answer a 404 in the shape of the client that asked
            provider: _Provider = (
                "anthropic" if "anthropic-version" in request.headers else "openai"
            )
        else:
            provider = route[0]
        body, problem = _parse_body(request.content)
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    method=request.method,
                    url=request.url,
                    headers=httpx2.Headers(request.headers),
                    content=request.content,
                    body=body,
                )
            )
            number = len(self.requests)
            if route is None or request.method != "POST":
                return _not_found(provider, request.method, path, number)
            if body is None:
                return _error(provider, 400, problem, None, number)
            try:
                fingerprint = self._fingerprint(path, body)
                payload = route[1](self, body, number)
            except _BadRequest as error:
                return _error(provider, 400, error.message, error.param, number)
            if fingerprint is not None:
                payload = self._diagnose(body, fingerprint, payload)
        headers = _request_id(provider, number)
        if isinstance(payload, list):
            return _sse_response(payload, headers)
        return httpx2.Response(200, json=payload, headers=headers)

    def _fingerprint(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """What a diagnosis compares of a Messages or Responses request (None for others)."""
        if path.endswith("/messages") and isinstance(body.get("diagnostics"), dict):
            return {
                "api": "anthropic",
                "model": body.get("model"),
                "tools": _plain(body.get("tools") or []),
                "system": _plain(body.get("system")),
                "messages": _plain(body.get("messages") or []),
            }
        if not path.endswith("/responses"):
            return None
        history, _ = self._server_history(body)
        given = body.get("input")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        if not isinstance(items, list):  # not a Responses input: the request is refused later
            items = []
        text: dict[str, Any] = body["text"] if isinstance(body.get("text"), dict) else {}
        reasoning: dict[str, Any] = (
            body["reasoning"] if isinstance(body.get("reasoning"), dict) else {}
        )
        return {
            "api": "responses",
            "model": body.get("model"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "tools": _plain(body.get("tools") or []),
            "text_format": text.get("format"),
            "reasoning_effort": reasoning.get("effort"),
            "verbosity": text.get("verbosity"),
            "service_tier": body.get("service_tier") or "auto",
            "items": _plain([body.get("instructions"), *history, *(items or [])]),
        }

    def _diagnose(
        self, body: dict[str, Any], fingerprint: dict[str, Any], payload: Answer
    ) -> Answer:
        """`payload` with the diagnostics the request asked for; its fingerprint remembered."""
        anthropic_api = fingerprint["api"] == "anthropic"
        answer = _answer_object(
            payload, ("message_start",) if anthropic_api else ("response.completed",)
        )
        if answer is None:
            return payload
        usage = answer.get("usage") or {}
        tokens = _prompt_tokens(usage) if anthropic_api else int(usage.get("input_tokens") or 0)
        if anthropic_api:
            previous = body["diagnostics"].get("previous_message_id")
            diagnostics: Any = None
            if self.anthropic_diagnostics is not None:
                diagnostics = copy.deepcopy(dict(self.anthropic_diagnostics))
            elif previous is not None:
                old = self._fingerprints.get(previous)
                if old is None:
                    diagnostics = {"cache_miss_reason": {"type": "previous_message_not_found"}}
                elif (reason := _anthropic_difference(old, fingerprint)) is not None:
                    diagnostics = {
                        "cache_miss_reason": {
                            "type": reason,
                            "cache_missed_input_tokens": old["tokens"],
                        }
                    }
            answer["diagnostics"] = diagnostics
        else:
            options = body.get("prompt_cache_options")
            compared = options.get("comparison_response_id") if isinstance(options, dict) else None
            if self.responses_diagnostics is not None and compared is not None:
                answer["prompt_cache_diagnostics"] = copy.deepcopy(dict(self.responses_diagnostics))
            elif compared is not None:
                old = self._fingerprints.get(compared)
                if old is None:
                    result: dict[str, Any] = {"type": "comparison_response_not_found"}
                elif (reason := _responses_difference(old, fingerprint)) is not None:
                    result = {
                        "type": "cache_miss",
                        "reason": reason,
                        "cache_missed_tokens": _missed(old, fingerprint, reason),
                        "comparison_reusable_tokens": old["tokens"],
                    }
                else:
                    result = {"type": "cache_hit"}
                answer["prompt_cache_diagnostics"] = result
        ident = answer.get("id")
        if isinstance(ident, str):
            self._fingerprints[ident] = {**fingerprint, "tokens": tokens}
        return payload

    def anthropic_client(
        self, *, api_key: str = "sk-ant-test", max_retries: int = 0, **options: Any
    ) -> anthropic.Anthropic:
        """An `anthropic.Anthropic` client on this mock (`options` go to its constructor)."""
        http = anthropic.DefaultHttpxClient(transport=self.transport())
        return anthropic.Anthropic(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def async_anthropic_client(
        self, *, api_key: str = "sk-ant-test", max_retries: int = 0, **options: Any
    ) -> anthropic.AsyncAnthropic:
        """An `anthropic.AsyncAnthropic` client on this mock."""
        http = anthropic.DefaultAsyncHttpxClient(transport=self.transport())
        return anthropic.AsyncAnthropic(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def openai_client(
        self, *, api_key: str = "sk-test", max_retries: int = 0, **options: Any
    ) -> openai.OpenAI:
        """An `openai.OpenAI` client on this mock (`options` go to its constructor)."""
        http = openai.DefaultHttpxClient(transport=self.transport())
        return openai.OpenAI(api_key=api_key, http_client=http, max_retries=max_retries, **options)

    def async_openai_client(
        self, *, api_key: str = "sk-test", max_retries: int = 0, **options: Any
    ) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` client on this mock."""
        http = openai.DefaultAsyncHttpxClient(transport=self.transport())
        return openai.AsyncOpenAI(
            api_key=api_key, http_client=http, max_retries=max_retries, **options
        )

    def vllm_client(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str = "EMPTY",
        max_retries: int = 0,
        **options: Any,
    ) -> openai.OpenAI:
        """An `openai.OpenAI` client for a vLLM server at `base_url`, on this mock."""
        return self.openai_client(
            api_key=api_key, max_retries=max_retries, base_url=base_url, **options
        )

    def async_vllm_client(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str = "EMPTY",
        max_retries: int = 0,
        **options: Any,
    ) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` client for a vLLM server at `base_url`, on this mock."""
        return self.async_openai_client(
            api_key=api_key, max_retries=max_retries, base_url=base_url, **options
        )


def _plain(value: Any) -> Any:
    """`value` without cache markers, which no diagnosis compares."""
    if isinstance(value, dict):
        return {
            k: _plain(v)
            for k, v in value.items()
            if k not in ("cache_control", "prompt_cache_breakpoint")
        }
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _answer_object(payload: Answer, kinds: tuple[str, ...]) -> dict[str, Any] | None:
    """The message or response object of an answer (in its stream, the event that holds it)."""
    if isinstance(payload, dict):
        return payload
    for kind, data in payload:
        if kind in kinds and isinstance(data, dict):
            found = data.get("message", data.get("response"))
            return found if isinstance(found, dict) else None
    return None


def _prompt_tokens(usage: Mapping[str, Any]) -> int:
    return sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def _anthropic_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    for part in ("model", "tools", "system"):
        if old[part] != new[part]:
            return f"{part}_changed"
    if new["messages"][: len(old["messages"])] != old["messages"]:
        return "messages_changed"
    return None


_RESPONSES_SETTINGS = (
    ("model", "model_changed"),
    ("prompt_cache_key", "prompt_cache_key_changed"),
    ("tools", "tools_changed"),
    ("text_format", "text_format_changed"),
    ("reasoning_effort", "reasoning_effort_changed"),
    ("verbosity", "verbosity_changed"),
    ("service_tier", "service_tier_changed"),
)


def _responses_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    for part, reason in _RESPONSES_SETTINGS:
        if old[part] != new[part]:
            return reason
    if new["items"][: len(old["items"])] != old["items"]:
        return "input_changed"
    return None


def _missed(old: dict[str, Any], new: dict[str, Any], reason: str) -> int:
    """The compared response's tokens after the first difference: all of them for a
    setting, the share of its input items after the common ones for `input_changed`."""
    if reason != "input_changed":
        return int(old["tokens"])
    items = [json.dumps(item, sort_keys=True) for item in old["items"]]
    common = 0
    for before, after in zip(old["items"], new["items"], strict=False):
        if before != after:
            break
        common += 1
    total = sum(len(item) for item in items) or 1
    return int(old["tokens"]) * sum(len(item) for item in items[common:]) // total


def _parse_body(content: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        body = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"the request body is not valid JSON ({error}): send a JSON object"
    if not isinstance(body, dict):
        return None, f"the request body must be a JSON object, not {type(body).__name__}"
    return body, ""


def _request_id(provider: _Provider, number: int) -> dict[str, str]:
    name = "request-id" if provider == "anthropic" else "x-request-id"
    return {name: f"req_mock{number:04d}"}


def _sse_response(events: list[Event], headers: dict[str, str]) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={**headers, "content-type": "text/event-stream"},
        content=b"".join(sse(events)),
    )


def _error(
    provider: _Provider, status: int, message: str, param: str | None, number: int
) -> httpx2.Response:
    """An error answer in the provider's shape."""
    kind = (
        "not_found_error" if status == 404 and provider == "anthropic" else "invalid_request_error"
    )
    payload: dict[str, Any]
    if provider == "anthropic":
        payload = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_mock{number:04d}",
        }
    else:
        payload = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return httpx2.Response(status, json=payload, headers=_request_id(provider, number))


def _not_found(provider: _Provider, method: str, path: str, number: int) -> httpx2.Response:
    message = f"Invalid URL ({method} {path}): the mock answers " + ", ".join(
        f"POST .../v1{route}" for route in _ROUTES
    )
    return _error(provider, 404, message, None, number)


# path suffix -> (the provider whose API it is, the method answering it); longest first
_ROUTES: dict[str, tuple[_Provider, Callable[[MockProvider, dict[str, Any], int], Answer]]] = {
    "/messages/count_tokens": ("anthropic", MockProvider._count_tokens),
    "/messages": ("anthropic", MockProvider._messages),
    "/chat/completions": ("openai", MockProvider._chat),
    "/completions": ("openai", MockProvider._completions),
    "/responses": ("openai", MockProvider._responses),
    "/conversations": ("openai", MockProvider._conversations),
}
