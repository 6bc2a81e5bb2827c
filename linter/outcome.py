"""What linting one file produced (`FileOutcome`), fresh or from the re-lint cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .finding import Finding

__all__ = ["FileOutcome"]


@dataclass
class FileOutcome:
    """What linting one file produced: its `findings` (sorted), or why it has none.

    `kind` is `python`, `notebook`, `prompt` or `other`; `lines` its lines of code;
    `fixed` how many fixes `fix` applied; `skipped` a short reason the file was not
    linted (`binary`, `not UTF-8`, ...) with the full `note`; `error` what stopped its
    linting, `internal` when that is the linter's own failure; `cached` when the result
    came from the re-lint cache.
    """

    path: Path
    findings: list[Finding] = field(default_factory=list)
    kind: str = "python"
    lines: int = 0
    fixed: int = 0
    note: str | None = None
    skipped: str | None = None  # why the file was not linted (short: "binary", ...)
    error: str | None = None
    internal: bool = False  # the error is the linter's own failure, not the project's
    digest: str | None = None  # sha256 of the content the findings are for
    dependencies: dict[str, str | None] = field(default_factory=dict)
    cached: bool = False
