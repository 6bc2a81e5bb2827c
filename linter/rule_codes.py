"""The codes of every rule, in code order, without importing the rules.

Validating a config's `select`/`ignore` and keying the re-lint cache need only
the codes; the rules themselves (and libcst) are imported when a file must
actually be linted. `tests/linter/test_rule_codes.py` keeps this in step with
`prefixkit.linter.rules.ALL_RULES`.
"""

from __future__ import annotations

__all__ = ["RULE_CODES"]

RULE_CODES: tuple[str, ...] = (
    "PFX000",
    "PFX001",
    "PFX002",
    "PFX003",
    "PFX004",
    "PFX005",
    "PFX006",
    "PFX007",
    "PFX008",
    "PFX101",
    "PFX102",
)
"""The code of every rule, in code order (documented on docs/rules.md)."""
