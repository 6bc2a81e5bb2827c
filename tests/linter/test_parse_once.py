"""A module of the project is parsed once per run, whether it is linted, followed from
another module's import, or both (in either order)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import libcst
import pytest
from prefixkit.linter import LintConfig, lint_paths

from tests.linter.conftest import write

LLM = """\
import anthropic

client = anthropic.Anthropic()


def ask(preamble, question):
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=f"{preamble} Answer from the manual.",
        messages=[{"role": "user", "content": question}],
    )
"""

# linted before b_llm.py: b_llm.py is first parsed as an import, then linted
APP = """\
from datetime import datetime

from app.b_llm import ask


def greet(question, opened):
    return ask(f"Session opened {opened}.", question)


def now_greet(question):
    return ask(f"Session opened {datetime.now()}.", question)
"""

# linted after a_app.py and b_llm.py: both are followed from here after being linted
MAIN = """\
import time

from app.a_app import greet
from app.b_llm import ask


def run(question):
    greet(question, time.time())
    return ask(f"Run at {time.time()}.", question)
"""


def test_each_module_is_parsed_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    files = {
        "a_app.py": APP,
        "b_llm.py": LLM,
        "c_main.py": MAIN,
    }
    paths = [write(root / "app" / name, text) for name, text in files.items()]
    write(root / "app" / "__init__.py", "")
    parses: Counter[str] = Counter()
    parse = libcst.parse_module

    def counted(source: str, *args: object, **kwargs: object) -> libcst.Module:
        parses[source] += 1
        return parse(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(libcst, "parse_module", counted)
    outcomes = lint_paths(paths, LintConfig(root=root))
    found = {(o.path.name, f.code, f.start.row) for o in outcomes for f in o.findings}
    # the imports were followed: each module's own clock, and the ones passed to another's
    assert ("a_app.py", "PFX001", 11) in found
    assert ("c_main.py", "PFX001", 8) in found
    assert ("c_main.py", "PFX001", 9) in found
    assert {text: parses[text] for text in files.values()} == {text: 1 for text in files.values()}
