"""Which lines changed: `git diff` output parsed into changed line sets (no I/O).

`parse_diff` reads the text of `git diff REF` (any context size) and returns, per
file (its path in the new tree, relative to the repository root), the rows that
were added or modified. A file whose lines cannot be told apart (a binary file, a
notebook, an untracked file) counts as wholly changed when it changed at all. `ChangedLines.keep` keeps the
findings whose start row is among the changed rows of their file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .finding import Finding

__all__ = ["ChangedLines", "parse_diff"]

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r"}


@dataclass(frozen=True)
class ChangedLines:
    """Changed rows per file; `whole` holds files that count as changed throughout."""

    rows: dict[str, frozenset[int]] = field(default_factory=dict)
    whole: frozenset[str] = frozenset()

    def with_whole(self, paths: Iterable[str]) -> ChangedLines:
        """These files (untracked ones, say) count as wholly changed too."""
        return ChangedLines(self.rows, self.whole | frozenset(paths))

    def touched(self, path: str) -> bool:
        """Whether any line of `path` changed."""
        return path in self.whole or bool(self.rows.get(path))

    def changed(self, path: str, row: int) -> bool:
        """Whether row `row` (1-based) of `path` was added or modified."""
        return path in self.whole or row in self.rows.get(path, frozenset())

    def keep(self, findings: Sequence[Finding], path_of: Callable[[str], str]) -> list[Finding]:
        """The findings on changed lines; `path_of` maps a finding's filename to the
        path used here. A notebook finding (one with a cell) is kept when its
        notebook changed at all: rows inside cells are not rows of the file."""
        kept = []
        for finding in findings:
            path = path_of(finding.filename)
            if finding.cell is not None:
                if self.touched(path):
                    kept.append(finding)
            elif self.changed(path, finding.start.row):
                kept.append(finding)
        return kept


def _unquote(name: str) -> str:
    """A path as git prints it: C-quoted ("a\\tb", octal bytes) when unusual."""
    if not (name.startswith('"') and name.endswith('"')):
        return name
    out = bytearray()
    body = name[1:-1]
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out += char.encode("utf-8")
            index += 1
            continue
        following = body[index + 1 : index + 2]
        if following.isdigit():
            out.append(int(body[index + 1 : index + 4], 8))
            index += 4
        else:
            out += _ESCAPES.get(following, following).encode("utf-8")
            index += 2
    return out.decode("utf-8", errors="replace")


def _new_path(header: str) -> str | None:
    """The path after `+++ ` (None for a deleted file)."""
    name = _unquote(header[4:].rstrip("\n").split("\t")[0])
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith("b/") else name


def parse_diff(text: str) -> ChangedLines:
    """The added or modified rows of each file in `git diff` output (`text`)."""
    rows: dict[str, set[int]] = {}
    whole: set[str] = set()
    path: str | None = None
    row = 0
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            path, in_hunk = None, False
        elif not in_hunk and line.startswith("+++ "):
            path = _new_path(line)
            if path is not None:
                rows.setdefault(path, set())
                if path.endswith(".ipynb"):
                    whole.add(path)  # rows of the JSON are not rows of the cells
        elif line.startswith("Binary files ") and line.endswith(" differ"):
            new = line[len("Binary files ") : -len(" differ")].rpartition(" and ")[2]
            if new != "/dev/null":
                name = _unquote(new)
                whole.add(name[2:] if name.startswith("b/") else name)
        elif (match := _HUNK.match(line)) is not None:
            row, in_hunk = int(match.group(1)), True
        elif in_hunk and path is not None:
            if line.startswith("+"):
                rows[path].add(row)
                row += 1
            elif line.startswith(" ") or line == "":
                row += 1
            # "-" lines are gone from the new file; "\ No newline..." is a note
    return ChangedLines({name: frozenset(found) for name, found in rows.items()}, frozenset(whole))
