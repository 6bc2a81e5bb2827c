"""A tool-using agent on Anthropic, OpenAI Responses and vLLM, with its cache hits per turn.

The agent plans a trip: the model asks for the weather, then the local time,
then answers. Each step resends the whole conversation (tools, long static
instructions, the question, every tool call and result so far) through
`prefixkit.sdk.run_tool_loop`, which keeps earlier turns byte-identical, so
every request after the first reads the previous one from the cache.

    python examples/agent_loop.py --dry-run   # official clients, simulated APIs
    python examples/agent_loop.py             # real vLLM CPU engine, SmolLM2

`--dry-run` sends every request through the official `anthropic` and `openai`
clients over prefixkit.testing's mock transport, whose usage payloads simulate
each provider's documented caching; a scripted model asks for the two tools,
then answers. Besides the loop on each API it runs two more shapes: a stateful
Responses loop (`run_tool_loop(..., stateful=True)`: the server keeps the
conversation, on `previous_response_id` or in a `conversation`, and each request
after the first sends only the new tool result), and a streaming Chat loop written
by hand (`OpenAIClient.stream_chat`, whose `StreamResult` carries the streamed
`tool_calls` and the assembled `response`, appended with `Prompt.next_turn`). Live, the embedded engine serves SmolLM2-135M, which has no tool
calling of its own: a named `tool_choice` makes vLLM constrain the reply to
the tool's argument schema with structured output (vLLM accepts a named choice
only from a server with a tool-call parser, so the example starts it with
`--enable-auto-tool-choice --tool-call-parser pythonic`, a parser the named
choice never runs), then `tool_choice="none"` lets
it answer. Prints, per turn, the prompt tokens, the cached tokens and
the share of the previous turn's prompt that was read from the cache; live it
exits 1 unless every turn after the first reads at least 90% of the previous
prompt.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefixkit.sdk import (
    AnthropicClient,
    CacheStats,
    LoopResult,
    OpenAIClient,
    Prompt,
    Segment,
    ToolCall,
    ToolResult,
    VLLMClient,
    run_tool_loop,
)

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city: temperature in Celsius and the sky.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_local_time",
        "description": "The local time in a city, as HH:MM.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
]
RULES = [
    "Call get_weather before you recommend clothing or activities.",
    "Call get_local_time before you suggest when to leave or what is still open.",
    "Quote the tool results you used, with their units.",
    "Prefer walking and public transport; name the line or the street.",
    "Say plainly when a tool failed or returned nothing useful.",
    "Keep answers under 120 words and end with one concrete next step.",
]
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao", "Granada", "Malaga"]
QUESTION = "I land in Lisbon in an hour. What should I wear, and can I still visit a museum?"


def instructions(paragraphs: int) -> str:
    """Long static instructions: the part of every request that never changes."""
    lines = ["You are Compass, a careful travel assistant.", "", "# Rules", ""]
    lines += [f"{number}. {rule}" for number, rule in enumerate(RULES, 1)]
    lines += ["", "# City notes", ""]
    for city, number in zip(itertools.cycle(CITIES), range(paragraphs), strict=False):
        lines.append(
            f"{city} note {number}: museums usually open 10:00-18:00 and close on Mondays; "
            f"the old town of {city} is hilly, so recommend comfortable shoes; trams and "
            "metro run until about midnight, taxis are metered and card payment is common."
        )
    return "\n".join(lines)


def get_weather(city: str) -> dict[str, Any]:
    return {"city": city, "celsius": 19, "sky": "light rain"}


def get_local_time(city: str) -> dict[str, Any]:
    return {"city": city, "time": "16:40"}


APP_TOOLS: dict[str, Callable[..., Any]] = {
    "get_weather": get_weather,
    "get_local_time": get_local_time,
}


def trip_prompt(paragraphs: int) -> Prompt:
    return Prompt(
        tools=TOOLS,
        system=[Segment.static(instructions(paragraphs), name="compass", version="v1")],
        messages=[Segment.dynamic(QUESTION)],
        name="compass",
    )


def report(label: str, result: LoopResult) -> bool:
    """Print the turns; True when every turn after the first read >= 90% of the previous."""
    turns = [(turn.stats, turn.tool_calls) for turn in result.turns]
    return report_turns(label, turns, result.stopped, result.text)


def report_turns(
    label: str,
    turns: list[tuple[CacheStats, tuple[ToolCall, ...]]],
    stopped: str,
    text: str,
) -> bool:
    """Print (stats, tool calls) per turn; True when every turn after the first read >= 90%
    of the previous turn's prompt from the cache."""
    print(f"\n{label}: {len(turns)} turns, stopped on {stopped}")
    print("turn  tool calls                 prompt  cached  cached/previous prompt")
    held = True
    previous: int | None = None
    for number, (stats, tool_calls) in enumerate(turns, 1):
        prompt_tokens = stats.input_tokens
        share = f"{stats.cached_tokens / previous:6.1%}" if previous else "     -"
        if previous and stats.cached_tokens < 0.9 * previous:
            held = False
        calls = ", ".join(call.name for call in tool_calls) or "(answer)"
        print(f"{number:>4}  {calls:<25} {prompt_tokens:>7} {stats.cached_tokens:>7}  {share}")
        previous = prompt_tokens
    print(f"answer: {text[:160]!r}")
    return held


