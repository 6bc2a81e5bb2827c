"""`prefixkit lsp` on the command line (the server itself: tests/linter/test_lsp.py)."""

from __future__ import annotations

import sys

import pytest
from prefixkit.cli.main import main


def test_help_names_the_transport_and_where_editors_are_set_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["lsp", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--stdio" in out
    assert "docs/linter/index.md" in out


def test_without_pygls_it_exits_2_naming_the_lint_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pygls", None)  # not importable: as if not installed
    assert main(["lsp"]) == 2
    error = capsys.readouterr().err
    assert "prefixkit lsp needs pygls" in error
    assert error.rstrip().endswith("pip install 'prefixkit[lint]'")
