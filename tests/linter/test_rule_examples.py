"""Every rule's VALID and INVALID examples, run through the real linter."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.linter import LintConfig, lint_source
from prefixkit.linter.lint_file import lint_file
from prefixkit.linter.rule import Invalid, Rule, Valid
from prefixkit.linter.rules import ALL_RULES

VALID = [
    pytest.param(rule, example, id=f"{rule.code}-valid-{n}")
    for rule in ALL_RULES
    for n, example in enumerate(rule.VALID)
]
INVALID = [
    pytest.param(rule, example, id=f"{rule.code}-invalid-{n}")
    for rule in ALL_RULES
    for n, example in enumerate(rule.INVALID)
]
FIXES = [
    pytest.param(rule, example, id=f"{rule.code}-fix-{n}")
    for rule in ALL_RULES
    for n, example in enumerate(rule.INVALID)
    if example.expected_fix is not None
]


def _project(tmp_path: Path, rule: type[Rule], example: Valid | Invalid) -> tuple[Path, LintConfig]:
    for name, content in example.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    path = tmp_path / example.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(example.code.encode("utf-8"))
    return path, LintConfig(root=tmp_path, select=(rule.code,))


@pytest.mark.parametrize(("rule", "example"), VALID)
def test_valid_example_is_not_reported(tmp_path: Path, rule: type[Rule], example: Valid) -> None:
    path, config = _project(tmp_path, rule, example)
    assert lint_source(example.code, path, config) == []


@pytest.mark.parametrize(("rule", "example"), INVALID)
def test_invalid_example_is_reported(tmp_path: Path, rule: type[Rule], example: Invalid) -> None:
    path, config = _project(tmp_path, rule, example)
    findings = lint_source(example.code, path, config)
    assert findings, f"{rule.code} missed:\n{example.code}"
    assert {finding.code for finding in findings} == {rule.code}
    if example.line is not None:
        assert example.line in {finding.start.row for finding in findings}


@pytest.mark.parametrize(("rule", "example"), FIXES)
def test_fix_gives_expected_code_and_is_idempotent(
    tmp_path: Path, rule: type[Rule], example: Invalid
) -> None:
    # every fix a rule offers, safe or unsafe (test_fix_safety covers which --fix applies)
    path, config = _project(tmp_path, rule, example)
    outcome = lint_file(path, config, fix=True, unsafe_fixes=True)
    assert path.read_text(encoding="utf-8") == example.expected_fix
    assert outcome.fixed >= 1
    assert outcome.findings == []
    again = lint_file(path, config, fix=True, unsafe_fixes=True)
    assert again.fixed == 0
    assert path.read_text(encoding="utf-8") == example.expected_fix


def test_every_rule_has_valid_and_invalid_examples() -> None:
    for rule in ALL_RULES:
        assert rule.VALID and rule.INVALID, rule.code


def test_rule_codes_and_names_are_unique() -> None:
    assert len({rule.code for rule in ALL_RULES}) == len(ALL_RULES)
    assert len({rule.name for rule in ALL_RULES}) == len(ALL_RULES)