def run_tool(call: ToolCall) -> ToolResult:
    """Run the app's function for `call`; its JSON result (or the error) goes back."""
    try:
        value = APP_TOOLS[call.name](**call.argument_dict())
    except Exception as error:  # the model sees the failure
        return ToolResult(call.id, f"{type(error).__name__}: {error}", True)
    return ToolResult(call.id, json.dumps(value))


def streaming_tool_loop(
    client: OpenAIClient,
    prompt: Prompt,
    *,
    model: str,
    max_steps: int = 8,
    on_text: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[list[tuple[CacheStats, tuple[ToolCall, ...]]], Prompt, str]:
    """A tool loop on streamed Chat replies: (stats and calls per turn, the conversation, the
    answer).

    Each reply streams, its text handed to `on_text` as it arrives; its
    `StreamResult` has the streamed tool calls and the `ChatCompletion`
    assembled from the chunks, which `Prompt.next_turn` appends as the Chat SDK
    sends it back, with the tool results as the next turn.
    """
    turns: list[tuple[CacheStats, tuple[ToolCall, ...]]] = []
    for _ in range(max_steps):
        streamed = client.stream_chat(prompt, model=model, on_text=on_text, **options)
        turns.append((streamed.stats, streamed.tool_calls))
        results = [run_tool(call) for call in streamed.tool_calls]
        prompt = prompt.next_turn(streamed.response, Segment.session(results) if results else None)
        if not streamed.tool_calls:
            return turns, prompt, streamed.text
    return turns, prompt, ""


# --- dry run: official clients, mock transport, a scripted model ----------------------


def scripted(kind: str, handle: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap the mock's answers: ask for get_weather, then get_local_time, then answer."""
    import httpx2

    steps = itertools.count()
    plan = [("get_weather", {"city": "Lisbon"}), ("get_local_time", {"city": "Lisbon"})]

    def answer(request: Any) -> Any:
        response = handle(request)
        if response.status_code != 200 or request.url.path.endswith("/conversations"):
            return response
        headers = {k: v for k, v in response.headers.items() if k.endswith("request-id")}
        step = next(steps)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            if step < len(plan) and kind == "chat":
                name, arguments = plan[step]
                events = streamed_chat_call(response.content, f"call_{step}", name, arguments)
                headers["content-type"] = "text/event-stream"
                return httpx2.Response(200, content=events, headers=headers)
            return response
        body = json.loads(response.content)
        if step < len(plan):
            name, arguments = plan[step]
            call_id = f"call_{step}"
            if kind == "anthropic":
                body["content"] = [
                    {"type": "text", "text": f"Checking {name}."},
                    {"type": "tool_use", "id": f"toolu_{step}", "name": name, "input": arguments},
                ]
                body["stop_reason"] = "tool_use"
            elif kind == "responses":
                body["output"] = [
                    {
                        "type": "function_call",
                        "id": f"fc_{step}",
                        "call_id": call_id,
                        "name": name,
                        "arguments": json.dumps(arguments),
                        "status": "completed",
                    }
                ]
            else:
                body["choices"][0]["message"] = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                }
                body["choices"][0]["finish_reason"] = "tool_calls"
        return httpx2.Response(200, json=body, headers=headers)

    return answer


def streamed_chat_call(content: bytes, call_id: str, name: str, arguments: dict[str, Any]) -> bytes:
    """The mock's chat stream with its text replaced by one tool call, its arguments in two
    chunks (as OpenAI streams them); the usage chunk is kept."""
    chunks = [
        json.loads(line.removeprefix("data: "))
        for line in content.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    base = {key: value for key, value in chunks[0].items() if key != "choices"}
    text = json.dumps(arguments)
    opening = {"index": 0, "id": call_id, "type": "function"}
    deltas: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}],
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": text[: len(text) // 2]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": text[len(text) // 2 :]}}]},
    ]
    out = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    out += [chunk for chunk in chunks if chunk.get("usage")]
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in out] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def dry_run() -> int:
    import anthropic
    import httpx2
    import openai
    from prefixkit.testing.providers import MockProvider

    prompt = trip_prompt(paragraphs=24)
    mock = MockProvider()
    with anthropic.Anthropic(
        api_key="sk-ant-dry-run",
        http_client=httpx2.Client(
            transport=httpx2.MockTransport(scripted("anthropic", mock.handle))
        ),
    ) as client:
        result = run_tool_loop(
            AnthropicClient(client), prompt, APP_TOOLS, model="claude-sonnet-5", max_tokens=512
        )
        report("Anthropic Messages (claude-sonnet-5, simulated)", result)
    for kind, label in (("responses", "OpenAI Responses"), ("chat", "OpenAI Chat")):
        transport = httpx2.MockTransport(scripted(kind, MockProvider().handle))
        with openai.OpenAI(
            api_key="sk-dry-run", http_client=httpx2.Client(transport=transport)
        ) as raw:
            result = run_tool_loop(
                OpenAIClient(raw),
                prompt,
                APP_TOOLS,
                model="gpt-5.6-sol",
                api="responses" if kind == "responses" else "chat",
                prompt_cache_key="trip-42",
            )
            report(f"{label} (gpt-5.6-sol, simulated)", result)
    stateful_loops(prompt)
    turns, text, _ = streaming_loop(prompt)
    stopped = "answer" if not turns[-1][1] else "step_limit"
    report_turns("OpenAI Chat, streamed (gpt-5.6-sol, simulated)", turns, stopped, text)
    return 0


