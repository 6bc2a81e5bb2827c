"""docs/rules.md is generated from the rule docstrings and agrees with the rule list."""

from __future__ import annotations

import re
from pathlib import Path

from prefixkit.linter.docs import render_rules_doc
from prefixkit.linter.rules import ALL_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_rules_page_is_up_to_date() -> None:
    assert DOCS.read_text(encoding="utf-8") == render_rules_doc(), (
        "docs/rules.md is stale: run `python -m prefixkit.linter.docs`"
    )


def test_rules_page_lists_exactly_the_rules() -> None:
    documented = re.findall(r"^## (PFX\d{3}) `([a-z-]+)`$", DOCS.read_text(encoding="utf-8"), re.M)
    assert documented == [(rule.code, rule.name) for rule in ALL_RULES]


def test_every_rule_docstring_has_the_required_sections() -> None:
    for rule in ALL_RULES:
        doc = rule.__doc__ or ""
        for section in ("## Why it breaks caching", "## Example", "## Use instead"):
            assert section in doc, f"{rule.code} lacks {section!r}"
