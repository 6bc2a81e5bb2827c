"""An async support app on `AsyncAnthropic`: several users' conversations run at once with
`arun_tool_loop`, each turn asking for three slow tools in parallel, the prefix counted
exactly with `AnthropicTokenCounter`. What such a user expects: the tools of one turn run
concurrently (an async tool that awaits I/O does not wait for the one before it), their
results go back in call order, every conversation's requests grow by whole turns from one
shared static prefix, and exact counting costs a few `count_tokens` calls, not one per
request."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from typing import Any

from prefixkit.sdk import (
    AnthropicTokenCounter,
    AsyncAnthropicClient,
    LoopResult,
    Prompt,
    Segment,
    arun_tool_loop,
)
from prefixkit.testing.providers import MockProvider

from .anthropic_tool_answers import ScriptedAnthropic
from .prompts import LONG_INSTRUCTIONS

MODEL = "claude-sonnet-5"
USERS = ["ana", "bo", "chen", "dara", "eli", "fay"]
TOOLS = [
    {
        "name": name,
        "description": f"Look up the customer's {name.removeprefix('get_')}.",
        "input_schema": {
            "type": "object",
            "properties": {"customer": {"type": "string"}},
            "required": ["customer"],
        },
    }
    for name in ("get_orders", "get_tickets", "get_invoices")
]


def script(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Turn 1: the three lookups at once for the user named in the question; then answer."""
    if any(m["role"] == "assistant" for m in body["messages"]):
        return None
    question = body["messages"][0]["content"]
    text = question if isinstance(question, str) else question[0]["text"]
    user = text.split()[-1].rstrip("?")
    return [
        {"type": "text", "text": "Looking that up."},
        *(
            {
                "type": "tool_use",
                "id": f"toolu_{user}_{n}",
                "name": tool["name"],
                "input": {"customer": user},
            }
            for n, tool in enumerate(TOOLS)
        ),
    ]


class Backend:
    """Async tools that await I/O; records how many of one customer's run at once."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.most: Counter[str] = Counter()

    async def call(self, kind: str, customer: str) -> dict[str, Any]:
        self.running[customer] += 1
        self.most[customer] = max(self.most[customer], self.running[customer])
        await asyncio.sleep(0.05)
        self.running[customer] -= 1
        return {"customer": customer, kind: [f"{kind}-{customer}-1"]}

    def tools(self) -> dict[str, Any]:
        async def get_orders(customer: str) -> dict[str, Any]:
            return await self.call("orders", customer)

        async def get_tickets(customer: str) -> dict[str, Any]:
            return await self.call("tickets", customer)

        async def get_invoices(customer: str) -> dict[str, Any]:
            return await self.call("invoices", customer)

        return {"get_orders": get_orders, "get_tickets": get_tickets, "get_invoices": get_invoices}


def prompt(user: str) -> Prompt:
    return Prompt(
        tools=TOOLS,
        system=[Segment.static(LONG_INSTRUCTIONS, name="support")],
        messages=[Segment.dynamic(f"What is going on with the account of {user}?")],
    )


def serve() -> tuple[list[LoopResult], Backend, MockProvider]:
    mock = MockProvider()
    backend = Backend()
    scripted = ScriptedAnthropic(mock, script)

    async def run() -> list[LoopResult]:
        async with scripted.async_client() as raw:
            client = AsyncAnthropicClient(raw)
            counter = AnthropicTokenCounter(MODEL, client=raw)
            return await asyncio.gather(
                *(
                    arun_tool_loop(
                        client,
                        prompt(user),
                        backend.tools(),
                        model=MODEL,
                        max_tokens=1024,
                        tokenizer=counter,
                    )
                    for user in USERS
                )
            )

    return asyncio.run(run()), backend, mock


def conversations(mock: MockProvider) -> dict[str, list[dict[str, Any]]]:
    by_user: dict[str, list[dict[str, Any]]] = {}
    for request in mock.requests:
        if request.path.endswith("/v1/messages") and request.body:
            first = request.body["messages"][0]["content"]
            text = first if isinstance(first, str) else first[0]["text"]
            by_user.setdefault(text.split()[-1].rstrip("?"), []).append(request.body)
    return by_user


def test_every_conversation_ends_on_an_answer_after_one_tool_turn() -> None:
    results, _, _ = serve()
    assert [r.stopped for r in results] == ["answer"] * len(USERS)
    assert all(len(r.turns) == 2 and len(r.turns[0].tool_calls) == 3 for r in results)


def test_the_async_tools_of_one_turn_run_concurrently() -> None:
    _, backend, _ = serve()
    assert dict(backend.most) == dict.fromkeys(USERS, 3)


def test_results_go_back_in_call_order_for_the_right_customer() -> None:
    _, _, mock = serve()
    for user, bodies in conversations(mock).items():
        results = bodies[-1]["messages"][-1]["content"]
        assert [b["tool_use_id"] for b in results] == [f"toolu_{user}_{n}" for n in range(3)]
        kinds = ["orders", "tickets", "invoices"]
        for block, kind in zip(results, kinds, strict=True):
            assert json.loads(block["content"])[kind] == [f"{kind}-{user}-1"]


def test_each_conversation_grows_by_whole_turns_from_one_static_prefix() -> None:
    _, _, mock = serve()
    by_user = conversations(mock)
    assert sorted(by_user) == sorted(USERS)
    heads = {json.dumps([b["tools"], b["system"]]) for bodies in by_user.values() for b in bodies}
    assert len(heads) == 1
    for bodies in by_user.values():
        for before, after in itertools.pairwise(bodies):
            old = [json.dumps({**m, "content": strip(m["content"])}) for m in before["messages"]]
            new = [json.dumps({**m, "content": strip(m["content"])}) for m in after["messages"]]
            assert new[: len(old)] == old


def strip(content: Any) -> Any:
    if isinstance(content, list):
        return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return content


def test_exact_counting_costs_a_few_count_tokens_calls_not_one_per_request() -> None:
    _, _, mock = serve()
    counts = [r for r in mock.requests if r.path.endswith("/count_tokens")]
    sent = [r for r in mock.requests if r.path.endswith("/v1/messages")]
    assert len(sent) == 2 * len(USERS)
    assert len(counts) <= 2, [json.dumps(r.body)[:120] for r in counts]


def test_the_second_turn_of_every_conversation_reads_its_first_from_the_cache() -> None:
    results, _, _ = serve()
    for result in results:
        first, second = result.turns
        assert second.stats.cached_tokens >= 0.9 * first.stats.input_tokens
