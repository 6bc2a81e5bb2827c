"""`prefixkit.linter` is the linter's public API: its examples (the package docstring's,
the guide's) run as written, and importing it (or its settings) does not load the parser
or the rules."""

from __future__ import annotations

import doctest
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_docstring_example_runs_as_written() -> None:
    result = doctest.testmod(
        importlib.import_module("prefixkit.linter"), optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0 and result.failed == 0


def test_importing_the_settings_does_not_load_the_parser_or_the_rules() -> None:
    probe = (
        "import sys\n"
        "from prefixkit.linter import RULE_CODES, LintConfig, LintConfigError, load_config\n"
        "load_config(None)\n"
        "heavy = ('libcst', 'prefixkit.linter.rules', 'prefixkit.linter.lint_file')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_guide_example_prints_what_the_guide_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = (ROOT / "docs" / "linter" / "index.md").read_text(encoding="utf-8")
    section = guide.split("## From Python", 1)[1]
    code, shown = re.findall(r"```(?:python|text)\n(.*?)```", section, re.DOTALL)[:2]
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/linter/index.md", "exec"), {})
    assert capsys.readouterr().out == shown
