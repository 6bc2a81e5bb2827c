"""Versioned prompt files, pinned by sha256 in `prefixkit.lock`.

Layout (one scheme: the version is part of the file name)::

    prompts/                      the registry root
      support@v3.md               prompt "support", version "v3"
      support@v4.md               prompt "support", version "v4"
      billing/refunds@2026-06.txt prompt "billing/refunds", version "2026-06"
      greeting.md                 prompt "greeting", no version (load("greeting"))
    prefixkit.lock                the lock, by default beside the root

A prompt's *key* is its path under the root without the extension (`support@v3`);
the name is what comes before the first `@`, the version what follows. Only
`.md` and `.txt` files count; hidden files and folders are ignored. The whole
file is the prompt (no front matter); its canonical form is `canonical_text` of
its UTF-8 contents, so line endings, a BOM and trailing whitespace never
change the hash.

The lock is JSON, written with sorted keys so it diffs well in review::

    {"lock_version": 1,
     "prompts": {"support@v3": {"file": "support@v3.md",
                                "sha256": "<hex of the canonical text>",
                                "text": "<the canonical text itself>"}}}

The locked text is kept in the lock so a drift error can show a unified diff
against what was approved. Its default path is `<root>/../prefixkit.lock`
(`PromptRegistry("prompts")` uses `./prefixkit.lock`).

API for other tools (the linter's prompt-drift rule uses these, from `prefixkit.sdk`):

- `check_prompt_files(root, lock_path=None) -> list[Drift]`: every prompt file
  compared with the lock; empty when clean. Raises `LockfileError` when the lock
  is missing or malformed.
- `read_lock(path) -> Lock` and `Lock.check(key, text) -> Drift | None` (pure).
- `write_lock(root, lock_path=None) -> LockUpdate` (what `prefixkit lock` runs).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .canonical import canonical_text, sha256_hex
from .drift import Drift
from .errors import CanonicalError, LockfileError, PromptDriftError, PromptNotFoundError
from .segment import Segment

__all__ = [
    "LOCK_FILE_NAME",
    "PROMPT_SUFFIXES",
    "Lock",
    "LockEntry",
    "LockUpdate",
    "PromptFile",
    "PromptRegistry",
    "check_prompt_files",
    "default_lock_path",
    "prompt_digest",
    "read_lock",
    "render_lock",
    "scan_prompt_files",
    "write_lock",
]

LOCK_FILE_NAME = "prefixkit.lock"
LOCK_FORMAT_VERSION = 1
PROMPT_SUFFIXES = (".md", ".txt")
_DIFF_LINES = 80


def prompt_digest(text: str) -> str:
    """sha256 (hex) of the canonical form of a prompt file's text."""
    return sha256_hex(canonical_text(text))


def default_lock_path(root: str | os.PathLike[str]) -> Path:
    """Where the lock lives by default: `prefixkit.lock` in the root's parent folder."""
    return Path(root).absolute().parent / LOCK_FILE_NAME


@dataclass(frozen=True)
class PromptFile:
    """One prompt file: its key (`name@version`), name, version and path."""

    key: str
    name: str
    version: str | None
    path: Path

    def canonical(self) -> str:
        """The file's canonical text."""
        return canonical_text(_read_text(self.path))


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalError(
            f"prompt file {path} is not UTF-8 (byte {exc.start}): re-save it as UTF-8",
            value=path,
        ) from None


def _prompt_file(root: Path, path: Path) -> PromptFile:
    key = path.relative_to(root).with_suffix("").as_posix()
    name, at, version = key.partition("@")
    if not name or (at and not version):
        raise CanonicalError(
            f"prompt file {path} has an empty name or version: name it like support@v3.md",
            value=path,
        )
    return PromptFile(key=key, name=name, version=version or None, path=path)


