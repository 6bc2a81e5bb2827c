"""The README's SDK example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prefixkit.sdk import Prompt, TiktokenTokenizer, write_lock

README = Path(__file__).parents[2] / "README.md"


def sdk_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:sdk -->", 1)[1].split("<!-- /section:sdk -->", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's sdk section has no python example"
    return match.group(1)


def test_readme_sdk_example_runs(prompt_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_lock(prompt_root)
    monkeypatch.chdir(prompt_root.parent)
    namespace: dict[str, object] = {}
    exec(compile(sdk_example(), str(README), "exec"), namespace)
    prompt = namespace["prompt"]
    assert isinstance(prompt, Prompt)
    assert [s.label for s in prompt.static_segments()][:2] == ["lookup_bucket", "support@v2"]
    assert namespace["static_tokens"] == TiktokenTokenizer().count(prompt.static_prefix_text())