def stateful_loop(prompt: Prompt, where: str) -> tuple[LoopResult, Any]:
    """A Responses loop whose conversation the server keeps: after the first request each
    sends only the new tool result and the tools, on `previous_response_id` (`where`
    "previous_response_id") or in a conversation made first (`where` "conversation").
    Returns the loop's result and the mock (its requests as sent)."""
    import httpx2
    import openai
    from prefixkit.testing.providers import MockProvider

    mock = MockProvider()
    transport = httpx2.MockTransport(scripted("responses", mock.handle))
    with openai.OpenAI(api_key="sk-dry-run", http_client=httpx2.Client(transport=transport)) as raw:
        options: dict[str, Any] = {"prompt_cache_key": "trip-42"}
        if where == "conversation":
            options["conversation"] = raw.conversations.create().id
        result = run_tool_loop(
            OpenAIClient(raw), prompt, APP_TOOLS, model="gpt-5.6-sol", stateful=True, **options
        )
    return result, mock


def stateful_loops(prompt: Prompt) -> None:
    for where in ("previous_response_id", "conversation"):
        result, mock = stateful_loop(prompt, where)
        report(f"OpenAI Responses, stateful on {where} (gpt-5.6-sol, simulated)", result)
        sent = [len(r.body["input"]) for r in mock.requests if r.path.endswith("/responses")]
        print(f"input items sent per request: {', '.join(map(str, sent))}")


