"""`[tool.prefixkit.lint]` in pyproject.toml: which rules run where, and catalog extensions.

    [tool.prefixkit.lint]
    select = ["PFX"]                      # codes or code prefixes (default: all)
    ignore = ["PFX005"]
    per-file-ignores = {"tests/**" = ["PFX001", "PFX002"]}
    extra-volatile-callables = ["myapp.clock.now", "myapp.ids.*"]
    extra-cached-callables = ["myapp.prompts.static_block"]   # every argument is cached
    extra-cached-keywords = ["preamble"]                       # preamble=... is cached
    prompt-globs = ["**/prompts/**/*.{md,txt,j2,jinja,jinja2}", "!**/drafts/**"]
    prompt-root = "prompts"               # the registry root (prefixkit.lock beside it)
    exclude = ["vendor", "generated/"]    # gitignore patterns
    extend-exclude = ["legacy/*.py"]      # more of them
    max-file-size = 1000000               # bytes; larger files are skipped with a note
    include-tests = false                 # walk into tests/, test_*.py, conftest.py too

The same table without the `tool.prefixkit.` part, `[lint]`, in a
`prefixkit.toml`. Each linted path takes its settings from the nearest
`prefixkit.toml`, or `pyproject.toml` that has a `[tool.prefixkit.lint]` table,
in its own folder or above (`find_config`). Paths and globs are relative to
the folder holding that file (the project root). Unknown keys, wrong types and
codes that match no rule are `LintConfigError`s that name the key and the file.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from prefixkit.sdk import PrefixkitError

from .globs import glob_matches
from .rule_codes import RULE_CODES

__all__ = [
    "CONFIG_FILE_NAME",
    "DEFAULT_PROMPT_GLOBS",
    "ConfigResolver",
    "LintConfig",
    "LintConfigError",
    "find_config",
    "find_pyproject",
    "load_config",
]

DEFAULT_PROMPT_GLOBS: tuple[str, ...] = (
    "**/prompts/**/*.{md,txt,j2,jinja,jinja2}",
    "**/*.prompt",
    "**/*.prompt.{md,txt}",
    # string values that are templates (prefixkit.linter.prompt_values); not CI workflows
    "**/*.{yaml,yml}",
    "!**/.github/**/*.{yaml,yml}",
)
CONFIG_FILE_NAME = "prefixkit.toml"


class LintConfigError(PrefixkitError, ValueError):
    """`[tool.prefixkit.lint]` (or `[lint]` in a prefixkit.toml) is invalid.

    Attributes:
        path: the config file.
        key: the setting at fault (`select`, `per-file-ignores.tests/**`, the table
            itself), or None when the file cannot be read or is not TOML.
        value: the value at fault (for `select`, the one entry that matches no rule), or
            None when the file cannot be read or is not TOML.
    """

    def __init__(
        self, message: str, *, path: Path, key: str | None = None, value: object = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.key = key
        self.value = value


@dataclass(frozen=True)
class LintConfig:
    """Linter settings; `root` is the project root every relative path refers to."""

    root: Path = field(default_factory=Path.cwd)
    select: tuple[str, ...] = ("PFX",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra_volatile_callables: frozenset[str] = frozenset()
    extra_cached_callables: frozenset[str] = frozenset()
    extra_cached_keywords: frozenset[str] = frozenset()
    prompt_globs: tuple[str, ...] = DEFAULT_PROMPT_GLOBS
    prompt_root: str = "prompts"
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    max_file_size: int = 1_000_000
    include_tests: bool = False
    source: Path | None = None

    @property
    def exclude_patterns(self) -> tuple[str, ...]:
        """`exclude` then `extend-exclude` (gitignore patterns relative to `root`)."""
        return self.exclude + self.extend_exclude

    def fingerprint(self) -> str:
        """A hash of every setting that can change a finding (for the re-lint cache)."""
        settings = {
            name: sorted(value) if isinstance(value, frozenset) else value
            for name, value in ((f.name, getattr(self, f.name)) for f in fields(self))
        }
        encoded = json.dumps(settings, sort_keys=True, default=str).encode()
        return hashlib.sha256(encoded).hexdigest()

    def enabled_codes(self, known: Iterable[str], relative_path: str) -> frozenset[str]:
        """The codes that apply to a file (select, then ignore, then per-file-ignores)."""
        ignored = list(self.ignore)
        for pattern, codes in self.per_file_ignores:
            if glob_matches(pattern, relative_path):
                ignored += codes
        return frozenset(
            code
            for code in known
            if _matches(code, self.select) and not _matches(code, tuple(ignored))
        )


def _matches(code: str, selectors: tuple[str, ...]) -> bool:
    return any(selector == "ALL" or code.startswith(selector) for selector in selectors)


_KEYS: dict[str, str] = {
    "select": "select",
    "ignore": "ignore",
    "per-file-ignores": "per_file_ignores",
    "extra-volatile-callables": "extra_volatile_callables",
    "extra-cached-callables": "extra_cached_callables",
    "extra-cached-keywords": "extra_cached_keywords",
    "prompt-globs": "prompt_globs",
    "prompt-root": "prompt_root",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
    "max-file-size": "max_file_size",
    "include-tests": "include_tests",
}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` or its parents, or None."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _has_lint_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "prefixkit" not in text:
        return False
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True  # load_config names the error
    section = document.get("tool", {}).get("prefixkit", {})
    return isinstance(section, Mapping) and "lint" in section


def find_config(start: Path) -> Path | None:
    """The config for files in folder `start` (None: the defaults).

    The nearest prefixkit.toml, or pyproject.toml with a `[tool.prefixkit.lint]`
    table, in `start` or above; a pyproject.toml without one is passed over.
    """
    for folder in (start, *start.parents):
        own = folder / CONFIG_FILE_NAME
        if own.is_file():
            return own
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _has_lint_table(pyproject):
            return pyproject
    return None


class ConfigResolver:
    """The settings of each folder, found once per folder.

    `explicit` (from `--config`) applies everywhere. Otherwise a folder's
    settings come from `find_config`; a folder without any config file gets the
    defaults, rooted at the nearest pyproject.toml above it (the project) or at
    the current folder.
    """

    def __init__(self, known_codes: frozenset[str], explicit: Path | None = None) -> None:
        self.known_codes = known_codes
        self._explicit = None if explicit is None else load_config(explicit, known_codes)
        self._by_folder: dict[Path, LintConfig] = {}

    def for_folder(self, folder: Path) -> LintConfig:
        """The settings that apply to files in `folder`."""
        if self._explicit is not None:
            return self._explicit
        folder = folder.absolute()
        config = self._by_folder.get(folder)
        if config is None:
            config = self._by_folder[folder] = self._settle(folder)
        return config

    def _settle(self, folder: Path) -> LintConfig:
        own = folder / CONFIG_FILE_NAME
        pyproject = folder / "pyproject.toml"
        if own.is_file():
            return load_config(own, self.known_codes)
        if pyproject.is_file():
            if _has_lint_table(pyproject):
                return load_config(pyproject, self.known_codes)
            if find_config(folder.parent) is None:
                # a project without settings: the defaults, rooted here
                return load_config(None, self.known_codes, root=folder)
        if folder.parent == folder:
            return load_config(None, self.known_codes, root=Path.cwd())
        return self.for_folder(folder.parent)

    def for_path(self, path: Path) -> LintConfig:
        """The settings that apply to a file, or to a folder's own files."""
        return self.for_folder(path if path.is_dir() else path.absolute().parent)