def scan_prompt_files(root: str | os.PathLike[str]) -> dict[str, PromptFile]:
    """Every prompt file under `root`, by key, in sorted order."""
    base = Path(root)
    if not base.is_dir():
        raise PromptNotFoundError(
            f"prompt folder {base} does not exist: create it or pass the right root", root=base
        )
    files: dict[str, PromptFile] = {}
    for path in sorted(base.rglob("*")):
        relative = path.relative_to(base).parts
        if any(part.startswith(".") for part in relative):
            continue
        if path.is_file() and path.suffix in PROMPT_SUFFIXES:
            prompt = _prompt_file(base, path)
            if prompt.key in files:
                raise CanonicalError(
                    f"{files[prompt.key].path} and {path} are the same prompt {prompt.key}: "
                    "keep one of them",
                    value=path,
                )
            files[prompt.key] = prompt
    return files


def _unified_diff(key: str, locked: str, current: str) -> str:
    lines = list(
        difflib.unified_diff(
            (locked + "\n").splitlines(keepends=True),
            (current + "\n").splitlines(keepends=True),
            fromfile=f"{key} (locked)",
            tofile=f"{key} (current)",
        )
    )
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... {len(lines) - _DIFF_LINES} more diff lines\n"]
    return "".join(lines)


@dataclass(frozen=True)
class LockEntry:
    """What the lock pins for one prompt: its file, digest and canonical text."""

    file: str
    sha256: str
    text: str


@dataclass(frozen=True)
class Lock:
    """The parsed lock: entries by prompt key."""

    entries: Mapping[str, LockEntry] = field(default_factory=dict)

    def check(self, key: str, text: str) -> Drift | None:
        """Compare a prompt's current text with its entry (pure); None when it matches."""
        actual = prompt_digest(text)
        entry = self.entries.get(key)
        if entry is None:
            return Drift(key, "unlocked", None, actual)
        if entry.sha256 == actual:
            return None
        return Drift(
            key,
            "changed",
            entry.sha256,
            actual,
            _unified_diff(key, entry.text, canonical_text(text)),
        )


def _lock_error(path: Path, what: str, key: str | None = None) -> LockfileError:
    return LockfileError(
        f"{path}: {what}. Regenerate it with `prefixkit lock` (review the prompt diff first)",
        path=path,
        key=key,
    )


