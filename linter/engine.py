"""Run the rules: over source text, over files (with `--fix`), over many files in parallel.

A Python file is parsed once; all enabled rules share one `LintContext`
(one metadata wrapper, computed lazily). A module that mentions none of the
words a cached segment needs (`system`, `tools`, `cache_control`, ...) is
only parsed, which keeps large code bases fast. A file that does not parse
is one `PFX000` finding. Prompt files (the prompt globs) get the prompt rules.

`lint_paths` never raises for a single bad file: unreadable, binary or huge
files become notes, unexpected failures become errors, and linting goes on.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from prefixkit.sdk.errors import PrefixkitError

from .config import LintConfig
from .context import LintContext, ProjectState, PromptContext
from .discovery import PYTHON_SUFFIXES, is_prompt_file, relative_to_root
from .finding import Edit, Finding, Position
from .rule import PromptRule, PythonRule
from .rules import ALL_RULES, SYNTAX_ERROR_CODE
from .suppression import Suppressions

__all__ = ["FileOutcome", "apply_edits", "lint_paths", "lint_prompt", "lint_python", "lint_text"]

_MAX_FIX_PASSES = 8
_BINARY_PROBE = 8192


@dataclass
class FileOutcome:
    """What linting one file produced."""

    path: Path
    findings: list[Finding] = field(default_factory=list)
    lines: int = 0
    fixed: int = 0
    note: str | None = None
    error: str | None = None
    internal: bool = False  # the error is the linter's own failure, not the project's


def _known_codes() -> list[str]:
    return [rule.code for rule in ALL_RULES]


def _trigger_words(config: LintConfig) -> tuple[str, ...]:
    extra = {name.rsplit(".", 1)[-1] for name in config.extra_cached_callables}
    return (
        "system",
        "instructions",
        "tools",
        "cache_control",
        "prompt_cache_breakpoint",
        "Segment",
        "SystemMessage",
        "developer",
        *sorted(config.extra_cached_keywords | extra),
    )


def _syntax_error(source: str, exc: cst.ParserSyntaxError) -> tuple[str, int, int]:
    # CPython's own parser pinpoints the error better than libcst's; fall back
    # to libcst when CPython accepts the code (syntax libcst does not know).
    try:
        compile(source, "<lint>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        return error.msg, error.lineno or 1, max(error.offset or 1, 1)
    except ValueError:
        pass
    return exc.message.strip(), exc.editor_line, exc.editor_column


def lint_python(
    source: str, filename: str, config: LintConfig, enabled: frozenset[str]
) -> list[Finding]:
    """Findings of the enabled Python rules for one module (noqa not applied)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        if SYNTAX_ERROR_CODE not in enabled:
            return []
        detail, line, column = _syntax_error(source, exc)
        message = f"cannot parse this file: {detail}; other files are still linted"
        return [
            Finding(
                SYNTAX_ERROR_CODE, message, filename, Position(line, column), Position(line, column)
            )
        ]
    rules = [rule() for rule in ALL_RULES if issubclass(rule, PythonRule) and rule.code in enabled]
    if not rules or not any(word in source for word in _trigger_words(config)):
        return []
    context = LintContext(module, filename, config)
    if not context.index.has_candidates:
        return []
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule.check(context))
    return findings


def lint_prompt(
    text: str, path: Path, filename: str, project: ProjectState, enabled: frozenset[str]
) -> list[Finding]:
    """Findings of the enabled prompt-file rules for one prompt file."""
    context = PromptContext(path, filename, text, project)
    findings: list[Finding] = []
    for rule in ALL_RULES:
        if issubclass(rule, PromptRule) and rule.code in enabled:
            findings.extend(rule().check(context))
    return findings


def lint_text(
    text: str, path: Path, config: LintConfig, project: ProjectState | None = None
) -> list[Finding]:
    """Findings for a file's text, with selection and noqa comments applied."""
    relative = relative_to_root(path, config.root)
    enabled = config.enabled_codes(_known_codes(), relative)
    filename = str(path)
    if path.suffix in PYTHON_SUFFIXES:
        findings = lint_python(text, filename, config, enabled)
    elif is_prompt_file(relative, config):
        findings = lint_prompt(text, path, filename, project or ProjectState(config), enabled)
    else:
        return []
    unique = {(f.code, f.start, f.end, f.message): f for f in findings}
    return sorted(Suppressions(text).filter(unique.values()), key=lambda f: f.sort_key)


