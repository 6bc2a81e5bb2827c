"""A small project written into a temporary folder and linted file by file, for tests
that follow values across modules and into the files a module reads."""

from __future__ import annotations

from pathlib import Path

from prefixkit.linter import LintConfig
from prefixkit.linter.lint_file import lint_file


def project(tmp_path: Path, files: dict[str, str]) -> dict[str, list[tuple[str, int, str]]]:
    """Lint every Python file of a small project (a git repository) by relative path."""
    (tmp_path / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    config = LintConfig(root=tmp_path)
    return {
        name: [
            (f.code, f.start.row, f.message) for f in lint_file(tmp_path / name, config).findings
        ]
        for name in files
        if name.endswith(".py")
    }


def line_of(source: str, text: str) -> int:
    """The row of the first line holding `text` (where a finding on it starts)."""
    return next(row for row, line in enumerate(source.splitlines(), 1) if text in line)
