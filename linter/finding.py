"""Findings: what a rule reports, where, and the fix it offers (if any).

Positions are 1-based rows and 1-based columns (as ruff prints them); an edit
replaces the text between `start` and `end` (end exclusive) with `content`;
`apply_edits` applies edits to a text.
In a notebook, `cell` is the 1-based number of the cell (among all cells) and
rows count within that cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Edit", "Finding", "Fix", "Position", "apply_edits"]


@dataclass(frozen=True, order=True)
class Position:
    """A place in a file: 1-based row, 1-based column."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text from `start` to `end` with `content` (an insertion when equal)."""

    start: Position
    end: Position
    content: str


@dataclass(frozen=True)
class Fix:
    """A change that removes a finding.

    `safe`: it never changes what a correct program does or sends, so `--fix`
    applies it; `unsafe`: it may (re-ordering a serialised schema, say), so only
    `--fix --unsafe-fixes` applies it.
    """

    message: str
    edits: tuple[Edit, ...]
    applicability: str = "safe"

    def applies(self, unsafe_fixes: bool) -> bool:
        """Whether `--fix` applies this fix (with `--unsafe-fixes` when `unsafe_fixes`)."""
        return self.applicability == "safe" or unsafe_fixes


@dataclass(frozen=True)
class Finding:
    """One violation: a rule code, a message and a span in `filename`."""

    code: str
    message: str
    filename: str
    start: Position
    end: Position
    fix: Fix | None = None
    cell: int | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        """Order by file, cell, position, code (the order every output format uses)."""
        return (self.filename, self.cell or 0, self.start.row, self.start.column, self.code)

    @property
    def location(self) -> str:
        """`file:row:column`, or `file:cell N:row:column` in a notebook."""
        cell = "" if self.cell is None else f"cell {self.cell}:"
        return f"{self.filename}:{cell}{self.start.row}:{self.start.column}"


def _offsets(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with non-overlapping `edits` applied (overlapping ones are skipped)."""
    starts = _offsets(text)

    def offset(row: int, column: int) -> int:
        return starts[row - 1] + column - 1

    spans = sorted(
        ((offset(e.start.row, e.start.column), offset(e.end.row, e.end.column), e) for e in edits),
        key=lambda item: (item[0], item[1]),
    )
    out: list[str] = []
    cursor = 0
    for start, end, edit in spans:
        if start < cursor:
            continue
        out.append(text[cursor:start])
        out.append(edit.content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
