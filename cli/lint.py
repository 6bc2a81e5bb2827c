"""Find code and prompt files that silently break prompt caching (PFX rules).

    prefixkit lint                         # the current folder
    prefixkit lint app/ prompts/ --format full
    prefixkit lint --fix                   # apply safe fixes (sort_keys=True, sorted(set))
    prefixkit lint --format sarif > prefixkit.sarif
    prefixkit lint --jobs 4
    prefixkit lint --exclude vendor --no-cache
    prefixkit lint --include-tests         # test code too (skipped by default)
    prefixkit lint analysis.ipynb          # notebooks: findings as nb.ipynb:cell 3:12:5
    prefixkit lint --diff origin/main      # only findings on lines changed since a git ref
    prefixkit lint --write-baseline prefixkit-baseline.json   # record today's findings
    prefixkit lint --baseline prefixkit-baseline.json         # report only new ones

Exit codes: 0 clean, 1 findings (`--exit-zero` turns 1 into 0), 2 usage or
configuration error, 3 a file the linter failed on (an internal error).
Configuration: `[tool.prefixkit.lint]` in the nearest pyproject.toml (or `[lint]`
in a prefixkit.toml) above each linted path (see docs/linter/configuration.md).
Results are cached in .prefixkit_cache/ at the project root (`--no-cache`).
Silence one line with `# noqa: PFX001`, a whole file with `# prefixkit: noqa`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prefixkit.sdk import UsageError

from .main import EXIT_CONFIG, EXIT_RUNTIME

if TYPE_CHECKING:
    from prefixkit.linter import Finding, LintConfig

__all__ = ["configure", "run"]

_FORMATS = ("concise", "full", "json", "github", "sarif")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit lint` arguments."""
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: .)")
    parser.add_argument(
        "--format",
        choices=_FORMATS,
        default="concise",
        help="output format (default: concise)",
    )
    parser.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    parser.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix, also apply fixes that may change what the program sends",
    )
    parser.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings"
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="lint with N processes (default: 1)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="pyproject.toml or prefixkit.toml to use for every file "
        "(default: the nearest one above each linted path)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="also exclude files matching this gitignore pattern (relative to the "
        "current folder; repeatable)",
    )
    parser.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply exclusions and prompt globs to files named on the command line "
        "too (the pre-commit hooks use it)",
    )
    parser.add_argument(
        "--include-tests",
        action="store_true",
        help="also lint test code found in folders (tests/, test/, test_*.py, *_test.py, "
        "conftest.py), which is skipped by default; named files are always linted",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="lint every file again without reading or writing .prefixkit_cache/",
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="print counts (files checked and skipped, findings per rule) instead of "
        "the findings; JSON with --format json",
    )
    parser.add_argument(
        "--diff",
        default=None,
        metavar="REF",
        help="report only findings on lines added or changed since the git ref REF "
        "(`git diff REF`, plus untracked files; a changed notebook counts as wholly changed)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="report only findings not recorded in this baseline file",
    )
    parser.add_argument(
        "--write-baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="record the current findings in FILE (for --baseline) and exit 0",
    )


