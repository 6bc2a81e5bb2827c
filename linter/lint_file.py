"""Lint one file: its source text, a notebook's cells, a prompt file, with `--fix`.

A Python file is parsed once; all enabled rules share one `LintContext`
(one metadata wrapper, computed lazily). A module that mentions none of the
words a cached segment needs (`system`, `tools`, `cache_control`, ...), and
imports no module of the project that does (within the import depth, read from
the text), is only parsed, which keeps large code bases fast. A file that does not parse
is one `PFX000` finding, unless it looks like a Jinja template (`{{`, `{%`):
then it is skipped as a template. A notebook's code cells are linted as one
module (`prefixkit.linter.notebook`) and its findings placed in their cells.
Prompt files get the prompt rules.

`lint_file` never raises for a single bad file: unreadable, binary or huge
files are skipped with a note, unexpected failures become errors, and linting
goes on. Many files are linted by `prefixkit.linter.lint_many`, which calls
`lint_batch` here for the files the re-lint cache does not answer.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import libcst as cst
from prefixkit.sdk import PrefixkitError

from .analysis.project_imports import parse_module
from .catalog import TRIGGER_WORDS
from .config import LintConfig
from .context import LintContext, ProjectState, PromptContext
from .dependencies import record_dependency, recording
from .discovery import Target, file_kind, relative_to_root
from .finding import Edit, Finding, Position, apply_edits
from .notebook import Notebook, NotebookError, parse_notebook
from .outcome import FileOutcome
from .prompt_values import STRUCTURED_SUFFIXES, prompt_values
from .rule import PromptRule, PythonRule
from .rules import ALL_RULES, SYNTAX_ERROR_CODE
from .suppression import Suppressions

__all__ = [
    "lint_batch",
    "lint_file",
    "lint_notebook",
    "lint_prompt",
    "lint_python",
    "lint_source",
    "lint_text",
]

_MAX_FIX_PASSES = 8
_MAX_BROKEN_CELLS = 8
_BINARY_PROBE = 8192
_TEMPLATE_SYNTAX = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


def _known_codes() -> list[str]:
    return [rule.code for rule in ALL_RULES]


def _trigger_words(config: LintConfig) -> tuple[str, ...]:
    extra = {name.rsplit(".", 1)[-1] for name in config.extra_cached_callables}
    return (*TRIGGER_WORDS, *sorted(config.extra_cached_keywords | extra))


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
        module = parse_module(source, Path(filename))
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
    if not rules:
        return []
    context = LintContext(module, filename, config)
    imports_prompts = context.may_import_prompt_code(source)
    if not imports_prompts and not any(word in source for word in _trigger_words(config)):
        return []
    if not context.index.has_candidates and not (
        imports_prompts and context.imports_cross() and context.segments
    ):
        return []
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule.check(context))
    return findings


def lint_prompt(
    text: str, path: Path, filename: str, project: ProjectState, enabled: frozenset[str]
) -> list[Finding]:
    """Findings of the enabled prompt-file rules for one prompt file; a YAML or JSON
    file's prompts are its string values that are templates (`prompt_values`)."""
    if path.suffix in STRUCTURED_SUFFIXES:
        contexts = [
            PromptContext(path, filename, value.text, project, value.placement)
            for value in prompt_values(text)
        ]
    else:
        contexts = [PromptContext(path, filename, text, project)]
    rules = [rule() for rule in ALL_RULES if issubclass(rule, PromptRule) and rule.code in enabled]
    return [finding for context in contexts for rule in rules for finding in rule.check(context)]


def lint_notebook(text: str, path: Path, config: LintConfig) -> list[Finding]:
    """Findings for a notebook's JSON text, each placed in its cell (noqa applied).

    A notebook that cannot be read is one `PFX000` finding saying why.
    """
    try:
        notebook = parse_notebook(text, path)
    except NotebookError as exc:
        return _unreadable_notebook(exc, path, config)
    return [notebook.map_finding(f) for f in _notebook_findings(notebook, path, config)]


def _notebook_findings(notebook: Notebook, path: Path, config: LintConfig) -> list[Finding]:
    """Findings on the notebook's module; a cell that does not parse gets its PFX000 and
    is left out, so the other cells are still linted."""
    blank: frozenset[int] = frozenset()
    broken: list[Finding] = []
    enabled = config.enabled_codes(_known_codes(), relative_to_root(path, config.root))
    for position in range(len(notebook.cells)):
        error = notebook.syntax_error(position)
        if error is None:
            continue
        blank |= {position}
        if SYNTAX_ERROR_CODE in enabled:
            detail, row, column = error
            message = f"cannot parse this cell: {detail}; the other cells are still linted"
            place = Position(row, column)
            broken.append(Finding(SYNTAX_ERROR_CODE, message, str(path), place, place))
    findings = lint_text(notebook.module(blank), path, config, kind="python")
    # what CPython accepts and libcst does not: left out the same way, cell by cell
    for _ in range(_MAX_BROKEN_CELLS):
        errors = [f for f in findings if f.code == SYNTAX_ERROR_CODE]
        if not errors:
            break
        broken += [
            dataclasses.replace(
                f,
                message=f.message.replace("this file", "this cell").replace(
                    "other files are", "the other cells are"
                ),
            )
            for f in errors
        ]
        blank |= {notebook.position_of(f.start.row) for f in errors}
        findings = lint_text(notebook.module(blank), path, config, kind="python")
    return sorted(broken + findings, key=lambda f: f.sort_key)


