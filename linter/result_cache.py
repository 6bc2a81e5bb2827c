"""The re-lint cache: a file whose inputs did not change is not linted again (as ruff does).

A result is reused when all of these are unchanged:

- the file's content (sha256 of its bytes);
- the files its result depends on (`prefixkit.linter.dependencies`: modules
  whose constants it imports, the prompt lock), re-hashed on every run, a file
  that appeared or disappeared counting as a change;
- the settings: prefixkit's version, the linter's own code (size and
  modification time of its modules), the config (every key, and the folder it
  is relative to) and the rules there are.

The cache lives in `.prefixkit_cache/` at the project root (the config's
folder), with a `.gitignore` of `*` inside so it is never committed, and a
`CACHEDIR.TAG` so backup tools pass it over. One JSON file per settings hash
holds every file's entry; it is written once per run, to a temporary file then
renamed over the old one, so parallel jobs (only the parent process writes)
and concurrent runs never see a half-written cache; the last run to finish
wins, and an unreadable cache counts as empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .config import LintConfig
from .dependencies import content_hash
from .discovery import CACHE_DIR_NAME, Target, relative_to_root
from .finding import Edit, Finding, Fix, Position
from .outcome import FileOutcome
from .rule_codes import RULE_CODES

__all__ = ["ResultCache", "linter_fingerprint"]

_FORMAT = 1
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by prefixkit lint.\n"
)


def linter_fingerprint() -> str:
    """prefixkit's version and the state of the linter's own modules."""
    package = Path(__file__).parent
    parts = [importlib.metadata.version("prefixkit"), str(_FORMAT)]
    for module in sorted(package.rglob("*.py")):
        stat = module.stat()
        parts.append(f"{module.relative_to(package).as_posix()}:{stat.st_size}:{stat.st_mtime_ns}")
    parts += RULE_CODES
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _position(position: Position) -> list[int]:
    return [position.row, position.column]


def _encode(finding: Finding) -> dict[str, Any]:
    fix = None
    if finding.fix is not None:
        fix = {
            "message": finding.fix.message,
            "applicability": finding.fix.applicability,
            "edits": [
                [*_position(edit.start), *_position(edit.end), edit.content]
                for edit in finding.fix.edits
            ],
        }
    return {
        "code": finding.code,
        "message": finding.message,
        "start": _position(finding.start),
        "end": _position(finding.end),
        "cell": finding.cell,
        "fix": fix,
    }


def _decode(item: dict[str, Any], filename: str) -> Finding:
    fix = None
    if item["fix"] is not None:
        edits = tuple(
            Edit(Position(a, b), Position(c, d), content)
            for a, b, c, d, content in item["fix"]["edits"]
        )
        fix = Fix(item["fix"]["message"], edits, item["fix"]["applicability"])
    return Finding(
        item["code"],
        item["message"],
        filename,
        Position(*item["start"]),
        Position(*item["end"]),
        fix,
        cell=item["cell"],
    )


class ResultCache:
    """Cached lint results of one project root under one set of settings."""

    def __init__(self, folder: Path, config: LintConfig, fingerprint: str) -> None:
        self.config = config
        key = hashlib.sha256(f"{fingerprint}\n{config.fingerprint()}".encode()).hexdigest()
        self.folder = folder
        self.path = folder / importlib.metadata.version("prefixkit") / f"{key[:32]}.json"
        self.entries: dict[str, dict[str, Any]] = self._load(self.path)
        self.changed: dict[str, dict[str, Any]] = {}
        self._hashes: dict[str, str | None] = {}
        self.warning: str | None = None

    @classmethod
    def for_config(cls, config: LintConfig) -> ResultCache:
        """The cache at `config.root/.prefixkit_cache`."""
        return cls(config.root / CACHE_DIR_NAME, config, linter_fingerprint())

    @staticmethod
    def _load(path: Path) -> dict[str, dict[str, Any]]:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = document.get("files") if isinstance(document, dict) else None
        return entries if isinstance(entries, dict) else {}

    def _hash(self, path: str) -> str | None:
        if path not in self._hashes:
            self._hashes[path] = content_hash(Path(path))
        return self._hashes[path]

    def _key(self, target: Target) -> str:
        return relative_to_root(target.path, self.config.root)

    def lookup(self, target: Target) -> FileOutcome | None:
        """The cached outcome for `target`, or None when it must be linted."""
        entry = self.entries.get(self._key(target))
        if entry is None or entry.get("kind") != target.kind:
            return None
        digest = self._hash(str(target.path.absolute()))
        if digest is None or entry.get("digest") != digest:
            return None
        dependencies: dict[str, str | None] = entry.get("dependencies", {})
        if any(self._hash(path) != known for path, known in dependencies.items()):
            return None
        try:
            findings = [_decode(item, str(target.path)) for item in entry["findings"]]
        except (KeyError, TypeError, ValueError):
            return None
        return FileOutcome(
            target.path,
            findings,
            kind=target.kind,
            lines=int(entry.get("lines", 0)),
            digest=digest,
            dependencies=dependencies,
            cached=True,
        )

    def store(self, target: Target, outcome: FileOutcome) -> None:
        """Keep a fresh outcome (skipped files and errors are not kept)."""
        if outcome.digest is None or outcome.error or outcome.skipped:
            return
        self.changed[self._key(target)] = {
            "digest": outcome.digest,
            "kind": outcome.kind,
            "lines": outcome.lines,
            "dependencies": outcome.dependencies,
            "findings": [_encode(finding) for finding in outcome.findings],
        }

    def save(self) -> None:
        """Write the new entries (merged over the file as it is now), atomically."""
        if not self.changed:
            return
        try:
            self._prepare_folder()
            entries = {
                key: entry
                for key, entry in self._load(self.path).items()
                if (self.config.root / key).exists()  # files deleted since are dropped
            }
            entries.update(self.changed)
            document = json.dumps({"format": _FORMAT, "files": entries}, sort_keys=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(document)
                os.replace(temporary, self.path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
        except OSError as exc:
            self.warning = f"cannot write the cache in {self.folder}: {exc.strerror or exc}"
            return
        self.entries, self.changed = entries, {}

    def _prepare_folder(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
            marker = self.folder / name
            if not marker.exists():
                marker.write_text(text, encoding="utf-8")