def _offsets(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with non-overlapping `edits` applied (overlapping ones are skipped)."""
    starts = _offsets(text)

    def offset(row: int, column: int) -> int:
        return starts[row - 1] + column - 1

    spans = sorted(
        ((offset(e.start.row, e.start.column), offset(e.end.row, e.end.column), e) for e in edits),
        key=lambda item: (item[0], item[1]),
    )
    out: list[str] = []
    cursor = 0
    for start, end, edit in spans:
        if start < cursor:
            continue
        out.append(text[cursor:start])
        out.append(edit.content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def _fix_text(
    text: str, path: Path, config: LintConfig, project: ProjectState
) -> tuple[str, list[Finding], int]:
    fixed = 0
    findings = lint_text(text, path, config, project)
    for _ in range(_MAX_FIX_PASSES):
        edits: list[Edit] = []
        taken: list[tuple[int, int, int, int]] = []
        for finding in findings:
            if finding.fix is None:
                continue
            spans = [
                (e.start.row, e.start.column, e.end.row, e.end.column) for e in finding.fix.edits
            ]
            if any(_overlaps(span, other) for span in spans for other in taken):
                continue
            taken += spans
            edits += finding.fix.edits
            fixed += 1
        if not edits:
            break
        text = apply_edits(text, edits)
        findings = lint_text(text, path, config, project)
    return text, findings, fixed


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return (a[0], a[1]) <= (b[2], b[3]) and (b[0], b[1]) <= (a[2], a[3])


def _read(path: Path, config: LintConfig) -> tuple[str | None, str | None]:
    try:
        size = path.stat().st_size
        if size > config.max_file_size:
            return None, (
                f"skipped {path}: {size} bytes is over max-file-size ({config.max_file_size})"
            )
        data = path.read_bytes()
    except OSError as exc:
        return None, f"skipped {path}: cannot read it ({exc.strerror or exc})"
    if b"\0" in data[:_BINARY_PROBE]:
        return None, f"skipped {path}: binary file"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"skipped {path}: not UTF-8 (byte {exc.start})"


def lint_file(
    path: Path, config: LintConfig, fix: bool = False, project: ProjectState | None = None
) -> FileOutcome:
    """Lint one file (and with `fix`, rewrite it with the safe fixes applied)."""
    outcome = FileOutcome(path)
    text, note = _read(path, config)
    if text is None:
        outcome.note = note
        return outcome
    project = project or ProjectState(config)
    outcome.lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    try:
        if fix:
            new_text, outcome.findings, outcome.fixed = _fix_text(text, path, config, project)
            if new_text != text:
                path.write_text(new_text, encoding="utf-8", newline="")
        else:
            outcome.findings = lint_text(text, path, config, project)
    except PrefixkitError as exc:
        outcome.error = str(exc)
    except Exception as exc:  # one bad file must not stop the run
        outcome.error = f"internal error while linting {path}: {type(exc).__name__}: {exc}"
        outcome.internal = True
    return outcome


def _lint_batch(paths: list[Path], config: LintConfig, fix: bool) -> list[FileOutcome]:
    project = ProjectState(config)
    return [lint_file(path, config, fix, project) for path in paths]


def lint_paths(
    paths: Iterable[Path], config: LintConfig, fix: bool = False, jobs: int = 1
) -> list[FileOutcome]:
    """Lint files, `jobs` processes at a time (1: in this process), in input order."""
    files = list(paths)
    if jobs <= 1 or len(files) < 2:
        return _lint_batch(files, config, fix)
    jobs = min(jobs, len(files))
    chunk = max(1, len(files) // (jobs * 4))
    batches = [files[i : i + chunk] for i in range(0, len(files), chunk)]
    outcomes: list[FileOutcome] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for batch in pool.map(_lint_batch, batches, [config] * len(batches), [fix] * len(batches)):
            outcomes += batch
    return outcomes
