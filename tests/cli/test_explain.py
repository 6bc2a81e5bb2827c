"""`prefixkit explain A.json B.json`, run as the installed console script on request bodies
recorded by the official clients on the mock (and on hand-written vLLM bodies)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prefixkit.sdk import AnthropicClient, OpenAIClient, Prompt, Segment
from prefixkit.testing.providers import MockProvider

PREFIXKIT = Path(sys.executable).parent / "prefixkit"
RULES = "Answer from the price list only and show the arithmetic. " * 120
SEARCH = {"name": "search", "description": "Search the docs.", "input_schema": {"type": "object"}}
FETCH = {"name": "fetch", "description": "Fetch a page.", "input_schema": {"type": "object"}}


def explain(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PREFIXKIT), "explain", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def saved(folder: Path, name: str, body: dict[str, Any] | None) -> Path:
    path = folder / name
    path.write_text(json.dumps(body))
    return path


def support(day: str, tools: list[dict[str, Any]] | None = None) -> Prompt:
    return Prompt(
        tools=tools,
        system=[Segment.static(RULES), Segment.static(f"Today is {day}.", name="date")],
        messages=[Segment.dynamic("How much is egress?")],
        name="support",
        sort_tools=False,
    )


def test_a_changed_system_prompt_is_the_first_divergence(tmp_path: Path) -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        client = AnthropicClient(sdk)
        for day in ("Monday", "Tuesday"):
            client.create(support(day), model="claude-opus-4-1", max_tokens=16)
    result = explain(
        saved(tmp_path, "a.json", mock.bodies[0]), saved(tmp_path, "b.json", mock.bodies[1])
    )
    assert result.returncode == 1, result.stderr
    assert "first divergence: system[1], part 2 of the anthropic prefix" in result.stdout
    assert "likely cause: system:" in result.stdout
    assert '- "text": "Today is Monday."' in result.stdout
    assert '+ "text": "Today is Tuesday."' in result.stdout


def test_tools_in_another_order_are_named(tmp_path: Path) -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk)
        client.chat(support("Monday", [SEARCH, FETCH]), model="gpt-5", prompt_cache_key="k")
        client.chat(support("Monday", [FETCH, SEARCH]), model="gpt-5", prompt_cache_key="k")
    result = explain(
        saved(tmp_path, "a.json", mock.bodies[0]), saved(tmp_path, "b.json", mock.bodies[1])
    )
    assert result.returncode == 1, result.stderr
    assert "first divergence: tools[0] search" in result.stdout
    assert "likely cause: tools_order:" in result.stdout


def test_a_model_switch_on_responses_is_named(tmp_path: Path) -> None:
    mock = MockProvider()
    with mock.openai_client() as sdk:
        client = OpenAIClient(sdk)
        for model in ("gpt-5.6-sol", "gpt-5.6-terra"):
            client.responses(support("Monday"), model=model)
    result = explain(
        saved(tmp_path, "a.json", mock.bodies[0]), saved(tmp_path, "b.json", mock.bodies[1])
    )
    assert result.returncode == 1, result.stderr
    assert "first divergence: model" in result.stdout
    assert "likely cause: model:" in result.stdout


def test_the_next_turn_keeps_the_whole_prefix(tmp_path: Path) -> None:
    turn = [{"role": "user", "content": "How much is egress?"}]
    first = {"model": "claude-opus-4-1", "max_tokens": 16, "system": RULES, "messages": turn}
    second = {
        **first,
        "messages": [
            *turn,
            {"role": "assistant", "content": "$0.09/GB."},
            {"role": "user", "content": "And storage?"},
        ],
    }
    result = explain(saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second))
    assert result.returncode == 0, result.stdout
    assert "keeps the whole prefix" in result.stdout


def test_cache_markers_are_not_a_divergence(tmp_path: Path) -> None:
    block = {"type": "text", "text": RULES}
    first = {"model": "m", "max_tokens": 8, "system": [block], "messages": []}
    marked = {**block, "cache_control": {"type": "ephemeral"}}
    second = {**first, "system": [marked]}
    result = explain(saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second))
    assert result.returncode == 0, result.stdout


def test_vllm_token_ids_name_the_first_differing_block(tmp_path: Path) -> None:
    first = {"model": "m", "prompt": list(range(40))}
    second = {"model": "m", "prompt": [*range(21), 999, *range(22, 40)]}
    result = explain(
        saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second), "--block-size", "8"
    )
    assert result.returncode == 1, result.stderr
    assert "first divergence: block 2 (token 21)" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a request body is a JSON object, not list"),
        ('{"model": "m", "temperature": 0}', "not a request body prefixkit knows"),
    ],
)
def test_a_body_that_cannot_be_read_exits_2(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = saved(tmp_path, "good.json", {"model": "m", "input": "hi"})
    result = explain(good, bad)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = explain(tmp_path / "nowhere.json", tmp_path / "b.json")
    assert result.returncode == 2
    assert "nowhere.json: cannot read the file" in result.stderr


def test_bodies_of_two_apis_exit_2(tmp_path: Path) -> None:
    chat = saved(tmp_path, "chat.json", {"model": "m", "messages": []})
    responses = saved(tmp_path, "responses.json", {"model": "m", "input": "hi"})
    result = explain(chat, responses)
    assert result.returncode == 2
    assert "compare two requests of the same API" in result.stderr
