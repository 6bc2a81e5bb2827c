"""Which files `prefixkit lint PATHS` looks at, and with which settings.

Directories are walked recursively; folders that never hold project sources
(`.git`, `.venv`, `node_modules`, `build`, `site-packages`, caches, ...) are
never entered, and neither is anything a `.gitignore` on the way or an
`exclude` / `extend-exclude` pattern of the settings (gitignore patterns
relative to the config's folder: `vendor` and `vendor/` match that folder at
any depth, `/vendor` only at the root) excludes. Python files (`.py`, `.pyi`)
and notebooks (`.ipynb`) get the code rules; files matching the prompt globs
get the prompt-file rules; everything else is ignored.

Test code (files under a `tests` or `test` folder, `test_*.py`, `*_test.py`,
`conftest.py`) is left out of a walk, like an exclusion, and counted as
skipped: its prompts go to fake models, never to a provider's cache.
`include-tests` (or `--include-tests`) lints it too, and so does naming a
folder inside a test folder (`prefixkit lint tests/`).

A file named explicitly is always linted (that is how pre-commit passes
files): a named `.md`, `.txt`, Jinja, YAML or JSON file is a prompt file even
outside the prompt globs (a YAML or JSON file's prompts are its string values that
are templates, `prefixkit.linter.prompt_values`). With `force_exclude` (the pre-commit hooks), named files follow
the same exclusions, globs and test-code rule as walked ones.

Each file takes its settings from `ConfigResolver` (the nearest config file
above it), so a sub-project with its own config is linted with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from .config import ConfigResolver, LintConfig
from .globs import glob_matches

__all__ = [
    "CACHE_DIR_NAME",
    "DEFAULT_EXCLUDED_DIRS",
    "NAMED_PROMPT_SUFFIXES",
    "NOTEBOOK_SUFFIX",
    "PYTHON_SUFFIXES",
    "TEST_DIRS",
    "Discovery",
    "Target",
    "discover",
    "file_kind",
    "is_prompt_file",
    "is_test_path",
    "relative_to_root",
]

CACHE_DIR_NAME = ".prefixkit_cache"

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
        ".eggs",
        ".ipynb_checkpoints",
        CACHE_DIR_NAME,
    }
)
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
NOTEBOOK_SUFFIX = ".ipynb"
NAMED_PROMPT_SUFFIXES = frozenset(
    {".md", ".txt", ".j2", ".jinja", ".jinja2", ".prompt", ".yaml", ".yml", ".json"}
)
TEST_DIRS = frozenset({"tests", "test"})


def relative_to_root(path: Path, root: Path) -> str:
    """`path` relative to the project root, POSIX style (absolute if outside it)."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def is_prompt_file(relative_path: str, config: LintConfig) -> bool:
    """Whether the prompt-file rules apply to this path: the last prompt glob that
    matches it decides, and a glob starting with `!` takes paths out."""
    chosen = False
    for pattern in config.prompt_globs:
        negated = pattern.startswith("!")
        if glob_matches(pattern[1:] if negated else pattern, relative_path):
            chosen = not negated
    return chosen


def is_test_path(relative_path: str) -> bool:
    """Whether a POSIX relative path is test code: under a `tests` or `test` folder,
    or a `test_*.py`, `*_test.py` or `conftest.py` file."""
    *folders, name = relative_path.split("/")
    if any(folder in TEST_DIRS for folder in folders):
        return True
    if name == "conftest.py":
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _inside_tests(folder: Path, config: LintConfig) -> bool:
    """Whether a folder is (inside) a test folder of its project."""
    relative = relative_to_root(folder, config.root)
    return relative != "." and is_test_path(relative + "/")


def file_kind(path: Path, config: LintConfig, named: bool = False) -> str | None:
    """`python`, `notebook`, `prompt`, or None for a file the linter ignores.

    `named`: the user named the file itself, so any prompt-like suffix counts.
    """
    if path.suffix in PYTHON_SUFFIXES:
        return "python"
    if path.suffix == NOTEBOOK_SUFFIX:
        return "notebook"
    if is_prompt_file(relative_to_root(path, config.root), config):
        return "prompt"
    if named and path.suffix in NAMED_PROMPT_SUFFIXES:
        return "prompt"
    return None


@dataclass(frozen=True)
class Target:
    """One file to lint, the settings that apply to it, and its kind."""

    path: Path
    config: LintConfig
    kind: str


@dataclass
class Discovery:
    """The files to lint, and warnings about the settings (unused exclude patterns)."""

    targets: list[Target] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tests: list[Target] = field(default_factory=list)  # test code left out


class _Patterns:
    """Gitignore patterns relative to `base`; remembers which ones matched something."""

    def __init__(self, base: Path, patterns: Sequence[str], where: str) -> None:
        self.base = base
        self.where = where
        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        self.pending = {
            pattern: pathspec.GitIgnoreSpec.from_lines([pattern])
            for pattern in patterns
            if pattern.strip() and not pattern.startswith(("#", "!"))
        }

    def matches(self, path: Path, is_dir: bool) -> bool:
        try:
            relative = path.relative_to(self.base).as_posix()
        except ValueError:
            return False
        if relative == ".":
            return False
        relative += "/" if is_dir else ""
        if not self.spec.match_file(relative):
            return False
        for pattern, single in list(self.pending.items()):
            if single.match_file(relative):
                del self.pending[pattern]
        return True