def read_lock(path: str | os.PathLike[str]) -> Lock:
    """Parse a lock file; `LockfileError` names the line or key that is wrong."""
    lock_path = Path(path)
    try:
        raw = lock_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockfileError(
            f"no lock file at {lock_path}: run `prefixkit lock` to pin the prompts "
            "(or pass the right lock path)",
            path=lock_path,
        ) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _lock_error(
            lock_path, f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise _lock_error(lock_path, "the top level must be a JSON object")
    if data.get("lock_version") != LOCK_FORMAT_VERSION:
        raise _lock_error(
            lock_path,
            f"key 'lock_version' is {data.get('lock_version')!r}, expected {LOCK_FORMAT_VERSION}",
            "lock_version",
        )
    prompts = data.get("prompts")
    if not isinstance(prompts, dict):
        raise _lock_error(lock_path, "key 'prompts' must be an object of prompt entries", "prompts")
    entries: dict[str, LockEntry] = {}
    for key, value in prompts.items():
        if not isinstance(value, dict):
            raise _lock_error(lock_path, f"key 'prompts.{key}' must be an object", f"prompts.{key}")
        for name in ("file", "sha256", "text"):
            if not isinstance(value.get(name), str):
                raise _lock_error(
                    lock_path,
                    f"key 'prompts.{key}.{name}' must be a string",
                    f"prompts.{key}.{name}",
                )
        if sha256_hex(value["text"]) != value["sha256"]:
            raise _lock_error(
                lock_path,
                f"key 'prompts.{key}': 'text' does not match its 'sha256' (hand-edited?)",
                f"prompts.{key}.text",
            )
        entries[key] = LockEntry(value["file"], value["sha256"], value["text"])
    return Lock(entries)


def render_lock(files: Mapping[str, PromptFile], root: str | os.PathLike[str]) -> str:
    """The lock file's contents for these prompt files (deterministic)."""
    base = Path(root)
    prompts = {}
    for key, prompt in sorted(files.items()):
        text = prompt.canonical()
        prompts[key] = {
            "file": prompt.path.relative_to(base).as_posix(),
            "sha256": sha256_hex(text),
            "text": text,
        }
    document = {"lock_version": LOCK_FORMAT_VERSION, "prompts": prompts}
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def check_prompt_files(
    root: str | os.PathLike[str], lock_path: str | os.PathLike[str] | None = None
) -> list[Drift]:
    """Every disagreement between the prompt files under `root` and the lock, by key."""
    lock = read_lock(default_lock_path(root) if lock_path is None else lock_path)
    files = scan_prompt_files(root)
    drifts: list[Drift] = []
    for key in sorted(set(files) | set(lock.entries)):
        if key not in files:
            drifts.append(Drift(key, "removed", lock.entries[key].sha256, None))
            continue
        drift = lock.check(key, _read_text(files[key].path))
        if drift is not None:
            drifts.append(drift)
    return drifts


@dataclass(frozen=True)
class LockUpdate:
    """What `write_lock` changed, by prompt key."""

    path: Path
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: tuple[str, ...]


def write_lock(
    root: str | os.PathLike[str], lock_path: str | os.PathLike[str] | None = None
) -> LockUpdate:
    """Pin every prompt file under `root` in the lock (created or rewritten atomically)."""
    path = default_lock_path(root) if lock_path is None else Path(lock_path)
    previous = read_lock(path) if path.exists() else Lock()
    files = scan_prompt_files(root)
    contents = render_lock(files, root)
    current = json.loads(contents)["prompts"]
    old = previous.entries
    added = tuple(k for k in current if k not in old)
    changed = tuple(k for k in current if k in old and old[k].sha256 != current[k]["sha256"])
    unchanged = tuple(k for k in current if k in old and old[k].sha256 == current[k]["sha256"])
    removed = tuple(sorted(k for k in old if k not in current))
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(contents, encoding="utf-8")
    temporary.replace(path)
    return LockUpdate(path, added, changed, removed, unchanged)


class PromptRegistry:
    """Prompt files under `root`, verified against the lock when loaded.

    >>> registry = PromptRegistry("prompts")          # lock: ./prefixkit.lock
    >>> system = registry.load("support", version="v3")  # doctest: +SKIP

    The lock is re-read when its file changes on disk.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = "prompts",
        *,
        lock_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.lock_path = default_lock_path(root) if lock_path is None else Path(lock_path)
        self._lock: tuple[tuple[int, int], Lock] | None = None

    def lock(self) -> Lock:
        """The parsed lock (cached until the file changes)."""
        try:
            stat = self.lock_path.stat()
        except FileNotFoundError:
            return read_lock(self.lock_path)  # raises the "run prefixkit lock" error
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._lock is None or self._lock[0] != stamp:
            self._lock = (stamp, read_lock(self.lock_path))
        return self._lock[1]

    def files(self) -> dict[str, PromptFile]:
        """Every prompt file by key."""
        return scan_prompt_files(self.root)

    def _find(self, name: str, version: str | None) -> PromptFile:
        key = name if version is None else f"{name}@{version}"
        for suffix in PROMPT_SUFFIXES:
            path = self.root / f"{key}{suffix}"
            if path.is_file():
                return _prompt_file(self.root, path)
        files = self.files()
        versions = sorted(f.version or "(unversioned)" for f in files.values() if f.name == name)
        if versions:
            raise PromptNotFoundError(
                f"prompt {name!r} has no version {version!r} in {self.root}; "
                f"available: {', '.join(versions)}",
                root=self.root,
                name=name,
                version=version,
                available=versions,
            )
        names = sorted({f.name for f in files.values()})
        raise PromptNotFoundError(
            f"no prompt {name!r} in {self.root} (expected a file {key}.md); "
            f"prompts there: {', '.join(names) or 'none'}",
            root=self.root,
            name=name,
            version=version,
            available=names,
        )

    def load(self, name: str, version: str | None = None) -> Segment:
        """The prompt as a STATIC system segment (name and version set), hash-verified.

        Raises `PromptNotFoundError` (no such prompt or version: lists what
        exists), `LockfileError` (no lock or a malformed one) and
        `PromptDriftError` (the file differs from the lock, or is not pinned).
        """
        prompt = self._find(name, version)
        text = prompt.canonical()
        drift = self.lock().check(prompt.key, text)
        if drift is not None:
            raise PromptDriftError(f"{prompt.path}: {drift.message}", drift=drift, path=prompt.path)
        return Segment.static(text, role="system", name=name, version=version)