def run(args: argparse.Namespace) -> int:
    """Lint, print the findings in the chosen format, and return the exit code."""
    from prefixkit.linter import RULE_CODES, FileOutcome
    from prefixkit.linter.config import ConfigResolver
    from prefixkit.linter.discovery import discover
    from prefixkit.linter.formats import render, render_statistics
    from prefixkit.linter.lint_many import lint_targets
    from prefixkit.linter.result_cache import ResultCache
    from prefixkit.linter.summary import RunSummary

    from . import lint_scope

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.config is not None and not args.config.is_file():
        raise UsageError(f"--config {args.config}: no such file")
    if args.write_baseline is not None and (args.baseline is not None or args.diff):
        raise UsageError(
            "--write-baseline records every current finding: drop --baseline and --diff"
        )
    baseline = None if args.baseline is None else lint_scope.read_baseline(args.baseline)
    changed = (
        None
        if args.diff is None
        else lint_scope.git_changed_lines(args.diff, [*args.paths, Path(".")][0])
    )
    known = frozenset(RULE_CODES)
    resolver = ConfigResolver(known, args.config)
    try:
        found = discover(
            list(args.paths) or [Path(".")],
            resolver,
            args.exclude,
            args.force_exclude,
            args.include_tests,
        )
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    for warning in found.warnings:
        print(f"prefixkit lint: warning: {warning}", file=sys.stderr)
    caches: list[ResultCache] = []

    def cache(config: LintConfig) -> ResultCache:
        store = ResultCache.for_config(config)
        caches.append(store)
        return store

    outcomes = lint_targets(
        found.targets,
        fix=args.fix,
        jobs=args.jobs,
        cache=None if args.no_cache else cache,
        unsafe_fixes=args.unsafe_fixes,
    )
    outcomes += [FileOutcome(t.path, kind=t.kind, skipped="test code") for t in found.tests]
    for warning in {store.warning for store in caches if store.warning}:
        print(f"prefixkit lint: warning: {warning}", file=sys.stderr)
    findings = sorted(
        (finding for outcome in outcomes for finding in outcome.findings),
        key=lambda finding: finding.sort_key,
    )
    for outcome in outcomes:
        if outcome.note:
            print(f"prefixkit lint: note: {outcome.note}", file=sys.stderr)
    errors = [outcome.error for outcome in outcomes if outcome.error]
    for message in errors:
        print(f"prefixkit lint: error: {message}", file=sys.stderr)
    hidden = ""
    if changed is not None:
        lines, path_of = changed
        kept = lines.keep(findings, path_of)
        if len(kept) < len(findings):
            hidden += f"; {len(findings) - len(kept)} finding(s) on lines unchanged since {args.diff} not shown"
        findings = kept
    if baseline is not None:
        findings, count = baseline.hide(findings, lint_scope.baseline_keys(findings, args.baseline))
        hidden += f"; {count} finding(s) hidden by the baseline {args.baseline}"
    summary = RunSummary.of(outcomes, findings)
    if args.write_baseline is not None:
        lint_scope.write_baseline(args.write_baseline, findings)
        print(
            f"prefixkit lint: {summary.line()}; recorded {len(findings)} finding(s) "
            f"in the baseline {args.write_baseline}",
            file=sys.stderr,
        )
    elif args.statistics:
        print(render_statistics(args.format, summary))
    else:
        texts = _texts(args.format, findings)
        output = render(args.format, findings, texts, args.unsafe_fixes)
        if output:
            print(output)
        print(f"prefixkit lint: {summary.line()}{hidden}", file=sys.stderr)
    fixed = sum(outcome.fixed for outcome in outcomes)
    if fixed:
        print(f"prefixkit lint: fixed {fixed} finding(s)", file=sys.stderr)
    if any(outcome.internal for outcome in outcomes):
        return EXIT_RUNTIME  # the linter itself failed on a file
    if errors:
        return EXIT_CONFIG  # the project's configuration (its lock) is broken
    if args.write_baseline is not None:
        return 0
    return 1 if findings and not args.exit_zero else 0


def _texts(fmt: str, findings: Sequence[Finding]) -> dict[str, str]:
    """The source each `full` finding shows (a notebook's by cell: `file:cell N`)."""
    from prefixkit.linter import NotebookError
    from prefixkit.linter.notebook import parse_notebook

    texts: dict[str, str] = {}
    if fmt != "full":
        return texts
    for finding in findings:
        if finding.filename in texts:
            continue
        text = Path(finding.filename).read_text(encoding="utf-8", errors="replace")
        texts[finding.filename] = text
        if finding.cell is not None:
            with contextlib.suppress(NotebookError):
                texts.update(
                    parse_notebook(text, Path(finding.filename)).cell_texts(finding.filename)
                )
    return texts
