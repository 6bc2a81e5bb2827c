"""prefixkit lint on real repositories: size, time, findings per rule, crashes, precision, recall.

    .venv/bin/python bench/lint_real_world.py ~/src/aider ~/src/swarm
    .venv/bin/python bench/lint_real_world.py /work/realworld/* \\
        --judged bench/lint_real_world_judged.json

The repositories are not part of prefixkit: clone them yourself and pass
their folders (the folder's name is the repository's name in the output and
in the judged list). Each is linted the way a new user would lint it: one
`prefixkit lint . --format json --exit-zero` subprocess per repository, run
inside the repository (with `--no-cache` when the CLI has a result cache, so
every run does the full work). Printed per repository:

- files, notebooks, lines: the `.py`/`.pyi` files, `.ipynb` notebooks and
  their lines under the folder (outside the folders the linter never enters);
- seconds: wall time of the lint subprocess (CPU seconds beside it);
- findings per rule;
- crashes: an exit code other than 0/1, a traceback or internal error on
  stderr, or a `PFX000` (cannot parse) on a Python file CPython parses.

With `--judged FILE`, findings are compared with a list judged by hand
(`findings`: repo, path, line, rule, verdict true/false, reason) and with
cache breakers found by hand (`breakers`: id, repo, path, line or lines
[first, last], rule, what): precision per rule and overall over the judged
findings this run produced, findings not judged yet, and recall of the
breakers (one is caught when a finding other than PFX000 starts on one of
its lines in its file, or in one of its `also` places: a value made in one
file and put into the prompt in another). An optional `sets` object (name
-> repository names) adds precision and recall per set of repositories. In a
notebook, `cell` (1-based, among all cells) names the cell and lines count
within it, as in the linter's JSON. Exit code 1 when a crash happened.

With `--others`, the two other static linters for prompt caching on PyPI,
cachedrift and pcdlint (pinned in `OTHER_LINTERS`), are installed once into a
virtual environment of their own (`~/.cache/prefixkit/other-linters`, made
with pip the first time), run on the same repositories
(`cachedrift . --format json`, `pcdlint . --format json`, inside each), and
their findings are mapped to (repository, path, line). Beside prefixkit's,
with `--judged`, each tool's precision and recall are printed: one of their
findings is true or false as the judged prefixkit finding on the same line
(any rule: the tools' rules differ) says, true when it starts on a
hand-found breaker's line, and not judged otherwise (counted as such); a
breaker is caught as for prefixkit. `--only-others` runs those two alone.
`--load FILE` scores the findings a `--save` run wrote instead of linting with
prefixkit again.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefixkit.linter.discovery import DEFAULT_EXCLUDED_DIRS

# The other static linters for prompt caching on PyPI, at the versions compared.
OTHER_LINTERS = {"cachedrift": "0.1.0", "pcdlint": "0.3.0"}
OTHERS_HOME = Path.home() / ".cache" / "prefixkit" / "other-linters"
PYTHON_SUFFIXES = (".py", ".pyi")
NOTEBOOK_SUFFIX = ".ipynb"
SYNTAX_ERROR = "PFX000"
CRASH_MARKERS = ("Traceback (most recent call last)", "internal error")


@dataclass
class RepoRun:
    """One repository's lint run and what was counted around it."""

    name: str
    path: Path
    files: int = 0
    notebooks: int = 0
    lines: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    exit_code: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)


def source_files(root: Path) -> Iterator[Path]:
    """Python files and notebooks under `root`, skipping the folders the linter never enters."""
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in DEFAULT_EXCLUDED_DIRS)
        for name in sorted(names):
            if name.endswith((*PYTHON_SUFFIXES, NOTEBOOK_SUFFIX)):
                yield Path(folder) / name


