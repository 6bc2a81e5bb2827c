"""Against the real CPU engine (vLLM 0.32): the router's in-process prompt tokens and block
hashes are the engine's, for chat (tools, multi-turn, text parts, template kwargs,
generation prompt on and off, a continued final message, developer messages), completions
(text and token ids), Responses and Anthropic Messages.

A property checks the same on bodies a stranger's program could send (any roles in any
order, text with the tokenizer's added tokens, any Unicode text and emoji, text parts,
names, tool calls, tools, the flags and template kwargs): for every body the engine's
``/tokenize`` reads, the router's tokens are the engine's; it may decline (and ask the
engine) only a body with template kwargs. Responses and Messages bodies of any items
(messages, text parts, function calls and their outputs, tool uses and results,
instructions, system blocks, tools), which ``/tokenize`` does not read, are sent for real:
the router counts as many prompt tokens as the engine's usage.

Each request of the corpus is sent for real with a salt of its own, so every full block
of its prompt is new to the engine: the block hashes the engine publishes in its KV events
must be the router's, and the prompt length in its usage the router's token count. Chat
and text completions are also compared token for token with the engine's ``/tokenize``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.kv_events import Stored, decode_batch
from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens
from prefixkit.sdk import event_block_hashes

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict[str, Any]
    # the /tokenize body that asks for the same prompt (None: the route has no such form)
    tokenize: dict[str, Any] | None = None
    # fields the real request needs and that do not change the prompt
    send: dict[str, Any] = field(default_factory=dict)


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _chat(name: str, body: dict[str, Any], **send: Any) -> Case:
    tokenize: dict[str, Any] = {
        k: body[k]
        for k in (
            "messages",
            "tools",
            "chat_template_kwargs",
            "add_generation_prompt",
            "continue_final_message",
            "add_special_tokens",
        )
        if k in body
    }
    return Case(name, "/v1/chat/completions", body, tokenize, {"max_tokens": 1, **send})


def corpus(document: Callable[[int, str], str]) -> list[Case]:
    context = document(120, "prompt-tokens-context")
    question = "Which village lies beside the river, and what is sold at its market?"
    return [
        _chat(
            "chat system and user",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question},
                ]
            },
        ),
        _chat(
            "chat without a system message", {"messages": [{"role": "user", "content": context}]}
        ),
        _chat(
            "chat multi-turn",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": "The village of Elm, with its apple market."},
                    {"role": "user", "content": "And across the bridge?"},
                ]
            },
        ),
        _chat(
            "chat text parts",
            {
                "messages": [
                    {"role": "system", "content": [{"type": "text", "text": context}]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": question},
                            {"type": "text", "text": ""},
                            {"type": "text", "text": "Answer in one line."},
                        ],
                    },
                ]
            },
        ),
        _chat(
            "chat tools and a tool round",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": "What is the weather in Elm?"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '{"city": "Elm"}',
                                },
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "tool_call_id": "call_1",
                        "content": [{"type": "text", "text": "Sunny, 21 degrees."}],
                    },
                    {"role": "user", "content": "Should I take a coat?"},
                ],
                "tools": [WEATHER_TOOL],
            },
            tool_choice="none",
        ),
        _chat(
            "chat without a generation prompt",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question},
                ],
                "add_generation_prompt": False,
            },
        ),
        _chat(
            "chat continuing the final message",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": "The village beside the river is"},
                ],
                "add_generation_prompt": False,
                "continue_final_message": True,
            },
        ),
        _chat(
            "chat template kwargs",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question},
                ],
                "chat_template_kwargs": {"enable_thinking": False, "custom_flag": 3},
            },
        ),
        _chat(
            "chat developer messages",
            {
                "messages": [
                    {"role": "developer", "content": "Answer briefly."},
                    {"role": "user", "content": context},
                    {"role": "developer", "content": "Quote the document."},
                    {"role": "user", "content": question},
                ]
            },
        ),
        _chat(
            "chat with special tokens added",
            {
                "messages": [
                    {"role": "system", "content": context},
                    {"role": "user", "content": question, "name": "reader"},
                ],
                "add_special_tokens": True,
            },
        ),
        Case(
            "completion text",
            "/v1/completions",
            {"prompt": context + "\n" + question},
            {"prompt": context + "\n" + question},
            {"max_tokens": 1},
        ),
        Case(
            "completion text in a list",
            "/v1/completions",
            {"prompt": [context]},
            {"prompt": context},
            {"max_tokens": 1},
        ),
        Case(
            "completion token ids",
            "/v1/completions",
            {"prompt": [100 + (i * 37) % 3000 for i in range(150)]},
            None,
            {"max_tokens": 1},
        ),
        Case(
            "responses text",
            "/v1/responses",
            {"instructions": context, "input": question},
            None,
            {"max_output_tokens": 16},
        ),
        Case(
            "responses items and tools",
            "/v1/responses",
            {
                "instructions": "Answer from the document.",
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": context}]},
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Read.", "annotations": []}],
                    },
                    {
                        "type": "function_call",
                        "call_id": "call_9",
                        "name": "get_weather",
                        "arguments": '{"city": "Elm"}',
                    },
                    {"type": "function_call_output", "call_id": "call_9", "output": "Rain."},
                    {"role": "user", "content": question},
                ],
                "tools": [
                    {
                        "type": "function",
                        "name": "get_weather",
                        "description": "The weather in a city.",
                        "parameters": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
                    }
                ],
            },
            None,
            {"max_output_tokens": 16, "tool_choice": "none"},
        ),
        Case(
            "messages text",
            "/v1/messages",
            {
                "system": context,
                "messages": [
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": "Elm."},
                    {"role": "user", "content": "And its market?"},
                ],
            },
            None,
            {"max_tokens": 1},
        ),
        Case(
            "messages blocks, tools and a tool round",
            "/v1/messages",
            {
                "system": [
                    {"type": "text", "text": "x-anthropic-billing-header: cch=12345"},
                    {"type": "text", "text": context},
                ],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": question}]},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Let me check the weather."},
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "get_weather",
                                "input": {"city": "Elm"},
                            },
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny."},
                            {"type": "text", "text": "Thanks. A coat?"},
                        ],
                    },
                ],
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "The weather in a city.",
                        "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
                    }
                ],
            },
            None,
            {"max_tokens": 1, "tool_choice": {"type": "none"}},
        ),
    ]


def _prompt_length(path: str, answer: dict[str, Any]) -> int:
    usage = answer["usage"]
    if path == "/v1/messages":  # Anthropic's input_tokens leave out what was read or cached
        parts = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        return sum(int(usage.get(part) or 0) for part in parts)
    if path == "/v1/responses":
        return int(usage["input_tokens"])
    return int(usage["prompt_tokens"])


@pytest.fixture(scope="module")
def tokenizer(engine: EmbeddedEngine) -> PromptTokenizer:
    loaded = PromptTokenizer.load(engine.config.model)
    assert isinstance(loaded, PromptTokenizer), loaded
    return loaded


@pytest.fixture
def kv_events(engine: EmbeddedEngine) -> Iterator[zmq.Socket[bytes]]:
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(engine.kv_events_endpoint)
    time.sleep(0.5)  # let the subscription reach the publisher
    yield socket
    socket.close(linger=0)
    context.term()


def _stored_hashes(socket: zmq.Socket[bytes], seconds: float) -> list[int]:
    hashes: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if socket.poll(200):
            _topic, _seq, payload = socket.recv_multipart()
            hashes.extend(
                h for e in decode_batch(payload) if isinstance(e, Stored) for h in e.hashes
            )
    return hashes


def test_every_request_of_the_corpus_is_tokenized_in_process(
    engine: EmbeddedEngine,
    make_document: Callable[[int, str], str],
    tokenizer: PromptTokenizer,
) -> None:
    outcomes = {case.name: tokenizer.tokens(case.path, case.body) for case in corpus(make_document)}
    assert {n: o for n, o in outcomes.items() if not isinstance(o, PromptTokens)} == {}


CASES = [case.name for case in corpus(lambda words, seed: "")]


@pytest.mark.parametrize("name", CASES)
def test_prompt_tokens_and_block_hashes_are_the_engines(
    engine: EmbeddedEngine,
    make_document: Callable[[int, str], str],
    tokenizer: PromptTokenizer,
    kv_events: zmq.Socket[bytes],
    name: str,
) -> None:
    (case,) = [case for case in corpus(make_document) if case.name == name]
    salt = f"prompt-tokens-{uuid.uuid4().hex}"  # every block new to the engine
    ours = tokenizer.tokens(case.path, {**case.body, "cache_salt": salt})
    assert isinstance(ours, PromptTokens), ours
    assert ours.cache_salt == salt
    with httpx.Client(base_url=engine.base_url, timeout=120) as client:
        if case.tokenize is not None:
            tokenized = client.post("/tokenize", json={"model": engine.model, **case.tokenize})
            assert tokenized.status_code == 200, tokenized.text
            assert ours.token_ids == tokenized.json()["tokens"]
        body = {"model": engine.model, **case.body, **case.send, "cache_salt": salt}
        answer = client.post(case.path, json=body)
        assert answer.status_code == 200, answer.text
    published = _stored_hashes(kv_events, 2.0)
    expected = event_block_hashes(
        ours.token_ids,
        engine.block_size,
        algo="sha256_cbor",
        cache_salt=salt,
        seed="vllm-none-hash",  # the engine runs without PYTHONHASHSEED
        vllm="0.32",
    )
    assert _prompt_length(case.path, answer.json()) == len(ours.token_ids)
    assert len(expected) >= 2
    assert [h for h in published if h in set(expected)] == expected


# --- bodies a stranger's program could send ---
_ADDED_TOKENS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>"]
_TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from([*"ab \n\t.,'\u00e9\u4e2d\U0001f600", *_ADDED_TOKENS]), max_size=12
    ).map("".join),
    st.sampled_from(["", " ", "\n", " leading", "trailing ", "{{ x }}", "{% if %}", "null"]),
)
_CONTENT = st.one_of(
    _TEXT,
    st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), min_size=1, max_size=3
    ),
    st.none(),
)
_TOOL_CALL = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["call_1", "call_abc"]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["get_weather", "f"]),
                "arguments": st.sampled_from(['{"city": "Elm"}', "{}", '{"a": [1, 2]}']),
            }
        ),
    }
)


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "user", "assistant", "developer", "tool"]))
    message: dict[str, Any] = {"role": role, "content": draw(_CONTENT)}
    if draw(st.booleans()):
        message["name"] = draw(st.sampled_from(["alice", "bob"]))
    if role == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(st.lists(_TOOL_CALL, min_size=1, max_size=2))
    if role == "tool":
        message["tool_call_id"] = draw(st.sampled_from(["call_1", "call_abc"]))
    return message


_TOOL = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["get_weather", "lookup"]),
                "description": _TEXT,
                "parameters": st.just(WEATHER_TOOL["function"]["parameters"]),  # type: ignore[index]
            }
        ),
    }
)
_MAYBE_FLAG = st.one_of(st.none(), st.booleans())


@st.composite
def _chat_body(draw: st.DrawFn) -> dict[str, Any]:
    optional = {
        "tools": draw(st.one_of(st.none(), st.lists(_TOOL, min_size=1, max_size=2))),
        "add_generation_prompt": draw(_MAYBE_FLAG),
        "continue_final_message": draw(_MAYBE_FLAG),
        "add_special_tokens": draw(_MAYBE_FLAG),
        "chat_template_kwargs": draw(
            st.one_of(
                st.none(),
                st.dictionaries(
                    st.sampled_from(["enable_thinking", "custom", "add_generation_prompt"]),
                    st.one_of(st.booleans(), st.none(), _TEXT),
                    max_size=2,
                ),
            )
        ),
    }
    messages = draw(st.lists(_message(), min_size=1, max_size=5))
    return {"messages": messages, **{k: v for k, v in optional.items() if v is not None}}


_COMPLETION_BODY = st.fixed_dictionaries(
    {
        "prompt": st.one_of(
            _TEXT,
            st.lists(st.integers(0, 49151), min_size=1, max_size=5),
            st.lists(_TEXT, min_size=1, max_size=2),
        )
    },
    optional={"add_special_tokens": st.booleans()},
)


@pytest.fixture(scope="module")
def engine_client(engine: EmbeddedEngine) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=engine.base_url, timeout=60) as client:
        yield client


def _same_tokens_or_declined(
    tokenizer: PromptTokenizer,
    client: httpx.Client,
    model: str,
    path: str,
    body: dict[str, Any],
) -> None:
    """The router's tokens for `body` are the engine's ``/tokenize``, whenever the engine
    reads it; the router may decline only a body with template kwargs."""
    tokenized = client.post("/tokenize", json={"model": model, **body})
    if tokenized.status_code != 200:
        return  # the engine refuses it: whatever the router places, the engine answers 400
    ours = tokenizer.tokens(path, {"model": model, **body})
    if not isinstance(ours, PromptTokens):
        assert "chat_template_kwargs" in body, ours
        return
    assert ours.token_ids == tokenized.json()["tokens"]


_STRANGERS = settings(max_examples=150)


@_STRANGERS
@given(body=_chat_body())
def test_a_strangers_chat_body_gets_the_engines_tokens(
    engine: EmbeddedEngine,
    tokenizer: PromptTokenizer,
    engine_client: httpx.Client,
    body: dict[str, Any],
) -> None:
    _same_tokens_or_declined(tokenizer, engine_client, engine.model, "/v1/chat/completions", body)


@_STRANGERS
@given(body=_COMPLETION_BODY)
def test_a_strangers_completion_body_gets_the_engines_tokens(
    engine: EmbeddedEngine,
    tokenizer: PromptTokenizer,
    engine_client: httpx.Client,
    body: dict[str, Any],
) -> None:
    _same_tokens_or_declined(tokenizer, engine_client, engine.model, "/v1/completions", body)


_INPUT_TEXT = st.fixed_dictionaries({"type": st.just("input_text"), "text": _TEXT})
_OUTPUT_TEXT = st.fixed_dictionaries(
    {"type": st.just("output_text"), "text": _TEXT, "annotations": st.just([])}
)
_TEXT_BLOCK = st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT})


@st.composite
def _responses_item(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["easy", "message", "answer", "call", "output"]))
    if kind == "easy":
        role = draw(st.sampled_from(["user", "system", "developer", "assistant"]))
        return {
            "role": role,
            "content": draw(st.one_of(_TEXT, st.lists(_INPUT_TEXT, min_size=1, max_size=2))),
        }
    if kind == "message":
        role = draw(st.sampled_from(["user", "system", "developer"]))
        return {
            "type": "message",
            "role": role,
            "content": draw(st.lists(_INPUT_TEXT, min_size=1, max_size=2)),
        }
    if kind == "answer":
        content = draw(st.lists(_OUTPUT_TEXT, min_size=1, max_size=2))
        return {"type": "message", "role": "assistant", "content": content}
    if kind == "call":
        arguments = draw(st.sampled_from(['{"city": "Elm"}', "{}"]))
        return {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": arguments,
        }
    return {"type": "function_call_output", "call_id": "call_1", "output": draw(_TEXT)}


@st.composite
def _responses_body(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "input": draw(st.one_of(_TEXT, st.lists(_responses_item(), min_size=1, max_size=4)))
    }
    if draw(st.booleans()):
        body["instructions"] = draw(_TEXT)
    if draw(st.booleans()):
        parameters = WEATHER_TOOL["function"]["parameters"]  # type: ignore[index]
        body["tools"] = [
            {
                "type": "function",
                "name": "get_weather",
                "description": "The weather.",
                "parameters": parameters,
            }
        ]
    return body


@st.composite
def _messages_block(draw: st.DrawFn, role: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "text", "tool"]))
    if kind == "text":
        return draw(_TEXT_BLOCK)
    if role == "assistant":
        return {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "get_weather",
            "input": {"city": draw(_TEXT)},
        }
    result = draw(st.one_of(_TEXT, st.lists(_TEXT_BLOCK, min_size=1, max_size=2)))
    return {"type": "tool_result", "tool_use_id": "toolu_1", "content": result}


@st.composite
def _messages_body(draw: st.DrawFn) -> dict[str, Any]:
    messages = []
    for _ in range(draw(st.integers(1, 4))):
        role = draw(st.sampled_from(["user", "assistant"]))
        content = draw(st.one_of(_TEXT, st.lists(_messages_block(role), min_size=1, max_size=3)))
        messages.append({"role": role, "content": content})
    body: dict[str, Any] = {"messages": messages}
    system = draw(st.one_of(st.none(), _TEXT, st.lists(_TEXT_BLOCK, min_size=1, max_size=2)))
    if system is not None:
        body["system"] = system
    if draw(st.booleans()):
        schema = WEATHER_TOOL["function"]["parameters"]  # type: ignore[index]
        body["tools"] = [
            {"name": "get_weather", "description": "The weather.", "input_schema": schema}
        ]
    return body


def _same_prompt_length(
    tokenizer: PromptTokenizer,
    client: httpx.Client,
    model: str,
    path: str,
    body: dict[str, Any],
    send: dict[str, Any],
) -> None:
    """Whenever the engine answers `body`, the router counts its prompt's tokens."""
    answer = client.post(path, json={"model": model, **body, **send})
    if answer.status_code != 200:
        return  # the engine refuses it
    ours = tokenizer.tokens(path, {"model": model, **body})
    assert isinstance(ours, PromptTokens), ours
    assert len(ours.token_ids) == _prompt_length(path, answer.json())


_SENT_STRANGERS = settings(max_examples=40)  # each one answered for real


@_SENT_STRANGERS
@given(body=_responses_body())
def test_a_strangers_responses_body_gets_the_engines_prompt_length(
    engine: EmbeddedEngine,
    tokenizer: PromptTokenizer,
    engine_client: httpx.Client,
    body: dict[str, Any],
) -> None:
    send = {"max_output_tokens": 16, "tool_choice": "none"}
    _same_prompt_length(tokenizer, engine_client, engine.model, "/v1/responses", body, send)


@_SENT_STRANGERS
@given(body=_messages_body())
def test_a_strangers_messages_body_gets_the_engines_prompt_length(
    engine: EmbeddedEngine,
    tokenizer: PromptTokenizer,
    engine_client: httpx.Client,
    body: dict[str, Any],
) -> None:
    send = {"max_tokens": 1}
    _same_prompt_length(tokenizer, engine_client, engine.model, "/v1/messages", body, send)
