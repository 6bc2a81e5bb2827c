"""Find code and prompt files that silently break prompt caching (PFX rules).

    prefixkit lint                         # the current folder
    prefixkit lint app/ prompts/ --format full
    prefixkit lint --fix                   # apply safe fixes (sort_keys=True, sorted(set))
    prefixkit lint --format sarif > prefixkit.sarif
    prefixkit lint --jobs 4

Exit codes: 0 clean, 1 findings (`--exit-zero` turns 1 into 0), 2 usage or
configuration error, 3 a file the linter failed on (an internal error).
Configuration: `[tool.prefixkit.lint]` in the nearest pyproject.toml (see
docs/rules.md). Silence one line with `# noqa: PFX001`, a whole file with
`# prefixkit: noqa`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefixkit.sdk.errors import UsageError

from .main import EXIT_CONFIG, EXIT_RUNTIME

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
        metavar="PYPROJECT",
        help="pyproject.toml to read (default: the nearest one from the current folder up)",
    )


def run(args: argparse.Namespace) -> int:
    """Lint, print the findings in the chosen format, and return the exit code."""
    from prefixkit.linter.config import find_pyproject, load_config
    from prefixkit.linter.discovery import discover
    from prefixkit.linter.engine import lint_paths
    from prefixkit.linter.formats import render
    from prefixkit.linter.rules import ALL_RULES

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    known = frozenset(rule.code for rule in ALL_RULES)
    pyproject = args.config if args.config is not None else find_pyproject(Path.cwd())
    if args.config is not None and not args.config.is_file():
        raise UsageError(f"--config {args.config}: no such file")
    config = load_config(pyproject, known)
    try:
        files = discover(list(args.paths) or [Path(".")], config)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    outcomes = lint_paths(files, config, fix=args.fix, jobs=args.jobs)
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
    texts: dict[str, str] = {}
    if args.format == "full":
        for finding in findings:
            if finding.filename not in texts:
                texts[finding.filename] = Path(finding.filename).read_text(
                    encoding="utf-8", errors="replace"
                )
    output = render(args.format, findings, texts)
    if output:
        print(output)
    fixed = sum(outcome.fixed for outcome in outcomes)
    if fixed:
        print(f"prefixkit lint: fixed {fixed} finding(s)", file=sys.stderr)
    if any(outcome.internal for outcome in outcomes):
        return EXIT_RUNTIME  # the linter itself failed on a file
    if errors:
        return EXIT_CONFIG  # the project's configuration (its lock) is broken
    return 1 if findings and not args.exit_zero else 0