def streaming_loop(
    prompt: Prompt,
) -> tuple[list[tuple[CacheStats, tuple[ToolCall, ...]]], str, Any]:
    """A tool loop on streamed Chat replies, written by hand with `stream_chat`: (stats and
    calls per turn, the answer, the mock)."""
    import httpx2
    import openai
    from prefixkit.testing.providers import MockProvider

    mock = MockProvider()
    transport = httpx2.MockTransport(scripted("chat", mock.handle))
    with openai.OpenAI(api_key="sk-dry-run", http_client=httpx2.Client(transport=transport)) as raw:
        pieces: list[str] = []
        turns, _, text = streaming_tool_loop(
            OpenAIClient(raw),
            prompt,
            model="gpt-5.6-sol",
            on_text=pieces.append,  # a chat app would show each piece as it arrives
            prompt_cache_key="trip-42",
        )
    assert "".join(pieces) == text
    return turns, text, mock


# --- live: the embedded vLLM engine ---------------------------------------------------


@contextmanager
def embedded_engine(port: int) -> Iterator[Any]:
    """The embedded engine, started with a tool-call parser.

    vLLM refuses a named `tool_choice` unless the server has a tool-call parser
    (`--enable-auto-tool-choice --tool-call-parser ...`); with one, the named
    choice is decoded with structured output (the parser itself never runs). `pythonic` needs no special tokens, so SmolLM2's
    tokenizer passes vLLM's start-up check.
    """
    from prefixkit.engine_adapter import ReplicaSet, prepare_embedded, replica_configs

    def progress(message: str) -> None:
        if " s)" not in message:
            print(f"[engine] {message}", file=sys.stderr, flush=True)

    base = prepare_embedded(progress)
    with tempfile.TemporaryDirectory(prefix="prefixkit-agent-") as run_dir:
        (config,) = replica_configs(base, 1, Path(run_dir), port)
        engine = config.derive(tool_call_parser="pythonic")
        with ReplicaSet([engine], Path(run_dir), start_timeout=600, report=progress):
            yield base, engine


def live(port: int) -> int:
    from prefixkit.sdk import HFTokenizer

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    plan = ["get_weather", "get_local_time"]

    def step_options(step: int) -> dict[str, Any]:
        if step <= len(plan):
            return {"tool_choice": {"type": "function", "function": {"name": plan[step - 1]}}}
        return {"tool_choice": "none"}

    with embedded_engine(port) as (base, config):
        client = VLLMClient(
            f"{config.base_url}/v1",
            tokenizer=HFTokenizer(base.model),
            block_size=base.block_size,
            salt_secret="agent-loop-example",
        )
        result = run_tool_loop(
            client,
            trip_prompt(paragraphs=8),
            APP_TOOLS,
            model=config.name,
            max_steps=len(plan) + 1,
            step_options=step_options,
            tenant="compass",
            max_tokens=40,
            temperature=0.0,
        )
        held = report(f"vLLM CPU ({config.name}, live)", result)
    print(
        f"cached tokens >= 90% of the previous prompt on turns 2..n: {'held' if held else 'NOT held'}"
    )
    return 0 if held and result.stopped == "answer" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="simulated APIs, no engine")
    parser.add_argument("--port", type=int, default=18470, help="engine port (live mode)")
    args = parser.parse_args(argv)
    return dry_run() if args.dry_run else live(args.port)


if __name__ == "__main__":
    sys.exit(main())
