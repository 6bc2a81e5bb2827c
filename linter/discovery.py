"""Which files `prefixkit lint PATHS` looks at.

Directories are walked recursively; folders that never hold project sources
(`.git`, `.venv`, `build`, caches, ...) are skipped, and so is everything a
`.gitignore` on the way excludes. A file named explicitly is always linted
(that is how pre-commit passes files), unless it matches `exclude`. Python
files (`.py`, `.pyi`) get the code rules; files matching the prompt globs get
the prompt-file rules; everything else is ignored.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pathspec

from .config import LintConfig

__all__ = [
    "DEFAULT_EXCLUDED_DIRS",
    "PYTHON_SUFFIXES",
    "discover",
    "glob_matches",
    "is_prompt_file",
    "relative_to_root",
]

DEFAULT_EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "build",
        "dist",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        "site-packages",
    }
)
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [
        expanded
        for choice in match.group(1).split(",")
        for expanded in _expand_braces(head + choice + tail)
    ]


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    alternatives = []
    for expanded in _expand_braces(pattern):
        out = []
        index = 0
        while index < len(expanded):
            if expanded.startswith("**/", index):
                out.append("(?:.*/)?")
                index += 3
            elif expanded.startswith("**", index):
                out.append(".*")
                index += 2
            elif expanded[index] == "*":
                out.append("[^/]*")
                index += 1
            elif expanded[index] == "?":
                out.append("[^/]")
                index += 1
            else:
                out.append(re.escape(expanded[index]))
                index += 1
        alternatives.append("".join(out))
    return re.compile("(?:" + "|".join(alternatives) + ")")


def glob_matches(pattern: str, relative_path: str) -> bool:
    """Whether a POSIX relative path matches a glob (`**`, `*`, `?`, `{a,b}`).

    A pattern without a `/` also matches the file name alone (`*.md`).
    """
    regex = _glob_regex(pattern)
    if regex.fullmatch(relative_path):
        return True
    return "/" not in pattern and regex.fullmatch(relative_path.rsplit("/", 1)[-1]) is not None


def relative_to_root(path: Path, root: Path) -> str:
    """`path` relative to the project root, POSIX style (absolute if outside it)."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def is_prompt_file(relative_path: str, config: LintConfig) -> bool:
    """Whether the prompt-file rules apply to this path."""
    return any(glob_matches(pattern, relative_path) for pattern in config.prompt_globs)


def _wanted(path: Path, config: LintConfig) -> bool:
    relative = relative_to_root(path, config.root)
    if any(glob_matches(pattern, relative) for pattern in config.exclude):
        return False
    return path.suffix in PYTHON_SUFFIXES or is_prompt_file(relative, config)


def _gitignore(folder: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (folder / ".gitignore").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _walk(top: Path, config: LintConfig) -> Iterator[Path]:
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for folder, dirnames, filenames in os.walk(top):
        here = Path(folder)
        spec = _gitignore(here)
        if spec is not None:
            specs.append((here, spec))

        def ignored(path: Path, is_dir: bool) -> bool:
            for base, base_spec in specs:
                if base in path.parents:
                    relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
                    if base_spec.match_file(relative):
                        return True
            return False

        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in DEFAULT_EXCLUDED_DIRS
            and not name.endswith(".egg-info")
            and not ignored(here / name, True)
        )
        for name in sorted(filenames):
            path = here / name
            if _wanted(path, config) and not ignored(path, False):
                yield path


def discover(paths: list[Path], config: LintConfig) -> list[Path]:
    """Files to lint under `paths`, each once, in a stable order.

    Raises `FileNotFoundError` naming a path that does not exist.
    """
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in _walk(path, config):
                found.setdefault(file, None)
        elif path.is_file():
            relative = relative_to_root(path, config.root)
            if not any(glob_matches(pattern, relative) for pattern in config.exclude):
                found.setdefault(path, None)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return list(found)
