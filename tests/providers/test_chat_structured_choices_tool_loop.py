"""A refund-triage agent on Chat Completions with structured output: a strict json_schema
`response_format` (its reasoning field first, as written) beside tools; after the tool turn
the app samples `n=3` decisions with `logprobs`, keeps the most likely one, appends that
choice's message and asks a follow-up, answered through `chat.completions.parse` with a
pydantic model. What such a user expects: the schema goes out in the order written and
byte-identical on every request, the chosen choice goes back as the openai SDK sends its
own message (no logprobs, no `parsed`), each request is the previous one plus the new turn,
and each reads the previous one from the cache."""

from __future__ import annotations

import itertools
import json
from typing import Any, Literal, cast

import httpx2
import openai
from prefixkit.sdk import CacheStats, Prompt, Segment, ToolResult, render_openai_chat
from prefixkit.testing.providers import MockProvider
from pydantic import BaseModel

from .prompts import LONG_INSTRUCTIONS

MODEL = "gpt-5.6-sol"
SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "refund_decision",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "decision": {"type": "string", "enum": ["refund", "deny", "escalate"]},
                "amount": {"type": "number"},
            },
            "required": ["reasoning", "decision", "amount"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_charges",
            "description": "The customer's charges in a month.",
            "parameters": {
                "type": "object",
                "properties": {"customer": {"type": "string"}, "month": {"type": "string"}},
                "required": ["customer", "month"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]


class Decision(BaseModel):
    reasoning: str
    decision: Literal["refund", "deny", "escalate"]
    amount: float


def decision(n: int) -> str:
    return json.dumps(
        {
            "reasoning": f"Charge {n} repeats INV-7 on the same day.",
            "decision": ["refund", "escalate", "deny"][n % 3],
            "amount": 42.0 - n,
        }
    )


def choice(index: int, content: str, mean: float) -> dict[str, Any]:
    tokens = content.split(" ")
    return {
        "index": index,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": content, "refusal": None},
        "logprobs": {
            "content": [
                {"token": t, "logprob": mean, "bytes": list(t.encode()), "top_logprobs": []}
                for t in tokens
            ],
            "refusal": None,
        },
    }


def handler(mock: MockProvider) -> Any:
    def handle(request: httpx2.Request) -> httpx2.Response:
        answer = mock.handle(request)
        if answer.status_code != 200:
            return answer
        body = json.loads(answer.content)
        sent = json.loads(request.content)
        step = sum(1 for m in sent["messages"] if m["role"] == "assistant")
        if step == 0:
            call = {
                "id": "call_charges",
                "type": "function",
                "function": {
                    "name": "lookup_charges",
                    "arguments": '{"customer": "C-88", "month": "2026-10"}',
                },
            }
            message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
            body["choices"] = [{"index": 0, "finish_reason": "tool_calls", "message": message}]
        elif step == 1:  # n candidates; the second is the most likely
            means = [-0.9, -0.1, -0.5][: sent.get("n", 1)]
            body["choices"] = [choice(i, decision(i), m) for i, m in enumerate(means)]
        else:
            body["choices"] = [choice(0, decision(7), -0.2)]
        headers = {"x-request-id": answer.headers["x-request-id"]}
        return httpx2.Response(200, json=body, headers=headers)

    return handle


def lookup_charges(customer: str, month: str) -> str:
    return json.dumps([{"invoice": "INV-7", "eur": 42.0, "day": f"{month}-03"}] * 2)


def triage() -> tuple[list[CacheStats], Any, Any, MockProvider]:
    """The app: tool turn, n=3 decisions with logprobs (keep the likeliest), a parsed
    follow-up. Returns the stats per request, the sampled completion, the parsed one."""
    mock = MockProvider()
    http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(handler(mock)))
    prompt = Prompt(
        tools=TOOLS,
        system=[Segment.static(LONG_INSTRUCTIONS, name="triage")],
        messages=[Segment.dynamic("Customer C-88 says October was charged twice. Decide.")],
    )
    stats: list[CacheStats] = []
    with openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0) as client:
        kwargs = render_openai_chat(prompt, model=MODEL, response_format=SCHEMA)
        first = client.chat.completions.create(**kwargs)
        stats.append(CacheStats.from_usage(first.usage, model=MODEL))
        calls = first.choices[0].message.tool_calls or []
        results = [
            ToolResult(call.id, lookup_charges(**json.loads(call.function.arguments)))
            for call in calls
            if call.type == "function"
        ]
        prompt = prompt.next_turn(first, Segment.session(results))
        kwargs = render_openai_chat(
            prompt, model=MODEL, response_format=SCHEMA, n=3, logprobs=True, top_logprobs=2
        )
        sampled = client.chat.completions.create(**kwargs)
        stats.append(CacheStats.from_usage(sampled.usage, model=MODEL))

        def likelihood(c: Any) -> float:
            tokens = c.logprobs.content
            return float(sum(t.logprob for t in tokens) / len(tokens))

        best = max(sampled.choices, key=likelihood)
        prompt = prompt.next_turn(best.message, "Now draft the reply to the customer.")
        kwargs = render_openai_chat(prompt, model=MODEL, response_format=cast(Any, Decision))
        parsed = client.chat.completions.parse(**kwargs)
        stats.append(CacheStats.from_usage(parsed.usage, model=MODEL))
    return stats, sampled, parsed, mock


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.body]


