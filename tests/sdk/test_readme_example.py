"""The README's SDK example runs as written, here against prefixkit.testing's mock of the
Anthropic API, in the example support app's folder (its prompts and prefixkit.lock)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anthropic
import pytest
from prefixkit.sdk import Prompt
from prefixkit.testing.providers import MockProvider

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def sdk_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:sdk -->", 1)[1].split("<!-- /section:sdk -->", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's sdk section has no python example"
    return match.group(1)


def test_readme_sdk_example_runs_and_marks_the_static_and_session_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = MockProvider()
    on_the_mock = api.anthropic_client()
    monkeypatch.setattr(anthropic, "Anthropic", lambda **options: on_the_mock)
    monkeypatch.chdir(ROOT / "examples" / "support_app")
    namespace: dict[str, Any] = {}
    exec(compile(sdk_example(), str(README), "exec"), namespace)
    prompt, follow_up = namespace["prompt"], namespace["follow_up"]
    assert isinstance(prompt, Prompt) and isinstance(follow_up, Prompt)
    body = api.body
    assert [block.get("cache_control") for block in body["system"]] == [
        {"type": "ephemeral", "ttl": "5m"}
    ]
    context, question = body["messages"][0]["content"]
    assert context["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert "cache_control" not in question
    assert follow_up.render_text().startswith(prompt.render_text())
