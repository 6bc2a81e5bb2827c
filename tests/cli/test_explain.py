"""`prefixkit explain A.json B.json`, run as the installed console script on request bodies
recorded by the official clients on the mock (and on hand-written vLLM bodies)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prefixkit.cli.main import main as cli_main
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


def explain_here(first: dict[str, Any], second: dict[str, Any], *options: str) -> tuple[int, str]:
    """`prefixkit explain` run in this process (for property tests): its exit code and output."""
    with tempfile.TemporaryDirectory() as folder:
        a, b = saved(Path(folder), "a.json", first), saved(Path(folder), "b.json", second)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(["explain", str(a), str(b), *options])
    return code, out.getvalue() + err.getvalue()


texts = st.text(min_size=1, max_size=40)
turns = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), max_size=4)


def body_of(api: str, key: str, history: list[tuple[str, str]]) -> dict[str, Any]:
    """A request body of `api` with `history` as its conversation, sent under `key`."""
    items = [{"role": role, "content": text} for role, text in history]
    if api == "responses":
        return {"model": "gpt-5", "instructions": RULES, "input": items, "prompt_cache_key": key}
    if api == "vllm_chat":
        system = {"role": "system", "content": RULES}
        return {"model": "m", "messages": [system, *items], "cache_salt": key}
    system = {"role": "system", "content": RULES}
    return {"model": "gpt-5", "messages": [system, *items], "prompt_cache_key": key}


@given(
    api=st.sampled_from(["chat", "responses", "vllm_chat"]),
    key=texts,
    history=turns,
    appended=turns.filter(bool),
)
@settings(max_examples=40, deadline=None)
def test_appended_turns_under_the_same_key_keep_the_prefix(
    api: str, key: str, history: list[tuple[str, str]], appended: list[tuple[str, str]]
) -> None:
    code, output = explain_here(
        body_of(api, key, history), body_of(api, key, [*history, *appended])
    )
    assert code == 0, output
    assert "keeps the whole prefix" in output


@given(
    api=st.sampled_from(["chat", "responses", "vllm_chat"]),
    keys=st.lists(texts, min_size=2, max_size=2, unique=True),
    history=turns,
    appended=turns,
)
@settings(max_examples=40, deadline=None)
def test_another_cache_key_shares_nothing(
    api: str, keys: list[str], history: list[tuple[str, str]], appended: list[tuple[str, str]]
) -> None:
    first, second = keys
    code, output = explain_here(
        body_of(api, first, history), body_of(api, second, [*history, *appended])
    )
    name = "cache_salt" if api == "vllm_chat" else "prompt_cache_key"
    assert code == 1, output
    assert f"first divergence: {'block 0 (cache_salt)' if api == 'vllm_chat' else name}" in output
    assert "at the very start" in output
    assert "likely cause: cache_key:" in output


def test_the_next_chat_turn_under_the_same_key_keeps_the_prefix(tmp_path: Path) -> None:
    mock = MockProvider()
    question: list[Any] = [
        {"role": "system", "content": RULES},
        {"role": "user", "content": "How much is egress?"},
    ]
    answer: list[Any] = [
        {"role": "assistant", "content": "$0.09/GB."},
        {"role": "user", "content": "And storage?"},
    ]
    with mock.openai_client() as sdk:
        sdk.chat.completions.create(model="gpt-5", messages=question, prompt_cache_key="k")
        sdk.chat.completions.create(
            model="gpt-5", messages=[*question, *answer], prompt_cache_key="k"
        )
    result = explain(
        saved(tmp_path, "a.json", mock.bodies[0]), saved(tmp_path, "b.json", mock.bodies[1])
    )
    assert result.returncode == 0, result.stdout
    assert "keeps the whole prefix" in result.stdout


ANTHROPIC_BODY = {
    "model": "claude-opus-4-1",
    "max_tokens": 16,
    "system": [{"type": "text", "text": RULES}],
    "messages": [{"role": "user", "content": "Hi"}],
}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_anthropic_body_read_as_an_openai_api_is_refused(tmp_path: Path, api: str) -> None:
    other = {**ANTHROPIC_BODY, "system": "Today is Tuesday."}
    first, second = saved(tmp_path, "a.json", ANTHROPIC_BODY), saved(tmp_path, "b.json", other)
    result = explain(first, second, "--api", api)
    assert result.returncode == 2, result.stdout
    assert "has `system`" in result.stderr
    assert "it looks like an Anthropic Messages body: pass --api anthropic" in result.stderr


def test_a_chat_body_read_as_anthropic_is_refused(tmp_path: Path) -> None:
    chat = {"model": "gpt-5", "messages": [{"role": "system", "content": RULES}]}
    result = explain(
        saved(tmp_path, "a.json", chat), saved(tmp_path, "b.json", chat), "--api", "anthropic"
    )
    assert result.returncode == 2, result.stdout
    assert "`messages` with the role system or developer" in result.stderr
    assert "pass --api chat" in result.stderr


def test_an_ambiguous_body_is_read_as_the_api_given(tmp_path: Path) -> None:
    bare = {
        "model": "claude-opus-4-1",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    result = explain(
        saved(tmp_path, "a.json", bare), saved(tmp_path, "b.json", bare), "--api", "anthropic"
    )
    assert result.returncode == 0, result.stderr
    assert "(anthropic)" in result.stdout


def test_a_body_with_the_fields_of_two_apis_is_refused(tmp_path: Path) -> None:
    mixed = {"model": "gpt-5", "input": "Hi", "system": RULES}
    result = explain(saved(tmp_path, "a.json", mixed), saved(tmp_path, "b.json", mixed))
    assert result.returncode == 2, result.stdout
    assert "has `system`, which OpenAI Responses does not have" in result.stderr


def test_another_vllm_salt_on_the_same_token_ids_diverges_at_block_0(tmp_path: Path) -> None:
    first = {"model": "m", "prompt": list(range(64)), "cache_salt": "tenant-a"}
    second = {**first, "cache_salt": "tenant-b"}
    result = explain(
        saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second), "--block-size", "16"
    )
    assert result.returncode == 1, result.stdout
    assert "first divergence: block 0 (cache_salt), at the very start" in result.stdout
    assert "likely cause: cache_key:" in result.stdout


def record_openai(api: str, options: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The bodies the official OpenAI client sends for the same prompt with each `options`."""
    mock = MockProvider()
    with mock.openai_client() as sdk:
        for extra in options:
            if api == "chat":
                messages: Any = [
                    {"role": "system", "content": RULES},
                    {"role": "user", "content": "Hi"},
                ]
                sdk.chat.completions.create(model="gpt-5", messages=messages, **extra)
            else:
                sdk.responses.create(model="gpt-5", instructions=RULES, input="Hi", **extra)
    return mock.bodies


