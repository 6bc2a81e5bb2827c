"""`prefixkit rule`: a rule's documentation, as on docs/rules.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.linter.rule import Rule
from prefixkit.linter.rules import ALL_RULES

RULES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
PREFIXKIT = Path(sys.executable).parent / "prefixkit"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_a_rule_prints_its_section_of_the_rules_page(
    rule: type[Rule], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rule", rule.code]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## {rule.code} `{rule.name}`\n")
    page = RULES_PAGE.read_text(encoding="utf-8")
    assert f'<a id="{rule.code.lower()}"></a>\n{out}' in page


def test_all_lists_every_code_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines] == [[rule.code, rule.name] for rule in ALL_RULES]


def test_an_unknown_code_exits_two_listing_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rule", "PFX999"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'PFX999'" in err
    assert all(rule.code in err for rule in ALL_RULES)


def test_the_console_script_prints_a_rule() -> None:
    result = subprocess.run(
        [str(PREFIXKIT), "rule", "pfx004"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Iteration order of a `set`" in result.stdout
