"""A baseline: the findings a project already had, so that only new ones are reported.

Each finding is keyed by its path, its rule and a fingerprint of its source line (with
surrounding whitespace stripped) and its message (with line numbers taken out), never
by its row: an edit elsewhere that shifts lines leaves every key unchanged. A key may
stand for several findings (`count`); a baseline hides at most that many of them.
No I/O here: the caller reads the files and the baseline's text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .finding import Finding

__all__ = ["Baseline", "BaselineKey", "fingerprint"]

_VERSION = 1
_LINE_NUMBER = re.compile(r"\b(lines?|cell) \d+")


@dataclass(frozen=True, order=True)
class BaselineKey:
    """What identifies a finding across edits: path, rule code and fingerprint."""

    path: str
    code: str
    fingerprint: str


def fingerprint(source_line: str, message: str) -> str:
    """A hash of the finding's source line and its message, blind to line numbers."""
    text = source_line.strip() + "\n" + _LINE_NUMBER.sub(r"\1 N", message)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Baseline:
    """How many findings each key stands for."""

    counts: dict[BaselineKey, int]

    @classmethod
    def of(cls, keys: Sequence[BaselineKey]) -> Baseline:
        """The baseline of these findings' keys (a key twice counts twice)."""
        return cls(dict(Counter(keys)))

    def hide(
        self, findings: Sequence[Finding], keys: Sequence[BaselineKey]
    ) -> tuple[list[Finding], int]:
        """The findings not in the baseline and how many it hid; `keys[i]` is the key
        of `findings[i]`. Of several findings with one key, the first `count` are hidden."""
        if len(findings) != len(keys):
            raise ValueError("one key per finding")
        left = Counter(self.counts)
        shown = []
        for finding, key in zip(findings, keys, strict=True):
            if left[key] > 0:
                left[key] -= 1
            else:
                shown.append(finding)
        return shown, len(findings) - len(shown)

    def to_json(self) -> str:
        """The baseline file: JSON sorted by path, code and fingerprint (stable)."""
        entries = [
            {"path": key.path, "code": key.code, "fingerprint": key.fingerprint, "count": count}
            for key, count in sorted(self.counts.items())
        ]
        return json.dumps({"version": _VERSION, "findings": entries}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Baseline:
        """Read a baseline file's text (ValueError saying what is wrong)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError(f'not a prefixkit lint baseline (expected "version": {_VERSION})')
        entries = data.get("findings")
        if not isinstance(entries, list):
            raise ValueError('"findings" must be a list')
        counts: dict[BaselineKey, int] = {}
        for entry in entries:
            try:
                key = BaselineKey(entry["path"], entry["code"], entry["fingerprint"])
                count = entry["count"]
            except (KeyError, TypeError):
                raise ValueError(
                    f"entry {entry!r} needs path, code, fingerprint and count"
                ) from None
            if not all(isinstance(part, str) for part in (key.path, key.code, key.fingerprint)):
                raise ValueError(f"entry {entry!r}: path, code and fingerprint must be strings")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(f"entry {entry!r}: count must be a positive integer")
            counts[key] = counts.get(key, 0) + count
        return cls(counts)
