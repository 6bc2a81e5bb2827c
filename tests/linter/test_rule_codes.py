from __future__ import annotations

from prefixkit.linter import RULE_CODES
from prefixkit.linter.rules import ALL_RULES


def test_rule_codes_are_the_codes_of_all_rules_in_order() -> None:
    assert tuple(rule.code for rule in ALL_RULES) == RULE_CODES