def count_lines(path: Path) -> int:
    """Lines of a text file (a notebook counts the lines of its code cells)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != NOTEBOOK_SUFFIX:
        return text.count("\n") + (bool(text) and not text.endswith("\n"))
    try:
        cells = json.loads(text).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return 0
    total = 0
    for cell in cells:
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            total += len(source) if isinstance(source, list) else source.count("\n") + 1
    return total


def parses(path: Path) -> bool:
    """Whether CPython parses the Python file (so a PFX000 on it is the linter's fault)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return False
    return True


def lint_command(prefixkit: Sequence[str]) -> list[str]:
    """The lint command line, with `--no-cache` when this prefixkit has a result cache."""
    help_text = subprocess.run(
        [*prefixkit, "lint", "--help"], capture_output=True, text=True, check=False
    ).stdout
    command = [*prefixkit, "lint", ".", "--format", "json", "--exit-zero"]
    if "--no-cache" in help_text:
        command.append("--no-cache")
    return command


def relative(filename: str, root: Path) -> str:
    """A finding's file as a path relative to the repository, with forward slashes."""
    path = Path(filename)
    if not path.is_absolute():
        path = root / path
    return Path(os.path.normpath(path)).relative_to(root.resolve()).as_posix()


def lint_repo(path: Path, command: Sequence[str], timeout: float) -> RepoRun:
    """Count a repository's sources, lint it in a subprocess, and record crashes."""
    run = count_sources(path)
    root = run.path
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            list(command), cwd=root, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        run.seconds = time.perf_counter() - started
        run.crashes.append(f"no answer within {timeout:.0f} s")
        return run
    run.seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run.exit_code = completed.returncode
    if completed.returncode not in (0, 1):
        run.crashes.append(f"exit code {completed.returncode}: {completed.stderr.strip()[-300:]}")
    for line in completed.stderr.splitlines():
        if any(marker in line for marker in CRASH_MARKERS):
            run.crashes.append(line.strip())
    try:
        findings = json.loads(completed.stdout or "[]")
    except json.JSONDecodeError:
        run.crashes.append("stdout is not the JSON list of findings")
        return run
    for finding in findings:
        finding["path"] = relative(finding["filename"], root)
        if finding["code"] == SYNTAX_ERROR:
            file = root / finding["path"]
            if file.suffix in PYTHON_SUFFIXES and parses(file):
                row = finding["location"]["row"]
                run.crashes.append(
                    f"{SYNTAX_ERROR} on {finding['path']}:{row}, which CPython parses"
                )
    run.findings = findings
    return run


def per_rule(runs: Sequence[RepoRun]) -> list[str]:
    """Every rule code that appears in any run, in code order."""
    return sorted({finding["code"] for run in runs for finding in run.findings})


def print_table(runs: Sequence[RepoRun]) -> None:
    """The per-repository table (Markdown) and its total row."""
    codes = per_rule(runs)
    header = ["repository", "files", "notebooks", "lines", "seconds", "CPU s", *codes, "crashes"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    totals = Counter[str]()
    for run in runs:
        counts = Counter(finding["code"] for finding in run.findings)
        totals.update(counts)
        cells = [
            run.name,
            str(run.files),
            str(run.notebooks),
            f"{run.lines:,}",
            f"{run.seconds:.1f}",
            f"{run.cpu_seconds:.1f}",
            *(str(counts[code]) for code in codes),
            str(len(run.crashes)),
        ]
        print("| " + " | ".join(cells) + " |")
    total = [
        "**total**",
        str(sum(run.files for run in runs)),
        str(sum(run.notebooks for run in runs)),
        f"{sum(run.lines for run in runs):,}",
        f"{sum(run.seconds for run in runs):.1f}",
        f"{sum(run.cpu_seconds for run in runs):.1f}",
        *(str(totals[code]) for code in codes),
        str(sum(len(run.crashes) for run in runs)),
    ]
    print("| " + " | ".join(total) + " |")
    for run in runs:
        for crash in run.crashes:
            print(f"crash in {run.name}: {crash}")


def load_judged(path: Path) -> dict[str, Any]:
    """The judged list, checked for the fields the comparison needs."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not {"findings", "breakers"} <= data.keys():
        raise SystemExit(f"{path}: expected an object with 'findings' and 'breakers' lists")
    for entry in data["findings"]:
        missing = {"repo", "path", "line", "rule", "verdict", "reason"} - entry.keys()
        if missing:
            raise SystemExit(f"{path}: judged finding {entry} lacks {sorted(missing)}")
    for entry in data["breakers"]:
        missing = {"id", "repo", "path", "rule", "what"} - entry.keys()
        if missing or not ({"line", "lines"} & entry.keys()):
            raise SystemExit(f"{path}: breaker {entry} lacks {sorted(missing) or ['line']}")
    return data


def breaker_places(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Where a finding catches a breaker: its own path and lines, and each `also` place.

    A value made in one file and put into the prompt in another has two
    places a finding may point at (`also`: a list of path, line or lines, cell).
    """
    return [entry, *entry.get("also", [])]


def breaker_lines(entry: dict[str, Any]) -> range:
    """The lines a breaker spans (its `lines` [first, last], or its one `line`)."""
    if "lines" in entry:
        first, last = entry["lines"]
        return range(first, last + 1)
    return range(entry["line"], entry["line"] + 1)


@dataclass
class Score:
    """Judged findings and hand-found breakers of some repositories, compared with a run."""

    judged: Counter[str] = field(default_factory=Counter)
    true: Counter[str] = field(default_factory=Counter)
    unjudged: list[str] = field(default_factory=list)
    breakers: int = 0
    missed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        n = sum(self.judged.values())
        return sum(self.true.values()) / n if n else 0.0

    @property
    def recall(self) -> float:
        return (self.breakers - len(self.missed)) / self.breakers if self.breakers else 0.0


def score(runs: Sequence[RepoRun], judged: dict[str, Any], repos: set[str]) -> Score:
    """Precision of the judged findings and recall of the breakers, over `repos` only."""
    verdicts = {
        (entry["repo"], entry["path"], entry.get("cell"), entry["line"], entry["rule"]): entry
        for entry in judged["findings"]
    }
    result = Score()
    chosen = [run for run in runs if run.name in repos]
    for run in chosen:
        for finding in run.findings:
            code = finding["code"]
            key = (run.name, finding["path"], finding.get("cell"), finding["location"]["row"], code)
            entry = verdicts.get(key)
            if entry is None:
                result.unjudged.append(
                    f"{run.name}/{_where(finding['path'], key[2], key[3])} {code}"
                )
                continue
            result.judged[code] += 1
            result.true[code] += bool(entry["verdict"])
    found = {
        (run.name, finding["path"], finding.get("cell"), finding["location"]["row"])
        for run in chosen
        for finding in run.findings
        if finding["code"] != SYNTAX_ERROR
    }
    breakers = [entry for entry in judged["breakers"] if entry["repo"] in {r.name for r in chosen}]
    result.breakers = len(breakers)
    result.missed = [
        entry
        for entry in breakers
        if not any(
            (entry["repo"], place["path"], place.get("cell"), line) in found
            for place in breaker_places(entry)
            for line in breaker_lines(place)
        )
    ]
    return result


def compare(runs: Sequence[RepoRun], judged: dict[str, Any]) -> None:
    """Precision per rule over judged findings of this run, recall of the breakers, per set."""
    overall = score(runs, judged, {run.name for run in runs})
    print("\n| rule | judged | true | false | precision |")
    print("|---|---|---|---|---|")
    for code in sorted(overall.judged):
        n, t = overall.judged[code], overall.true[code]
        print(f"| {code} | {n} | {t} | {n - t} | {t / n:.2f} |")
    n, t = sum(overall.judged.values()), sum(overall.true.values())
    print(f"| **all** | {n} | {t} | {n - t} | {overall.precision:.2f} |")
    if overall.unjudged:
        print(f"\n{len(overall.unjudged)} finding(s) not judged yet:")
        for line in overall.unjudged:
            print(f"  {line}")
    caught = overall.breakers - len(overall.missed)
    print(f"\nrecall of hand-found breakers: {caught}/{overall.breakers} = {overall.recall:.2f}")
    for entry in overall.missed:
        lines = breaker_lines(entry)
        where = f"{lines[0]}" if len(lines) == 1 else f"{lines[0]}-{lines[-1]}"
        print(
            f"  missed {entry['id']} {entry['repo']}/{entry['path']}:{where} ({entry['rule']}) "
            f"{entry['what']}"
        )
    sets: dict[str, list[str]] = judged.get("sets", {})
    if sets:
        print(
            "\n| set | repositories | findings judged | true | precision | breakers caught | recall |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, members in sets.items():
            part = score(runs, judged, set(members))
            n, t = sum(part.judged.values()), sum(part.true.values())
            caught = part.breakers - len(part.missed)
            linted = len({run.name for run in runs} & set(members))
            print(
                f"| {name} | {linted} | {n} | {t} | {part.precision:.2f} "
                f"| {caught}/{part.breakers} | {part.recall:.2f} |"
            )


def _where(path: str, cell: int | None, line: object) -> str:
    return f"{path}:cell {cell}:{line}" if cell is not None else f"{path}:{line}"


def others_venv(home: Path = OTHERS_HOME) -> Path:
    """The `bin` folder of a virtual environment holding `OTHER_LINTERS` (made once)."""
    pins = [f"{name}=={version}" for name, version in sorted(OTHER_LINTERS.items())]
    marker = home / "installed.txt"
    bin_dir = home / "bin"
    if marker.is_file() and marker.read_text(encoding="utf-8").split() == pins:
        return bin_dir
    print(f"installing {' '.join(pins)} into {home}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", *pins], check=True)
    marker.write_text("\n".join(pins) + "\n", encoding="utf-8")
    return bin_dir


def _finding(rule: str, path: str, line: int) -> dict[str, Any]:
    """Another tool's finding in the shape prefixkit's JSON findings have (what scoring reads)."""
    return {"code": rule, "path": path, "cell": None, "location": {"row": line}}


def findings_from_cachedrift(output: str, root: Path) -> list[dict[str, Any]]:
    """cachedrift's JSON report (`findings`: rule, file, line) as findings under `root`."""
    report = json.loads(output)
    return [
        _finding(entry["rule"], relative(entry["file"], root), int(entry["line"]))
        for entry in report.get("findings", [])
    ]


def findings_from_pcdlint(output: str, root: Path) -> list[dict[str, Any]]:
    """pcdlint's JSON list (rule_id, file_path, lineno) as findings under `root`."""
    return [
        _finding(entry["rule_id"], relative(entry["file_path"], root), int(entry["lineno"]))
        for entry in json.loads(output or "[]")
    ]


OTHER_COMMANDS = {
    "cachedrift": (["cachedrift", ".", "--format", "json"], findings_from_cachedrift, (0, 1, 2)),
    # pcdlint exits 2 when some file could not be analysed, still reporting the rest
    "pcdlint": (["pcdlint", ".", "--format", "json"], findings_from_pcdlint, (0, 1, 2)),
}


def lint_repo_with(tool: str, bin_dir: Path, run: RepoRun, timeout: float) -> RepoRun:
    """`tool`'s run on the repository `run` describes (its counts copied)."""
    arguments, parse, exit_codes = OTHER_COMMANDS[tool]
    other = RepoRun(run.name, run.path, run.files, run.notebooks, run.lines)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            [str(bin_dir / arguments[0]), *arguments[1:]],
            cwd=run.path,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        other.crashes.append(f"no answer within {timeout:.0f} s")
        return other
    other.seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    other.cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    other.exit_code = completed.returncode
    if completed.returncode not in exit_codes:
        other.crashes.append(f"exit code {completed.returncode}: {completed.stderr[-300:]}")
    try:
        other.findings = parse(completed.stdout, run.path)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        other.crashes.append(f"output not understood: {exc}")
    return other


def score_by_place(runs: Sequence[RepoRun], judged: dict[str, Any], repos: set[str]) -> Score:
    """Precision and recall of another tool's findings, judged by place, not by rule.

    A finding on a line where prefixkit's finding was judged takes that verdict (true if
    any judged there is true); one on a hand-found breaker's line is true; any other is
    not judged. Recall is as for prefixkit: a finding starting on a breaker's line.
    """
    verdicts: dict[tuple[str, str, int | None, int], bool] = {}
    for entry in judged["findings"]:
        key = (entry["repo"], entry["path"], entry.get("cell"), entry["line"])
        verdicts[key] = verdicts.get(key, False) or bool(entry["verdict"])
    breaker_lines_at = {
        (entry["repo"], place["path"], place.get("cell"), line)
        for entry in judged["breakers"]
        for place in breaker_places(entry)
        for line in breaker_lines(place)
    }
    result = Score()
    chosen = [run for run in runs if run.name in repos]
    for run in chosen:
        for finding in run.findings:
            code = finding["code"]
            key = (run.name, finding["path"], finding.get("cell"), finding["location"]["row"])
            if key in verdicts:
                result.judged[code] += 1
                result.true[code] += verdicts[key]
            elif key in breaker_lines_at:
                result.judged[code] += 1
                result.true[code] += 1
            else:
                result.unjudged.append(f"{run.name}/{_where(key[1], key[2], key[3])} {code}")
    rescored = score(chosen, {**judged, "findings": []}, repos)
    result.breakers, result.missed = rescored.breakers, rescored.missed
    return result


def compare_tools(results: Mapping[str, tuple[Sequence[RepoRun], Score]]) -> list[str]:
    """One Markdown table row per tool: findings, judged, true, precision, recall."""
    lines = [
        "| linter | findings | judged | true | precision (judged) | not judged "
        "| breakers caught | recall | CPU s | crashes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tool, (runs, result) in results.items():
        n, t = sum(result.judged.values()), sum(result.true.values())
        caught = result.breakers - len(result.missed)
        findings = sum(len(run.findings) for run in runs)
        precision = f"{result.precision:.2f}" if n else "-"
        lines.append(
            f"| {tool} | {findings} | {n} | {t} | {precision} | {len(result.unjudged)} "
            f"| {caught}/{result.breakers} | {result.recall:.2f} "
            f"| {sum(run.cpu_seconds for run in runs):.1f} "
            f"| {sum(len(run.crashes) for run in runs)} |"
        )
    return lines


def load_saved(path: Path, runs: Sequence[RepoRun]) -> None:
    """Give each run the findings a `--save` run wrote for its repository."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    for run in runs:
        run.findings = [f for f in saved if f["repo"] == run.name]


def count_sources(path: Path) -> RepoRun:
    """A repository's run with its files, notebooks and lines counted, not linted yet."""
    root = path.resolve()
    run = RepoRun(root.name, root)
    for source in source_files(root):
        if source.suffix == NOTEBOOK_SUFFIX:
            run.notebooks += 1
        else:
            run.files += 1
        run.lines += count_lines(source)
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", type=Path, help="repository folders")
    parser.add_argument("--judged", type=Path, help="JSON list of judged findings and breakers")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per repository")
    parser.add_argument(
        "--prefixkit",
        default=f"{sys.executable} -m prefixkit.cli.main",
        help="command that runs prefixkit (default: this interpreter's prefixkit)",
    )
    parser.add_argument("--save", type=Path, help="write every finding (JSON) to this file")
    parser.add_argument(
        "--load", type=Path, help="score the findings --save wrote instead of linting again"
    )
    parser.add_argument(
        "--others", action="store_true", help="run cachedrift and pcdlint beside prefixkit"
    )
    parser.add_argument(
        "--only-others", action="store_true", help="run cachedrift and pcdlint, not prefixkit"
    )
    args = parser.parse_args(argv)
    args.others = args.others or args.only_others
    for repo in args.repos:
        if not repo.is_dir():
            parser.error(f"{repo} is not a folder")
    judged = load_judged(args.judged) if args.judged else None
    command = lint_command(args.prefixkit.split())
    if args.load is None and not args.only_others:
        print(f"command: {' '.join(command)} (in each repository)\n")
    runs = []
    if args.load is not None or args.only_others:
        runs = [count_sources(repo) for repo in args.repos]
    if args.load is not None:
        load_saved(args.load, runs)
        print(f"findings loaded from {args.load}, not linted again\n")
    for repo in args.repos if not runs else []:
        runs.append(lint_repo(repo, command, args.timeout))
        done = runs[-1]
        print(
            f"linted {done.name}: {len(done.findings)} findings in {done.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    if not args.only_others:
        print_table(runs)
    others: dict[str, list[RepoRun]] = {}
    if args.others:
        bin_dir = others_venv()
        for tool in OTHER_COMMANDS:
            others[tool] = [lint_repo_with(tool, bin_dir, run, args.timeout) for run in runs]
            print(f"\n{tool} {OTHER_LINTERS[tool]}:")
            print_table(others[tool])
    if args.save:
        saved = [{"repo": run.name, **finding} for run in runs for finding in run.findings]
        args.save.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if judged is not None:
        if not args.only_others:
            compare(runs, judged)
        if others:
            names = {run.name for run in runs}
            results: dict[str, tuple[Sequence[RepoRun], Score]] = {}
            if not args.only_others:
                results["prefixkit"] = (runs, score(runs, judged, names))
            for tool, tool_runs in others.items():
                results[f"{tool} {OTHER_LINTERS[tool]}"] = (
                    tool_runs,
                    score_by_place(tool_runs, judged, names),
                )
            print("\nbeside the other linters (theirs judged by place, see the docstring):")
            print("\n".join(compare_tools(results)))
    return 1 if any(run.crashes for run in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
