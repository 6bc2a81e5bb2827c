"""Files a lint result depends on besides the linted file itself.

The re-lint cache keys a file's findings on its own content; when the
analysis of that file also uses another file (a constant imported from a
module of the tree, a lock file), the result depends on that file too.
`lint_file` records, per linted file, every such file and its content hash; the
cache re-hashes them on the next run and lints again when one changed,
appeared or disappeared.

    text = read_dependency(path)     # read another file and record it
    record_dependency(path)          # record a file read (or reused) elsewhere
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

__all__ = ["content_hash", "read_dependency", "record_dependency", "recording"]

_current: ContextVar[dict[str, str | None] | None] = ContextVar("dependencies", default=None)


def content_hash(path: Path) -> str | None:
    """sha256 of the file's bytes, or None when it does not exist or cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def record_dependency(path: Path) -> None:
    """Note that the result being computed uses `path` (absent files count too)."""
    recorded = _current.get()
    if recorded is not None:
        key = str(path.absolute())
        if key not in recorded:
            recorded[key] = content_hash(path)


def read_dependency(path: Path) -> str | None:
    """The UTF-8 text of another file (None when absent or unreadable), recorded."""
    record_dependency(path)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@contextmanager
def recording() -> Iterator[dict[str, str | None]]:
    """Collect the dependencies recorded inside the block: absolute path -> hash."""
    recorded: dict[str, str | None] = {}
    token = _current.set(recorded)
    try:
        yield recorded
    finally:
        _current.reset(token)
