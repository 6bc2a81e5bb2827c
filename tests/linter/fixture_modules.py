"""The rules' fixture modules that parse, for tests that compare the linter's own tree
traversals with libcst's on each of them (`test_walk`, `test_scopes`)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst


def parsed(path: Path) -> cst.Module | None:
    """The module at `path`, or None for code that does not parse (a PFX000 fixture)."""
    try:
        return cst.parse_module(path.read_text(encoding="utf-8"))
    except cst.ParserSyntaxError:
        return None


FIXTURE_MODULES = [
    path
    for path in sorted((Path(__file__).parent / "fixtures").rglob("*.py"))
    if parsed(path) is not None
]