def _unreadable_notebook(exc: NotebookError, path: Path, config: LintConfig) -> list[Finding]:
    enabled = config.enabled_codes(_known_codes(), relative_to_root(path, config.root))
    if SYNTAX_ERROR_CODE not in enabled:
        return []
    message = f"cannot read this notebook: {exc}; other files are still linted"
    return [Finding(SYNTAX_ERROR_CODE, message, str(path), Position(1, 1), Position(1, 1))]


def lint_text(
    text: str,
    path: Path,
    config: LintConfig,
    project: ProjectState | None = None,
    kind: str | None = None,
) -> list[Finding]:
    """Findings for a file's text, with selection and noqa comments applied.

    `kind` (`python`, `notebook`, `prompt`) defaults to what the path says.
    """
    kind = kind or file_kind(path, config)
    if kind == "notebook":
        return lint_notebook(text, path, config)
    relative = relative_to_root(path, config.root)
    enabled = config.enabled_codes(_known_codes(), relative)
    filename = str(path)
    if kind == "python":
        findings = lint_python(text, filename, config, enabled)
    elif kind == "prompt":
        project = project or ProjectState(config)
        from prefixkit.sdk import default_lock_path

        record_dependency(default_lock_path(project.prompt_root))
        findings = lint_prompt(text, path, filename, project, enabled)
    else:
        return []
    return sorted(Suppressions(text).filter(_one_per_line(findings)), key=lambda f: f.sort_key)


def lint_source(source: str, path: Path | str, config: LintConfig | None = None) -> list[Finding]:
    """The findings for `source`, the text of the file at `path` (which need not exist),
    sorted, with the rules `config` selects (default: `LintConfig()`, every rule) and
    `# noqa` comments applied.

    The path says what the text is: `.py` / `.pyi` Python, `.ipynb` a notebook's JSON, a
    path matching the config's prompt globs a prompt file; anything else has no findings.
    """
    return lint_text(source, Path(path), config or LintConfig())


