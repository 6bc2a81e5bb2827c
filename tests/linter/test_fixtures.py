"""Every rule runs on every fixture, and the findings are compared exactly (as ruff does).

A rule's example corpus lives in `tests/linter/fixtures/<CODE>/`: code (or prompt text)
the rule must report (`*.invalid.*`) and code it must leave alone (`*.valid.*`), each
beside what the whole linter finds there. A fixture is one file
(`04_iterating_a_sorted_set.valid.py`, linted under its own name) or a folder holding a
small project (`02_files_outside_the_prompt_globs.valid/docs/notes.md`, for prompt files
and their lock), in which every Python, notebook and prompt file is linted. Beside it:

- `<fixture>.findings`: every finding of every rule, one per line
  (`path:row:col-row:col: CODE message`, with `[cell N]` in a notebook, and an indented
  `fix (applicability): description` line when a fix is offered); empty when nothing is
  found;
- `<fixture>.fixed.py` (a Python fixture with a fix): the file after
  `prefixkit lint --fix --unsafe-fixes`, which a second run leaves unchanged.

An `invalid` fixture holds a finding of its folder's rule, a `valid` one none of it. The
dot before `valid`/`invalid` also keeps mypy out of the fixtures (it skips module names
with a dot), as `fixtures/ruff.toml` keeps ruff out. After a deliberate change of what a
rule finds or says, rewrite the expected files with
`PREFIXKIT_UPDATE_FIXTURES=1 .venv/bin/pytest tests/linter/test_fixtures.py` and read
the diff.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from prefixkit.linter import Finding, LintConfig
from prefixkit.linter.discovery import file_kind
from prefixkit.linter.lint_file import lint_file
from prefixkit.linter.rule import Rule
from prefixkit.linter.rules import ALL_RULES

FIXTURES = Path(__file__).parent / "fixtures"
UPDATE = os.environ.get("PREFIXKIT_UPDATE_FIXTURES") == "1"
_EXPECTED_SUFFIXES = (".findings", ".fixed.py")
_LINE = re.compile(r"^\S+:\d+:\d+-\d+:\d+:(?: \[cell \d+\])? (PFX\d{3}) ", re.MULTILINE)
_FIXED_LINE = re.compile(_LINE.pattern + r".*\n    fix \(", re.MULTILINE)


def fixtures() -> list[Path]:
    """Every fixture (file or project folder) of every rule, in name order."""
    return sorted(
        path
        for folder in _rule_folders()
        for path in folder.iterdir()
        if not path.name.endswith(_EXPECTED_SUFFIXES)
    )


def _rule_folders() -> list[Path]:
    # not the caches tools leave there (.ruff_cache)
    return [p for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith(".")]


def _expected_path(fixture: Path, suffix: str) -> Path:
    return fixture.parent / f"{fixture.stem if fixture.is_file() else fixture.name}{suffix}"


def copy_fixture(fixture: Path, root: Path) -> list[Path]:
    """The fixture copied into `root`; the files the linter lints, in name order."""
    if fixture.is_file():
        shutil.copyfile(fixture, root / fixture.name)
    else:
        shutil.copytree(fixture, root, dirs_exist_ok=True)
    config = LintConfig(root=root)
    return sorted(p for p in root.rglob("*") if p.is_file() and file_kind(p, config) is not None)


def render(finding: Finding, root: Path) -> str:
    """One finding as a line of a `.findings` file (and its fix, indented)."""
    place = Path(finding.filename).relative_to(root).as_posix()
    cell = f" [cell {finding.cell}]" if finding.cell is not None else ""
    start, end = finding.start, finding.end
    line = (
        f"{place}:{start.row}:{start.column}-{end.row}:{end.column}:{cell} "
        f"{finding.code} {finding.message}"
    )
    if finding.fix is not None:
        line += f"\n    fix ({finding.fix.applicability}): {finding.fix.message}"
    return line


def codes(text: str, fixed: bool = False) -> set[str]:
    """The rule codes of a `.findings` text (with `fixed`, of the findings offering a fix)."""
    pattern = _FIXED_LINE if fixed else _LINE
    return set(pattern.findall(text))


def _findings(root: Path, files: list[Path]) -> str:
    config = LintConfig(root=root)
    lines = [render(f, root) for path in files for f in lint_file(path, config).findings]
    return "".join(f"{line}\n" for line in lines)


def _check(expected: Path, actual: str | None) -> None:
    """Compare with (or, updating, write or delete) an expected file."""
    if UPDATE:
        if actual is None:
            expected.unlink(missing_ok=True)
        else:
            expected.write_text(actual, encoding="utf-8")
        return
    if actual is None:
        assert not expected.exists(), f"{expected.name}: no fix is offered any more"
        return
    assert expected.exists(), (
        f"{expected.name} is missing: write it with PREFIXKIT_UPDATE_FIXTURES=1"
    )
    assert actual == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("fixture", fixtures(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_rule_finds_exactly_the_expected_findings(tmp_path: Path, fixture: Path) -> None:
    files = copy_fixture(fixture, tmp_path)
    _check(_expected_path(fixture, ".findings"), _findings(tmp_path, files))


@pytest.mark.parametrize(
    "fixture",
    [path for path in fixtures() if path.suffix == ".py"],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_fixes_give_the_expected_file_and_are_idempotent(tmp_path: Path, fixture: Path) -> None:
    # every fix offered, safe or unsafe (test_fix_safety covers which --fix applies)
    (path,) = copy_fixture(fixture, tmp_path)
    config = LintConfig(root=tmp_path)
    outcome = lint_file(path, config, fix=True, unsafe_fixes=True)
    fixed = path.read_text(encoding="utf-8")
    _check(_expected_path(fixture, ".fixed.py"), fixed if outcome.fixed else None)
    again = lint_file(path, config, fix=True, unsafe_fixes=True)
    assert again.fixed == 0
    assert path.read_text(encoding="utf-8") == fixed


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_each_rule_has_fixtures_it_reports_and_fixtures_it_leaves_alone(
    rule: type[Rule],
) -> None:
    folder = FIXTURES / rule.code
    counted = {"invalid": 0, "valid": 0}
    for fixture in (p for p in fixtures() if p.parent == folder):
        kind = fixture.name.split(".")[1]
        found = codes(_expected_path(fixture, ".findings").read_text(encoding="utf-8"))
        assert (rule.code in found) == (kind == "invalid"), fixture.name
        counted[kind] += 1
    assert counted["invalid"] and counted["valid"], rule.code


def test_a_rule_offers_fixes_exactly_when_a_fixture_shows_one() -> None:
    shown = set().union(
        *(
            codes(path.read_text(encoding="utf-8"), fixed=True)
            for path in FIXTURES.rglob("*.findings")
        )
    )
    assert shown == {rule.code for rule in ALL_RULES if rule.fixable()}


def test_every_fixture_folder_is_a_rule() -> None:
    assert {p.name for p in _rule_folders()} == {r.code for r in ALL_RULES}


def test_rule_codes_and_names_are_unique() -> None:
    assert len({rule.code for rule in ALL_RULES}) == len(ALL_RULES)
    assert len({rule.name for rule in ALL_RULES}) == len(ALL_RULES)
