"""What a run checked: files by kind, files skipped by reason, findings per rule.

Checked 412 files (380 Python, 12 notebooks, 20 prompt files); skipped 3 (2 over 1 MB, 1 Jinja template)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .finding import Finding
from .outcome import FileOutcome

__all__ = ["RunSummary"]

_KIND_NAMES = {
    "python": ("Python", "Python"),
    "notebook": ("notebook", "notebooks"),
    "prompt": ("prompt file", "prompt files"),
}


def _counted(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


@dataclass(frozen=True)
class RunSummary:
    """Counts of one run (a pure summary of the outcomes)."""

    checked: dict[str, int]  # kind -> files linted (or taken from the cache)
    skipped: dict[str, int]  # reason -> files
    cached: int
    lines: int
    findings: dict[str, int]  # code -> findings
    fixable: int

    @classmethod
    def of(cls, outcomes: Sequence[FileOutcome], findings: Sequence[Finding]) -> RunSummary:
        """Count the outcomes of a run and its (suppression-filtered) findings."""
        checked = Counter(o.kind for o in outcomes if o.skipped is None)
        skipped = Counter(o.skipped for o in outcomes if o.skipped is not None)
        return cls(
            checked={kind: checked[kind] for kind in _KIND_NAMES if checked[kind]},
            skipped=dict(sorted(skipped.items(), key=lambda item: (-item[1], item[0]))),
            cached=sum(1 for o in outcomes if o.cached),
            lines=sum(o.lines for o in outcomes),
            findings=dict(sorted(Counter(f.code for f in findings).items())),
            fixable=sum(1 for f in findings if f.fix is not None),
        )

    def line(self) -> str:
        """One sentence: what was checked and what was skipped, and why."""
        total = sum(self.checked.values())
        kinds = ", ".join(
            _counted(count, *_KIND_NAMES[kind]) for kind, count in self.checked.items()
        )
        text = f"Checked {_counted(total, 'file', 'files')}" + (f" ({kinds})" if kinds else "")
        if self.skipped:
            reasons = ", ".join(f"{count} {reason}" for reason, count in self.skipped.items())
            text += f"; skipped {sum(self.skipped.values())} ({reasons})"
        if self.cached:
            text += f"; {self.cached} unchanged since the last run (cached)"
        return text

    def as_json(self) -> dict[str, Any]:
        """The counts as a JSON object."""
        return {
            "checked": {"total": sum(self.checked.values()), **self.checked},
            "skipped": {"total": sum(self.skipped.values()), **self.skipped},
            "cached": self.cached,
            "lines": self.lines,
            "findings": {"total": sum(self.findings.values()), **self.findings},
            "fixable": self.fixable,
        }
