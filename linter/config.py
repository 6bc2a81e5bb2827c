"""`[tool.prefixkit.lint]` in pyproject.toml: which rules run where, and catalog extensions.

    [tool.prefixkit.lint]
    select = ["PFX"]                      # codes or code prefixes (default: all)
    ignore = ["PFX005"]
    per-file-ignores = {"tests/**" = ["PFX001", "PFX002"]}
    extra-volatile-callables = ["myapp.clock.now", "myapp.ids.*"]
    extra-cached-callables = ["myapp.prompts.static_block"]   # every argument is cached
    extra-cached-keywords = ["preamble"]                       # preamble=... is cached
    prompt-globs = ["prompts/**/*.{md,txt,j2,jinja}"]
    prompt-root = "prompts"               # the registry root (prefixkit.lock beside it)
    exclude = ["generated/**"]
    max-file-size = 1000000               # bytes; larger files are skipped with a note

Paths and globs are relative to the folder holding pyproject.toml (the
project root). Unknown keys, wrong types and codes that match no rule are
`LintConfigError`s that name the key and the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from prefixkit.sdk.errors import PrefixkitError

__all__ = ["DEFAULT_PROMPT_GLOBS", "LintConfig", "LintConfigError", "find_pyproject", "load_config"]

DEFAULT_PROMPT_GLOBS: tuple[str, ...] = ("prompts/**/*.{md,txt,j2,jinja}",)


class LintConfigError(PrefixkitError, ValueError):
    """`[tool.prefixkit.lint]` (or a command-line option) is invalid."""


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
    max_file_size: int = 1_000_000
    source: Path | None = None

    def enabled_codes(self, known: Iterable[str], relative_path: str) -> frozenset[str]:
        """The codes that apply to a file (select, then ignore, then per-file-ignores)."""
        from .discovery import glob_matches

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
    "max-file-size": "max_file_size",
}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` or its parents, or None."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LintConfigError(f"{where}: `{key}` must be a list of strings, got {value!r}")
    return tuple(value)


def _check_codes(codes: Iterable[str], known: frozenset[str], key: str, where: str) -> None:
    for selector in codes:
        if selector != "ALL" and not any(code.startswith(selector) for code in known):
            raise LintConfigError(
                f"{where}: `{key}` entry {selector!r} matches no rule; "
                f"known codes: {', '.join(sorted(known))}"
            )


def load_config(
    pyproject: Path | None, known_codes: frozenset[str], root: Path | None = None
) -> LintConfig:
    """Read `[tool.prefixkit.lint]` from `pyproject` (defaults when None or absent)."""
    if pyproject is None:
        return LintConfig(root=(root or Path.cwd()).absolute())
    where = f"{pyproject} [tool.prefixkit.lint]"
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LintConfigError(f"cannot read {pyproject}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LintConfigError(f"{pyproject} is not valid TOML: {exc}") from None
    section = document.get("tool", {}).get("prefixkit", {}).get("lint", {})
    if not isinstance(section, Mapping):
        raise LintConfigError(f"{where} must be a table")
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
                f"{where}: unknown key `{key}`; known keys: {', '.join(sorted(_KEYS))}"
            )
        name = _KEYS[key]
        if key in ("select", "ignore"):
            values[name] = _strings(value, key, where)
            _check_codes(values[name], known, key, where)
        elif key == "per-file-ignores":
            if not isinstance(value, Mapping):
                raise LintConfigError(
                    f'{where}: `{key}` must be a table like {{"tests/**" = ["PFX001"]}}'
                )
            pairs = []
            for pattern, codes in value.items():
                checked = _strings(codes, f"{key}.{pattern}", where)
                _check_codes(checked, known, f"{key}.{pattern}", where)
                pairs.append((pattern, checked))
            values[name] = tuple(pairs)
        elif key in ("prompt-globs", "exclude"):
            values[name] = _strings(value, key, where)
        elif key.startswith("extra-"):
            values[name] = frozenset(_strings(value, key, where))
        elif key == "prompt-root":
            if not isinstance(value, str) or not value:
                raise LintConfigError(f"{where}: `{key}` must be a folder name, got {value!r}")
            values[name] = value
        elif key == "max-file-size":
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise LintConfigError(
                    f"{where}: `{key}` must be a positive number of bytes, got {value!r}"
                )
            values[name] = value
    names = {f.name for f in fields(LintConfig)}
    return LintConfig(**{k: v for k, v in values.items() if k in names})
