"""Baselines: fingerprints blind to line numbers, hiding exactly the recorded findings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.linter.baseline import Baseline, BaselineKey, fingerprint
from prefixkit.linter.finding import Finding, Position

CODES = st.sampled_from(["PFX001", "PFX002", "PFX004"])
LINES = st.sampled_from(["x = now()", "  y = {a}", "z = uuid4()", ""])


def found(code: str, row: int, message: str = "m") -> Finding:
    return Finding(code, message, "a.py", Position(row, 1), Position(row, 2))


def key(code: str, line: str, message: str = "m") -> BaselineKey:
    return BaselineKey("a.py", code, fingerprint(line, message))


def test_a_fingerprint_ignores_line_numbers_and_indentation() -> None:
    assert fingerprint("  x = now()", "reaches `system=` (line 12)") == fingerprint(
        "x = now()\n", "reaches `system=` (line 40)"
    )


def test_a_fingerprint_depends_on_the_source_line_and_the_message() -> None:
    assert fingerprint("x = now()", "m") != fingerprint("x = today()", "m")
    assert fingerprint("x = now()", "m") != fingerprint("x = now()", "n")


@given(st.lists(st.tuples(CODES, LINES, st.integers(1, 500)), max_size=20))
def test_a_baseline_of_findings_hides_exactly_those_findings(
    items: list[tuple[str, str, int]],
) -> None:
    findings = [found(code, row) for code, _, row in items]
    keys = [key(code, line) for code, line, _ in items]
    baseline = Baseline.from_json(Baseline.of(keys).to_json())
    assert baseline.hide(findings, keys) == ([], len(findings))


@given(
    st.lists(st.tuples(CODES, LINES, st.integers(1, 500)), max_size=20),
    st.tuples(CODES, LINES),
    st.integers(0, 1000),
)
def test_a_new_finding_survives_and_shifting_rows_resurrects_nothing(
    items: list[tuple[str, str, int]], new: tuple[str, str], shift: int
) -> None:
    baseline = Baseline.of([key(code, line) for code, line, _ in items])
    shifted = [(found(code, row + shift), key(code, line)) for code, line, row in items]
    extra = found(new[0], 1)
    findings = [finding for finding, _ in shifted] + [extra]
    keys = [k for _, k in shifted] + [key(*new)]
    assert baseline.hide(findings, keys) == ([extra], len(items))


def test_duplicates_are_counted() -> None:
    one = key("PFX001", "x = now()")
    baseline = Baseline.of([one, one])
    findings = [found("PFX001", row) for row in (1, 2, 3)]
    assert baseline.hide(findings, [one, one, one]) == ([findings[2]], 2)
    assert json.loads(baseline.to_json())["findings"][0]["count"] == 2


@given(st.lists(st.tuples(CODES, LINES), max_size=12))
def test_the_file_is_sorted_and_stable_whatever_the_order(items: list[tuple[str, str]]) -> None:
    keys = [key(code, line) for code, line in items]
    text = Baseline.of(keys).to_json()
    assert Baseline.of(list(reversed(keys))).to_json() == text
    entries = json.loads(text)["findings"]
    order = [(e["path"], e["code"], e["fingerprint"]) for e in entries]
    assert order == sorted(order)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        ("[]", "not a prefixkit lint baseline"),
        ('{"version": 1, "findings": {}}', '"findings" must be a list'),
        ('{"version": 1, "findings": [{"path": "a.py"}]}', "needs path, code"),
        (
            '{"version": 1, "findings": [{"path": "a", "code": "P", "fingerprint": "f", '
            '"count": 0}]}',
            "count must be a positive integer",
        ),
    ],
)
def test_a_malformed_baseline_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Baseline.from_json(text)