def _one_per_line(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (line, rule): `{user.name} ({user})` on one line is one problem.

    The kept finding is the line's first: the outermost expression (`user.name`, not
    the `user` inside it). `--fix` passes again for a fix on a dropped one.
    """
    lines: dict[tuple[str, int | None, int, str], list[Finding]] = {}
    for finding in findings:
        key = (finding.filename, finding.cell, finding.start.row, finding.code)
        lines.setdefault(key, []).append(finding)
    return [min(group, key=lambda f: f.start) for group in lines.values()]


def _chosen_fixes(findings: Iterable[Finding], unsafe_fixes: bool) -> list[tuple[Edit, ...]]:
    """The edits of each applicable fix that overlaps no fix chosen before it."""
    chosen: list[tuple[Edit, ...]] = []
    taken: list[tuple[int, int, int, int]] = []
    for finding in findings:
        if finding.fix is None or not finding.fix.applies(unsafe_fixes):
            continue
        spans = [(e.start.row, e.start.column, e.end.row, e.end.column) for e in finding.fix.edits]
        if any(_overlaps(span, other) for span in spans for other in taken):
            continue
        taken += spans
        chosen.append(finding.fix.edits)
    return chosen


def _fix_text(
    text: str, path: Path, config: LintConfig, project: ProjectState, kind: str, unsafe: bool
) -> tuple[str, list[Finding], int]:
    fixed = 0
    findings = lint_text(text, path, config, project, kind)
    for _ in range(_MAX_FIX_PASSES):
        fixes = _chosen_fixes(findings, unsafe)
        if not fixes:
            break
        fixed += len(fixes)
        text = apply_edits(text, [edit for fix in fixes for edit in fix])
        findings = lint_text(text, path, config, project, kind)
    return text, findings, fixed


def _fix_notebook(
    text: str, path: Path, config: LintConfig, unsafe: bool
) -> tuple[str, list[Finding], int]:
    try:
        notebook: Notebook = parse_notebook(text, path)
    except NotebookError as exc:
        return text, _unreadable_notebook(exc, path, config), 0
    fixed = 0

    def module_findings() -> list[Finding]:
        return _notebook_findings(notebook, path, config)

    findings = module_findings()
    for _ in range(_MAX_FIX_PASSES):
        fixes = _chosen_fixes(findings, unsafe)
        if not fixes:
            break
        notebook, applied = notebook.apply(fixes)
        if not applied:
            break
        fixed += applied
        findings = module_findings()
    return notebook.text, [notebook.map_finding(f) for f in findings], fixed


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return (a[0], a[1]) <= (b[2], b[3]) and (b[0], b[1]) <= (a[2], a[3])


def _human_size(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000} MB"
    if size % 1000 == 0:
        return f"{size // 1000} kB"
    return f"{size} bytes"


def _read(path: Path, config: LintConfig, kind: str) -> tuple[bytes | None, str | None, str, str]:
    """(bytes, text, note, short reason); text is None when the file is skipped.

    A notebook's size is mostly its outputs (images): its code is measured instead.
    """
    try:
        size = path.stat().st_size
        if kind != "notebook" and size > config.max_file_size:
            return (
                None,
                None,
                f"skipped {path}: {size} bytes is over max-file-size ({config.max_file_size})",
                f"over {_human_size(config.max_file_size)}",
            )
        data = path.read_bytes()
    except OSError as exc:
        return None, None, f"skipped {path}: cannot read it ({exc.strerror or exc})", "unreadable"
    if b"\0" in data[:_BINARY_PROBE]:
        return data, None, f"skipped {path}: binary file", "binary"
    try:
        return data, data.decode("utf-8"), "", ""
    except UnicodeDecodeError as exc:
        return data, None, f"skipped {path}: not UTF-8 (byte {exc.start})", "not UTF-8"


def _is_template(text: str, findings: Sequence[Finding]) -> bool:
    """A `.py` file that does not parse and holds template syntax: a Jinja template."""
    return any(f.code == SYNTAX_ERROR_CODE for f in findings) and bool(
        _TEMPLATE_SYNTAX.search(text)
    )


def lint_file(
    path: Path,
    config: LintConfig,
    fix: bool = False,
    project: ProjectState | None = None,
    kind: str | None = None,
    unsafe_fixes: bool = False,
) -> FileOutcome:
    """Lint one file (and with `fix`, rewrite it with the safe fixes applied; with
    `unsafe_fixes` too, the unsafe ones as well).

    `kind` defaults to what the path says (a named prompt-like file is a prompt).
    """
    kind = kind or file_kind(path, config, named=True) or "other"
    outcome = FileOutcome(path, kind=kind)
    data, text, outcome.note, reason = _read(path, config, kind)
    if data is None or text is None:
        outcome.skipped = reason
        return outcome
    if kind == "notebook" and _notebook_code_size(text) > config.max_file_size:
        outcome.note = (
            f"skipped {path}: its code cells are over max-file-size ({config.max_file_size})"
        )
        outcome.skipped = f"over {_human_size(config.max_file_size)}"
        return outcome
    outcome.digest = hashlib.sha256(data).hexdigest()
    project = project or ProjectState(config)
    try:
        with recording() as dependencies:
            new_text = text
            if fix and kind == "notebook":
                new_text, outcome.findings, outcome.fixed = _fix_notebook(
                    text, path, config, unsafe_fixes
                )
            elif fix:
                new_text, outcome.findings, outcome.fixed = _fix_text(
                    text, path, config, project, kind, unsafe_fixes
                )
            else:
                outcome.findings = lint_text(text, path, config, project, kind)
        outcome.dependencies = dependencies
        if new_text != text:
            path.write_text(new_text, encoding="utf-8", newline="")
            outcome.digest = hashlib.sha256(new_text.encode("utf-8")).hexdigest()
            text = new_text
    except PrefixkitError as exc:
        outcome.error = str(exc)
    except Exception as exc:  # one bad file must not stop the run
        outcome.error = f"internal error while linting {path}: {type(exc).__name__}: {exc}"
        outcome.internal = True
    if kind == "python" and _is_template(text, outcome.findings):
        outcome.findings = []
        outcome.skipped = "Jinja template"
        outcome.note = f"skipped {path}: a Jinja template (it holds {{{{ }}}} or {{% %}} syntax and is not Python)"
        return outcome
    if kind == "notebook":
        outcome.lines = _notebook_lines(text)
    else:
        outcome.lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    return outcome


def _notebook_code_size(text: str) -> int:
    try:
        return sum(len(line) for cell in parse_notebook(text).cells for line in cell.lines)
    except NotebookError:
        return 0


def _notebook_lines(text: str) -> int:
    try:
        return sum(len(cell.lines) for cell in parse_notebook(text).cells)
    except NotebookError:
        return 0


def lint_batch(targets: list[Target], fix: bool, unsafe_fixes: bool) -> list[FileOutcome]:
    """Lint `targets` in this process, one `ProjectState` per config (no cache)."""
    projects: dict[int, ProjectState] = {}
    outcomes = []
    for target in targets:
        project = projects.setdefault(id(target.config), ProjectState(target.config))
        outcomes.append(
            lint_file(target.path, target.config, fix, project, target.kind, unsafe_fixes)
        )
    return outcomes