class _Exclusions:
    """The exclude patterns of every config met, and those given on the command line."""

    def __init__(self, extra: Sequence[str]) -> None:
        self.cli = _Patterns(Path.cwd(), extra, "--exclude") if extra else None
        self.by_config: dict[int, tuple[LintConfig, _Patterns | None]] = {}
        self.walked_roots: set[Path] = set()

    def _of(self, config: LintConfig) -> _Patterns | None:
        known = self.by_config.get(id(config))
        if known is None:
            patterns = config.exclude_patterns
            where = str(config.source or config.root)
            spec = _Patterns(config.root, patterns, where) if patterns else None
            known = self.by_config[id(config)] = (config, spec)
        return known[1]

    def excluded(self, path: Path, config: LintConfig, is_dir: bool) -> bool:
        absolute = path.absolute()
        found = False
        for spec in (self._of(config), self.cli):
            if spec is not None and spec.matches(absolute, is_dir):
                found = True
        return found

    def warnings(self) -> list[str]:
        notes = []
        for config, spec in self.by_config.values():
            if spec is None or config.root not in self.walked_roots:
                continue
            for pattern in spec.pending:
                notes.append(
                    f"exclude pattern {pattern!r} ({spec.where}) matches nothing under "
                    f"{config.root}; patterns are gitignore patterns relative to that folder"
                )
        if self.cli is not None and self.cli.base in self.walked_roots:
            for pattern in self.cli.pending:
                notes.append(f"--exclude {pattern!r} matches nothing under {self.cli.base}")
        return notes


def _gitignore(folder: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (folder / ".gitignore").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored_by(
    chain: Sequence[tuple[str, pathspec.GitIgnoreSpec]], path: str, is_dir: bool
) -> bool:
    """Whether a .gitignore of `chain` (its folder, its spec) excludes the absolute `path`."""
    for base, spec in chain:
        relative = path[len(base) :].lstrip(os.sep).replace(os.sep, "/")
        if spec.match_file(relative + "/" if is_dir else relative):
            return True
    return False


def _walk(top: Path, resolver: ConfigResolver, exclusions: _Exclusions) -> Iterator[Target]:
    # .gitignore files above `top`, from the repository's root down, apply too
    above: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    in_repository = False
    for ancestor in reversed(top.absolute().parents):
        in_repository = in_repository or (ancestor / ".git").exists()
        spec = _gitignore(ancestor) if in_repository else None
        if spec is not None:
            above.append((str(ancestor), spec))
    cwd = Path.cwd()
    # each folder's .gitignore files: its parent's, then its own (os.walk goes top-down)
    chains: dict[str, list[tuple[str, pathspec.GitIgnoreSpec]]] = {}
    for folder, dirnames, filenames in os.walk(top):
        here = Path(folder)
        absolute_here = here.absolute()
        here_text = str(absolute_here)
        config = resolver.for_folder(here)
        if absolute_here == config.root or absolute_here in config.root.parents:
            exclusions.walked_roots.add(config.root)
        if absolute_here == cwd or absolute_here in cwd.parents:
            exclusions.walked_roots.add(cwd)
        chain = chains.get(os.path.dirname(here_text), above)
        spec = _gitignore(here)
        if spec is not None:
            chain = [*chain, (here_text, spec)]
        chains[here_text] = chain

        kept = []
        for name in sorted(dirnames):
            path = absolute_here / name
            # checked first so a pattern naming a default folder counts as used
            excluded = exclusions.excluded(path, config, True)
            default = name in DEFAULT_EXCLUDED_DIRS or name.endswith(".egg-info")
            if not (excluded or default or _ignored_by(chain, str(path), True)):
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = here / name
            kind = file_kind(path, config)
            if kind is None:
                continue
            absolute = absolute_here / name
            if exclusions.excluded(absolute, config, False):
                continue
            if _ignored_by(chain, str(absolute), False):
                continue
            yield Target(path, config, kind)


def discover(
    paths: Sequence[Path],
    resolver: ConfigResolver,
    exclude: Sequence[str] = (),
    force_exclude: bool = False,
    include_tests: bool = False,
) -> Discovery:
    """Files to lint under `paths`, each once, in a stable order.

    `exclude`: more gitignore patterns (relative to the current folder).
    `force_exclude`: named files follow the exclusions, prompt globs and
    test-code rule too. `include_tests`: lint test code as well (as the
    `include-tests` setting does for its project).
    Raises `FileNotFoundError` naming a path that does not exist.
    """
    exclusions = _Exclusions(exclude)
    found: dict[Path, Target] = {}
    tests: dict[Path, Target] = {}
    for path in paths:
        if path.is_dir():
            top = path.absolute()
            for target in _walk(path, resolver, exclusions):
                test = not (include_tests or target.config.include_tests) and is_test_path(
                    target.path.absolute().relative_to(top).as_posix()
                )
                if test and not _inside_tests(top, target.config):
                    tests.setdefault(target.path.absolute(), target)
                else:
                    found.setdefault(target.path.absolute(), target)
        elif path.is_file():
            config = resolver.for_path(path)
            if force_exclude and exclusions.excluded(path.absolute(), config, False):
                continue
            kind = file_kind(path, config, named=not force_exclude)
            if kind is None:
                continue
            test = force_exclude and not (include_tests or config.include_tests)
            if test and is_test_path(relative_to_root(path, config.root)):
                tests.setdefault(path.absolute(), Target(path, config, kind))
            else:
                found.setdefault(path.absolute(), Target(path, config, kind))
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    left_out = [target for key, target in tests.items() if key not in found]
    return Discovery(list(found.values()), exclusions.warnings(), left_out)
