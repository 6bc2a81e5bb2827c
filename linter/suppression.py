"""`noqa` comments: per line (`# noqa: PFX001`) and per file (`# prefixkit: noqa`).

A line comment silences findings that start (or end) on that line: a bare
`# noqa` silences every code, `# noqa: PFX001, PFX003` the codes listed. A
file-level comment on a line of its own, `# prefixkit: noqa` or
`# prefixkit: noqa: PFX002`, silences the whole file. Prompt files use the
same words inside `<!-- ... -->` or `{# ... #}` comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .finding import Finding

__all__ = ["Suppressions"]

_CODES = r"(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?"
_LINE = re.compile(r"(?:#|<!--|\{#)\s*noqa" + _CODES, re.IGNORECASE)
_FILE = re.compile(r"^\s*(?:#|<!--|\{#)\s*prefixkit:\s*noqa" + _CODES, re.IGNORECASE | re.MULTILINE)
_ALL: frozenset[str] = frozenset({"*"})


def _codes(match: re.Match[str]) -> frozenset[str]:
    codes = match.group("codes")
    if not codes:
        return _ALL
    return frozenset(code.strip().upper() for code in codes.split(","))


class Suppressions:
    """The noqa comments of one file's text."""

    def __init__(self, text: str) -> None:
        self.file: frozenset[str] = frozenset()
        self.lines: dict[int, frozenset[str]] = {}
        if "noqa" not in text and "NOQA" not in text:
            return
        for match in _FILE.finditer(text):
            self.file |= _codes(match)
        for row, line in enumerate(text.splitlines(), start=1):
            found = _LINE.search(line)
            if found is not None:
                self.lines[row] = _codes(found)

    def _silences(self, codes: frozenset[str], code: str) -> bool:
        return "*" in codes or code in codes

    def allows(self, finding: Finding) -> bool:
        """Whether `finding` survives the file's suppressions."""
        if self._silences(self.file, finding.code):
            return False
        for row in {finding.start.row, finding.end.row}:
            if self._silences(self.lines.get(row, frozenset()), finding.code):
                return False
        return True

    def filter(self, findings: Iterable[Finding]) -> list[Finding]:
        """The findings no comment silences."""
        return [finding for finding in findings if self.allows(finding)]
