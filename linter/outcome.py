"""What linting one file produced (`FileOutcome`), fresh or from the re-lint cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .finding import Finding

__all__ = ["FileOutcome"]


@dataclass
class FileOutcome:
    """What linting one file produced."""

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
