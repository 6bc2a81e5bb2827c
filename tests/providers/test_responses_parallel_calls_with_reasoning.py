"""A research agent on a reasoning model with zero data retention: Responses with
`store=False`, `include=["reasoning.encrypted_content"]`, `parallel_tool_calls=True` and a
reasoning effort; each turn the model reasons and asks for two tools at once. What such a
user expects from `run_tool_loop`: every output item (the reasoning with its encrypted
content and summary, both calls) goes back exactly as the openai SDK sends it, followed by
both results in call order; the request parameters never change; breakpoints only on what
OpenAI takes one on, at most 4; each request reads the previous one from the cache."""

from __future__ import annotations

import itertools
import json
from typing import Any, cast

import httpx2
import openai
import pytest
from prefixkit.sdk import LoopResult, OpenAIClient, Prompt, Segment, run_tool_loop
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS

MODEL = "gpt-5.6-sol"
REQUEST: dict[str, Any] = {
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
}
TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["query", "year"],
            "additionalProperties": False,
        },
        "strict": True,
    }
    for name, description in (
        ("search_papers", "Search papers by topic and year."),
        ("search_patents", "Search patents by topic and year."),
    )
]
TURNS = 2


def output(step: int) -> list[dict[str, Any]]:
    """Turn `step`: a reasoning item, then both searches at once."""
    year = 2024 + step
    return [
        {
            "type": "reasoning",
            "id": f"rs_{step}",
            "summary": [{"type": "summary_text", "text": f"Compare {year} papers and patents."}],
            "encrypted_content": f"gAAAAB-step-{step}-opaque",
            "status": None,
        },
        *(
            {
                "type": "function_call",
                "id": f"fc_{step}_{n}",
                "call_id": f"call_{step}_{n}",
                "name": tool["name"],
                "arguments": json.dumps({"query": "solid-state batteries", "year": year}),
                "status": "completed",
            }
            for n, tool in enumerate(TOOLS)
        ),
    ]


def handler(mock: MockProvider) -> Any:
    def handle(request: httpx2.Request) -> httpx2.Response:
        answer = mock.handle(request)
        if answer.status_code != 200:
            return answer
        body = json.loads(answer.content)
        sent = json.loads(request.content)
        step = sum(1 for item in sent["input"] if item.get("type") == "reasoning")
        if step < TURNS:
            body["output"] = output(step)
        headers = {"x-request-id": answer.headers["x-request-id"]}
        return httpx2.Response(200, json=body, headers=headers)

    return handle


def search_papers(query: str, year: int) -> list[dict[str, Any]]:
    return [{"title": f"{query} review {year}", "doi": f"10.1000/{year}.001"}]


def search_patents(query: str, year: int) -> list[dict[str, Any]]:
    return [{"title": f"{query} cell stack", "number": f"US{year}0001A1"}]


def research() -> tuple[LoopResult, MockProvider]:
    mock = MockProvider()
    http = openai.DefaultHttpxClient(transport=httpx2.MockTransport(handler(mock)))
    prompt = Prompt(
        tools=TOOLS,
        system=[Segment.static(LONG_INSTRUCTIONS, name="research")],
        messages=[Segment.dynamic("What changed in solid-state batteries since 2024?")],
    )
    with openai.OpenAI(api_key="sk-test", http_client=http, max_retries=0) as raw:
        result = run_tool_loop(
            OpenAIClient(raw),
            prompt,
            {"search_papers": search_papers, "search_patents": search_patents},
            model=MODEL,
            **REQUEST,
        )
    return result, mock


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def bodies(mock: MockProvider) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.body]


def test_the_agent_asks_twice_for_both_searches_then_answers() -> None:
    result, mock = research()
    assert result.stopped == "answer"
    assert [[c.name for c in t.tool_calls] for t in result.turns] == [
        ["search_papers", "search_patents"],
        ["search_papers", "search_patents"],
        [],
    ]
    assert len(bodies(mock)) == TURNS + 1


def test_every_request_keeps_the_zero_retention_and_reasoning_parameters() -> None:
    _, mock = research()
    for body in bodies(mock):
        assert {name: body.get(name) for name in REQUEST} == REQUEST
        assert "previous_response_id" not in body


def test_output_items_go_back_as_the_openai_sdk_sends_them_then_the_results() -> None:
    """The oracle: the official client given the response's output items itself."""
    result, mock = research()
    last = bodies(mock)[-1]["input"]
    oracle = MockProvider()
    with oracle.openai_client() as client:
        for step in range(TURNS):
            items = openai.types.responses.Response.model_validate(
                {
                    "id": "resp",
                    "object": "response",
                    "created_at": 0,
                    "model": MODEL,
                    "output": output(step),
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                }
            ).output
            # output items are accepted as input at run time; the SDK's types list params
            client.responses.create(model=MODEL, input=cast(Any, items), store=False)
    sdk_items = [body["input"] for body in oracle.bodies if body]
    sent = [unmarked(item) for item in last[2:]]  # after the instructions and the question
    for step in range(TURNS):
        turn = sent[step * 5 : step * 5 + 5]
        assert turn[:3] == sdk_items[step]
        assert [(i["type"], i["call_id"]) for i in turn[3:]] == [
            ("function_call_output", f"call_{step}_0"),
            ("function_call_output", f"call_{step}_1"),
        ]
    assert result.turns[-1].text


def test_each_result_reaches_the_request_with_its_call() -> None:
    _, mock = research()
    outputs = [i for i in bodies(mock)[-1]["input"] if i.get("type") == "function_call_output"]
    texts = [json.dumps(unmarked(i["output"])) for i in outputs]
    assert "10.1000/2024.001" in texts[0] and "US20240001A1" in texts[1]
    assert "10.1000/2025.001" in texts[2] and "US20250001A1" in texts[3]


def test_each_request_is_the_previous_one_plus_the_new_turn() -> None:
    _, mock = research()
    for before, after in itertools.pairwise(bodies(mock)):
        assert after["tools"] == before["tools"]
        old = [json.dumps(unmarked(i)) for i in before["input"]]
        assert [json.dumps(unmarked(i)) for i in after["input"]][: len(old)] == old


def test_breakpoints_only_on_inputs_and_results_at_most_four() -> None:
    _, mock = research()
    for body in bodies(mock):
        marked = json.dumps(body).count('"prompt_cache_breakpoint"')
        assert 1 <= marked <= 4
        for item in body["input"]:
            if item.get("type") in ("reasoning", "function_call"):
                assert "prompt_cache_breakpoint" not in json.dumps(item)


def test_each_request_reads_the_previous_one_from_the_cache() -> None:
    result, _ = research()
    prompts = [t.stats.input_tokens for t in result.turns]
    cached = [t.stats.cached_tokens for t in result.turns]
    assert cached[0] == 0
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.9 * before, (prompts, cached)


def test_the_loops_stats_add_up_its_requests() -> None:
    result, _ = research()
    total = result.stats
    assert total.requests == len(result.turns) == TURNS + 1
    assert total.cached_tokens == sum(t.stats.cached_tokens for t in result.turns)
    assert total.input_tokens == sum(t.stats.input_tokens for t in result.turns)
    costs = [t.stats.cost_usd for t in result.turns]
    assert total.cost_usd is not None and all(cost is not None for cost in costs)
    assert total.cost_usd == pytest.approx(sum(cost or 0.0 for cost in costs))
