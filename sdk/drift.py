"""Drift: a prompt file whose canonical hash differs from the one pinned in prefixkit.lock
(or a file without a lock entry, or an entry without a file). The registry finds it, the
linter's PFX102 reports it, `PromptDriftError` carries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["REGENERATE", "Drift", "DriftKind"]

REGENERATE = "review the prompt change, then run `prefixkit lock` and commit prefixkit.lock"
"""How to accept a reviewed prompt change."""

DriftKind = Literal["changed", "unlocked", "removed"]


@dataclass(frozen=True)
class Drift:
    """A prompt whose file and lock disagree.

    `kind` is "changed" (hash differs), "unlocked" (file has no lock entry) or
    "removed" (lock entry without a file). `expected` / `actual` are sha256
    digests (None where there is nothing); `diff` is a unified diff of the
    locked text against the current one ("" when not applicable).
    """

    key: str
    kind: DriftKind
    expected: str | None
    actual: str | None
    diff: str = ""

    @property
    def message(self) -> str:
        """One human-readable paragraph: what drifted and how to fix it."""
        if self.kind == "unlocked":
            return (
                f"prompt {self.key} (sha256 {self.actual}) is not in prefixkit.lock: "
                "run `prefixkit lock` to pin it"
            )
        if self.kind == "removed":
            return (
                f"prefixkit.lock pins {self.key} (sha256 {self.expected}) but its file is gone: "
                "restore the file or run `prefixkit lock` to drop the entry"
            )
        text = (
            f"prompt {self.key} changed since it was locked: expected sha256 {self.expected}, "
            f"got {self.actual}; {REGENERATE}"
        )
        return f"{text}\n{self.diff}" if self.diff else text