@pytest.mark.parametrize(
    ("api", "label", "first", "second"),
    [
        ("chat", "reasoning_effort", {}, {"reasoning_effort": "high"}),
        ("chat", "response_format", {}, {"response_format": {"type": "json_object"}}),
        ("chat", "verbosity", {"verbosity": "low"}, {"verbosity": "high"}),
        ("chat", "service_tier", {}, {"service_tier": "flex"}),
        (
            "responses",
            "reasoning.effort",
            {"reasoning": {"effort": "low"}},
            {"reasoning": {"effort": "high"}},
        ),
        ("responses", "text.format", {}, {"text": {"format": {"type": "json_object"}}}),
        (
            "responses",
            "text.verbosity",
            {"text": {"verbosity": "low"}},
            {"text": {"verbosity": "high"}},
        ),
        ("responses", "service_tier", {"service_tier": "priority"}, {}),
    ],
)
def test_a_changed_openai_setting_is_a_divergence_at_the_start(
    tmp_path: Path, api: str, label: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    bodies = record_openai(api, [first, second])
    result = explain(saved(tmp_path, "a.json", bodies[0]), saved(tmp_path, "b.json", bodies[1]))
    assert result.returncode == 1, result.stdout
    assert f"first divergence: the setting {label}, at the very start" in result.stdout
    assert "likely cause: settings:" in result.stdout


@pytest.mark.parametrize(
    ("setting", "value", "where"),
    [
        ("tool_choice", {"type": "any"}, "part 2 of the anthropic prefix (system[0]) on"),
        (
            "thinking",
            {"type": "enabled", "budget_tokens": 2048},
            "part 3 of the anthropic prefix (messages[0] (user)) on",
        ),
    ],
)
def test_a_changed_anthropic_setting_breaks_the_cache_where_anthropic_says(
    tmp_path: Path, setting: str, value: dict[str, Any], where: str
) -> None:
    mock = MockProvider()
    with mock.anthropic_client() as sdk:
        for extra in ({}, {setting: value}):
            request: dict[str, Any] = {
                "model": "claude-opus-4-1",
                "max_tokens": 4096,
                "tools": [SEARCH],
                "system": RULES,
                "messages": [{"role": "user", "content": "Hi"}],
                **extra,
            }
            sdk.messages.create(**request)
    result = explain(
        saved(tmp_path, "a.json", mock.bodies[0]), saved(tmp_path, "b.json", mock.bodies[1])
    )
    assert result.returncode == 1, result.stdout
    assert (
        f"first divergence: the setting {setting}, which breaks the cache from {where}"
        in result.stdout
    )
    assert "likely cause: settings:" in result.stdout


def test_a_changed_model_is_a_divergence_at_the_start(tmp_path: Path) -> None:
    bodies = record_openai("chat", [{}, {}])
    other = {**(bodies[1] or {}), "model": "gpt-5-mini"}
    result = explain(saved(tmp_path, "a.json", bodies[0]), saved(tmp_path, "b.json", other))
    assert result.returncode == 1, result.stdout
    assert "first divergence: model, part 0" in result.stdout


def test_huge_bodies_give_a_short_diff(tmp_path: Path) -> None:
    text = "S " * 1_000_000
    first = {**ANTHROPIC_BODY, "system": text}
    second = {**ANTHROPIC_BODY, "system": text[:1_500_000] + "T" + text[1_500_001:]}
    result = explain(saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second))
    assert result.returncode == 1, result.stdout
    assert len(result.stdout) < 2_000
    assert "(2000000 characters, first difference at character 1500000)" in result.stdout
    added = next(
        line
        for line in result.stdout.splitlines()
        if line.startswith("+S") or line.startswith("+…")
    )
    assert " S T S " in added