def _wrong(where: str, path: Path, key: str, value: object, expected: str) -> LintConfigError:
    """The error for a `key` whose `value` is not what the key takes (`expected`)."""
    return LintConfigError(
        f"{where}: `{key}` must be {expected}, got {value!r}", path=path, key=key, value=value
    )


def _strings(value: Any, key: str, where: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _wrong(where, path, key, value, "a list of strings")
    return tuple(value)


def _check_codes(
    codes: Iterable[str], known: frozenset[str], key: str, where: str, path: Path
) -> None:
    for selector in codes:
        if selector != "ALL" and not any(code.startswith(selector) for code in known):
            raise LintConfigError(
                f"{where}: `{key}` entry {selector!r} matches no rule; "
                f"known codes: {', '.join(sorted(known))}",
                path=path,
                key=key,
                value=selector,
            )


def load_config(
    pyproject: Path | None,
    known_codes: frozenset[str] | None = None,
    root: Path | None = None,
) -> LintConfig:
    """Read `[tool.prefixkit.lint]` from `pyproject` (defaults when None or absent).

    A file named prefixkit.toml is read from its `[lint]` table instead. `known_codes`
    are the codes `select` and `ignore` may name (default: every rule's); `root` is the
    defaults' project root when `pyproject` is None (default: the current folder).
    Raises `LintConfigError` naming the file, the key and the bad value.
    """
    if known_codes is None:
        known_codes = frozenset(RULE_CODES)
    if pyproject is None:
        return LintConfig(root=(root or Path.cwd()).absolute())
    own = pyproject.name == CONFIG_FILE_NAME
    table = "lint" if own else "tool.prefixkit.lint"
    where = f"{pyproject} [{table}]"
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LintConfigError(f"cannot read {pyproject}: {exc}", path=pyproject) from None
    except tomllib.TOMLDecodeError as exc:
        raise LintConfigError(f"{pyproject} is not valid TOML: {exc}", path=pyproject) from None
    if own:
        section = document.get("lint", {})
    else:
        section = document.get("tool", {}).get("prefixkit", {}).get("lint", {})
    if not isinstance(section, Mapping):
        raise LintConfigError(f"{where} must be a table", path=pyproject, key=table, value=section)
    return _parse(section, where, known_codes, pyproject.parent.absolute(), pyproject)


def _parse(
    section: Mapping[str, Any],
    where: str,
    known: frozenset[str],
    root: Path,
    source: Path,
) -> LintConfig:
    values: dict[str, Any] = {"root": root, "source": source}
    for key, value in section.items():
        if key not in _KEYS:
            raise LintConfigError(
                f"{where}: unknown key `{key}`; known keys: {', '.join(sorted(_KEYS))}",
                path=source,
                key=key,
                value=value,
            )
        name = _KEYS[key]
        if key in ("select", "ignore"):
            values[name] = _strings(value, key, where, source)
            _check_codes(values[name], known, key, where, source)
        elif key == "per-file-ignores":
            if not isinstance(value, Mapping):
                raise LintConfigError(
                    f'{where}: `{key}` must be a table like {{"tests/**" = ["PFX001"]}}',
                    path=source,
                    key=key,
                    value=value,
                )
            pairs = []
            for pattern, codes in value.items():
                checked = _strings(codes, f"{key}.{pattern}", where, source)
                _check_codes(checked, known, f"{key}.{pattern}", where, source)
                pairs.append((pattern, checked))
            values[name] = tuple(pairs)
        elif key in ("prompt-globs", "exclude", "extend-exclude"):
            values[name] = _strings(value, key, where, source)
        elif key.startswith("extra-"):
            values[name] = frozenset(_strings(value, key, where, source))
        elif key == "prompt-root":
            if not isinstance(value, str) or not value:
                raise _wrong(where, source, key, value, "a folder name")
            values[name] = value
        elif key == "max-file-size":
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise _wrong(where, source, key, value, "a positive number of bytes")
            values[name] = value
        elif key == "include-tests":
            if not isinstance(value, bool):
                raise _wrong(where, source, key, value, "true or false")
            values[name] = value
    names = {f.name for f in fields(LintConfig)}
    return LintConfig(**{k: v for k, v in values.items() if k in names})
