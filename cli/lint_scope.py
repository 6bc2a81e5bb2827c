"""The I/O behind `prefixkit lint --diff` and `--baseline`: running git, reading the
linted files' lines, reading and writing the baseline file. The logic lives in
`prefixkit.linter.changed_lines` and `prefixkit.linter.baseline`."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from prefixkit.linter.baseline import Baseline, BaselineKey, fingerprint
from prefixkit.linter.changed_lines import ChangedLines, parse_diff
from prefixkit.linter.finding import Finding
from prefixkit.sdk import UsageError

__all__ = ["baseline_keys", "git_changed_lines", "read_baseline", "write_baseline"]


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            check=False,
        )
    except FileNotFoundError:
        raise UsageError("--diff needs the `git` command: install git or drop --diff") from None


def git_changed_lines(ref: str, where: Path) -> tuple[ChangedLines, Callable[[str], str]]:
    """The lines changed since `ref` in the repository holding `where` (a linted path:
    added or modified lines of `git diff REF`, plus untracked files), and the function
    mapping a finding's filename (relative to the current folder) to its path there."""
    cwd = Path.cwd()
    folder = where if where.is_dir() else where.parent
    top = _git(["rev-parse", "--show-toplevel"], folder)
    if top.returncode != 0:
        raise UsageError(
            f"--diff {ref}: {folder} is not inside a git repository: lint paths of a git "
            "repository (`git init` makes one), or drop --diff"
        )
    root = Path(top.stdout.strip()).resolve()
    if _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root).returncode != 0:
        raise UsageError(
            f"--diff {ref}: unknown git ref {ref!r}: name a branch, tag or commit of this "
            "repository (a remote branch such as origin/main needs `git fetch` first)"
        )
    diff = _git(
        [
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--unified=0",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            ref,
            "--",
        ],
        root,
    )
    if diff.returncode != 0:
        raise UsageError(f"--diff {ref}: git diff failed: {diff.stderr.strip()}")
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], root)
    changed = parse_diff(diff.stdout).with_whole(
        name for name in untracked.stdout.split("\0") if name
    )

    def path_of(filename: str) -> str:
        path = (cwd / filename).resolve()
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return path.as_posix()  # outside the repository: never changed

    return changed, path_of


def baseline_keys(findings: Sequence[Finding], baseline_file: Path) -> list[BaselineKey]:
    """Each finding's key: its path relative to the baseline's folder, its code, and the
    fingerprint of its source line (read from the file, or the notebook cell) and message."""
    from prefixkit.linter import NotebookError
    from prefixkit.linter.notebook import parse_notebook

    base = baseline_file.resolve().parent
    texts: dict[str, list[str]] = {}

    def lines(finding: Finding) -> list[str]:
        name = finding.filename
        if name not in texts:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
            texts[name] = text.splitlines()
            if finding.cell is not None or name.endswith(".ipynb"):
                with contextlib.suppress(NotebookError):
                    cells = parse_notebook(text, Path(name)).cell_texts(name)
                    texts.update({key: cell.splitlines() for key, cell in cells.items()})
        if finding.cell is not None:
            return texts.get(f"{name}:cell {finding.cell}", [])
        return texts[name]

    keys = []
    for finding in findings:
        source = lines(finding)
        row = finding.start.row
        line = source[row - 1] if 0 < row <= len(source) else ""
        path = Path(os.path.relpath(Path(finding.filename).resolve(), base)).as_posix()
        keys.append(BaselineKey(path, finding.code, fingerprint(line, finding.message)))
    return keys


def read_baseline(path: Path) -> Baseline:
    """The baseline in `path` (UsageError naming it when it cannot be read)."""
    fix = f"write one with `prefixkit lint --write-baseline {path}`"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"--baseline {path}: cannot read it ({exc.strerror or exc}): {fix}"
        ) from None
    try:
        return Baseline.from_json(text)
    except ValueError as exc:
        raise UsageError(f"--baseline {path}: {exc}: {fix}") from None


def write_baseline(path: Path, findings: Sequence[Finding]) -> None:
    """Write the findings' baseline to `path`."""
    text = Baseline.of(baseline_keys(findings, path)).to_json()
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"--write-baseline {path}: cannot write it ({exc.strerror or exc})"
        ) from None