@given(
    shared=st.integers(min_value=0, max_value=5_000),
    tail=st.integers(min_value=1, max_value=5_000),
    old=st.characters(codec="utf-8"),
    new=st.characters(codec="utf-8"),
)
@settings(max_examples=30, deadline=None)
def test_every_diff_line_shows_the_first_difference_and_stays_short(
    shared: int, tail: int, old: str, new: str
) -> None:
    assume(old != new and "\n" not in old + new and old.isprintable() and new.isprintable())
    base = "x" * shared
    first = {**ANTHROPIC_BODY, "system": base + old + "y" * tail}
    second = {**ANTHROPIC_BODY, "system": base + new + "y" * tail}
    code, output = explain_here(first, second)
    assert code == 1, output
    lines = output.splitlines()
    assert all(len(line) <= 220 for line in lines), max(map(len, lines))
    removed = next(line for line in lines if line.startswith("-") and not line.startswith("---"))
    added = next(line for line in lines if line.startswith("+") and not line.startswith("+++"))
    assert old in removed
    assert new in added


def test_an_appended_tool_is_named(tmp_path: Path) -> None:
    fetch_too = {**ANTHROPIC_BODY, "tools": [SEARCH, FETCH]}
    result = explain(
        saved(tmp_path, "a.json", {**ANTHROPIC_BODY, "tools": [SEARCH]}),
        saved(tmp_path, "b.json", fetch_too),
    )
    assert result.returncode == 1, result.stdout
    assert "first divergence: tools[1] fetch, part 2 of the anthropic prefix" in result.stdout
    assert "likely cause: tools:" in result.stdout
    assert '+ "name": "fetch",' in result.stdout
    assert RULES[:20] not in result.stdout


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (ANTHROPIC_BODY, {**ANTHROPIC_BODY, "messages": [{"role": "user", "content": "Hello"}]}),
        (
            {"model": "gpt-5", "instructions": RULES, "input": "Hi"},
            {"model": "gpt-5", "instructions": RULES, "input": "Hello"},
        ),
    ],
)
def test_only_the_latest_turn_differs(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any]
) -> None:
    result = explain(saved(tmp_path, "a.json", first), saved(tmp_path, "b.json", second))
    assert result.returncode == 0, result.stdout
    assert "the latest turn differs" in result.stdout
    assert "not a cache breaker" in result.stdout
    assert "keeps the whole prefix of" in result.stdout


def test_a_rewritten_turn_followed_by_new_ones_is_a_divergence(tmp_path: Path) -> None:
    rewritten = {
        **ANTHROPIC_BODY,
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi!"},
            {"role": "user", "content": "Prices?"},
        ],
    }
    result = explain(
        saved(tmp_path, "a.json", ANTHROPIC_BODY), saved(tmp_path, "b.json", rewritten)
    )
    assert result.returncode == 1, result.stdout
    assert "first divergence: messages[0] (user)" in result.stdout
    assert "likely cause: messages:" in result.stdout


def test_bodies_of_two_apis_are_named_with_their_article(tmp_path: Path) -> None:
    chat = saved(tmp_path, "chat.json", {"model": "m", "messages": []})
    anthropic = saved(tmp_path, "anthropic.json", ANTHROPIC_BODY)
    result = explain(anthropic, chat)
    assert result.returncode == 2
    assert "is an Anthropic Messages body and" in result.stderr
    assert "an OpenAI Chat Completions body: compare two requests of the same API" in result.stderr
