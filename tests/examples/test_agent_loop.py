"""examples/agent_loop.py: the tool loop through the official clients (dry run) and live on
the embedded vLLM engine, each turn reading the previous one from the cache; a stateful
Responses loop and a streamed Chat loop in the dry run."""

from __future__ import annotations

import itertools
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.example_run import run_example

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\s+(\d+)  (\S.*?)\s+(\d+)\s+(\d+)\s+(?:-|([\d.]+)%)$", re.M)


def run(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "examples/agent_loop.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def turns(out: str) -> list[tuple[int, str, int, int]]:
    return [(int(n), calls, int(p), int(c)) for n, calls, p, c, _ in ROW.findall(out)]


def test_dry_run_asks_two_tools_then_answers_reading_each_previous_turn_from_cache() -> None:
    result = run_example(ROOT / "examples" / "agent_loop.py", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    sections = [s for s in result.stdout.split("\n\n") if "turns, stopped" in s]
    # Anthropic, Responses, Chat; Responses stateful on previous_response_id and on a
    # conversation; Chat streamed
    assert len(sections) == 6
    for section in sections:
        rows = turns(section)
        assert [calls.strip() for _, calls, _, _ in rows] == [
            "get_weather",
            "get_local_time",
            "(answer)",
        ], section
        assert rows[0][3] == 0
        for previous, current in itertools.pairwise(rows):
            assert current[3] >= 0.9 * previous[2], section


def example() -> dict[str, Any]:
    """The example's functions, without running it."""
    return runpy.run_path(str(ROOT / "examples" / "agent_loop.py"), run_name="agent_loop")


def unmarked(value: Any) -> Any:
    """`value` without OpenAI's cache breakpoints (they move to the growing end)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def sent(mock: Any, path: str) -> list[dict[str, Any]]:
    return [r.body for r in mock.requests if r.path.endswith(path)]


def test_dry_run_prints_the_stateful_loops_sending_one_new_item_per_request() -> None:
    result = run_example(ROOT / "examples" / "agent_loop.py", "--dry-run")
    assert result.stdout.count("input items sent per request: 2, 1, 1") == 2, result.stdout


@pytest.mark.parametrize("where", ["previous_response_id", "conversation"])
def test_stateful_loop_reads_each_previous_request_from_the_cache(where: str) -> None:
    module = example()
    result, _ = module["stateful_loop"](module["trip_prompt"](24), where)
    assert [[c.name for c in turn.tool_calls] for turn in result.turns] == [
        ["get_weather"],
        ["get_local_time"],
        [],
    ]
    prompts = [turn.stats.input_tokens for turn in result.turns]
    cached = [turn.stats.cached_tokens for turn in result.turns]
    assert cached[0] == 0 and prompts == sorted(prompts)
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.95 * before, (prompts, cached)


@pytest.mark.parametrize("where", ["previous_response_id", "conversation"])
def test_stateful_loop_sends_each_tool_result_with_the_tools_on_the_server_state(
    where: str,
) -> None:
    module = example()
    result, mock = module["stateful_loop"](module["trip_prompt"](24), where)
    bodies = sent(mock, "/responses")
    first, later = bodies[0], bodies[1:]
    expected = [module["get_weather"]("Lisbon"), module["get_local_time"]("Lisbon")]
    assert len(later) == 2
    for number, (body, value) in enumerate(zip(later, expected, strict=True)):
        assert body["tools"] == first["tools"]
        # on models that take prompt_cache_options a result is one text part (markable)
        assert [unmarked(item) for item in body["input"]] == [
            {
                "type": "function_call_output",
                "call_id": f"call_{number}",
                "output": [{"type": "input_text", "text": json.dumps(value)}],
            }
        ]
        if where == "conversation":
            assert body["conversation"] == first["conversation"]
        else:
            assert body["previous_response_id"] == f"resp_mock{number + 1:04d}"
    assert len({body["prompt_cache_key"] for body in bodies}) == 1
    assert result.prompt.render_text().count("16:40") == 1


def test_streamed_loop_reads_each_previous_request_from_the_cache() -> None:
    module = example()
    turns, text, _ = module["streaming_loop"](module["trip_prompt"](24))
    assert [[c.name for c in calls] for _, calls in turns] == [
        ["get_weather"],
        ["get_local_time"],
        [],
    ]
    assert text
    prompts = [stats.input_tokens for stats, _ in turns]
    cached = [stats.cached_tokens for stats, _ in turns]
    assert cached[0] == 0
    for before, now in zip(prompts, cached[1:], strict=False):
        assert now >= 0.95 * before, (prompts, cached)


def test_streamed_loop_sends_each_request_as_a_prefix_of_the_next_with_the_results() -> None:
    module = example()
    _, _, mock = module["streaming_loop"](module["trip_prompt"](24))
    bodies = sent(mock, "/chat/completions")
    assert len(bodies) == 3 and all(body["stream"] for body in bodies)
    for before, after in itertools.pairwise(bodies):
        assert after["tools"] == before["tools"]
        old = [json.dumps(unmarked(m)) for m in before["messages"]]
        new = [json.dumps(unmarked(m)) for m in after["messages"]]
        assert new[: len(old)] == old
    tool_messages = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_0", "call_1"]
    assert "light rain" in json.dumps(tool_messages[0]) and "16:40" in json.dumps(tool_messages[1])
    calls = [m["tool_calls"][0]["function"] for m in bodies[-1]["messages"] if m.get("tool_calls")]
    assert calls == [
        {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
        {"name": "get_local_time", "arguments": '{"city": "Lisbon"}'},
    ]


@pytest.mark.engine
def test_live_engine_reads_at_least_90_percent_of_the_previous_prompt_every_turn() -> None:
    result = run(timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = turns(result.stdout)
    assert len(rows) == 3 and rows[-1][1].strip() == "(answer)", result.stdout
    for previous, current in itertools.pairwise(rows):
        assert current[3] >= 0.9 * previous[2], result.stdout
    assert "2..n: held" in result.stdout