def test_the_schema_goes_out_in_the_order_written_on_the_sampling_requests() -> None:
    _, _, _, mock = triage()
    first, second, _ = bodies(mock)
    for body in (first, second):
        schema = body["response_format"]["json_schema"]["schema"]
        assert list(schema["properties"]) == ["reasoning", "decision", "amount"]
    assert json.dumps(first["response_format"]) == json.dumps(second["response_format"])
    assert list(first["tools"][0]["function"]["parameters"]["properties"]) == ["customer", "month"]


def test_the_parsed_follow_up_sends_the_pydantic_models_schema_in_field_order() -> None:
    _, _, parsed, mock = triage()
    schema = bodies(mock)[-1]["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reasoning", "decision", "amount"]
    assert parsed.choices[0].message.parsed == Decision.model_validate_json(decision(7))


def test_the_likeliest_choice_goes_back_as_the_openai_sdk_sends_its_message() -> None:
    _, sampled, _, mock = triage()
    best = sampled.choices[1]
    oracle = MockProvider()
    with oracle.openai_client() as client:
        client.chat.completions.create(
            model=MODEL, messages=[cast(Any, best.message)], response_format=cast(Any, SCHEMA)
        )
    (sdk_message,) = oracle.body["messages"]
    sent = bodies(mock)[-1]["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"][-1]
    assert unmarked(assistant) == sdk_message
    assert "logprobs" not in json.dumps(assistant) and "parsed" not in assistant


def test_each_request_is_the_previous_one_plus_the_new_turn() -> None:
    _, _, _, mock = triage()
    for before, after in itertools.pairwise(bodies(mock)):
        assert after["tools"] == before["tools"]
        old = [json.dumps(unmarked(m)) for m in before["messages"]]
        assert [json.dumps(unmarked(m)) for m in after["messages"]][: len(old)] == old


def test_the_tool_result_reaches_the_request_after_its_call() -> None:
    _, _, _, mock = triage()
    messages = bodies(mock)[1]["messages"]
    assert messages[-2]["tool_calls"][0]["id"] == "call_charges"
    assert messages[-1]["role"] == "tool" and messages[-1]["tool_call_id"] == "call_charges"
    assert "INV-7" in json.dumps(messages[-1])


def test_sampling_parameters_are_sent_only_on_the_request_that_asked() -> None:
    _, _, _, mock = triage()
    first, second, third = bodies(mock)
    assert (second["n"], second["logprobs"], second["top_logprobs"]) == (3, True, 2)
    assert not {"n", "logprobs", "top_logprobs"} & (set(first) | set(third))


def test_each_request_reads_the_previous_one_from_the_cache() -> None:
    stats, _, _, _ = triage()
    prompts = [s.input_tokens for s in stats]
    cached = [s.cached_tokens for s in stats]
    assert cached[0] == 0
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.9 * before, (prompts, cached)
