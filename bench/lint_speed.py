"""prefixkit lint vs Fixit: lines per second on a generated prompt-building corpus,
and lines per CPU second on real repositories (against another prefixkit tree).

    .venv/bin/python bench/lint_speed.py                 # 50k lines, --jobs 2
    .venv/bin/python bench/lint_speed.py --lines 100000 --jobs 4
    .venv/bin/python bench/lint_speed.py --repos /tmp/devcorpus/* \\
        --baseline /tmp/lint-baseline/prefixkit --repeat 1

Generates a corpus of realistic prompt-building modules (prompt builder
classes, helper functions, provider calls with system/tools/messages,
logging and timing code, settings, some cache breakers), then times, on the
same files and in this one run:

- prefixkit, single process (all 9 Python rules, one metadata wrapper per file);
- prefixkit with `--jobs N` (process pool);
- Fixit, single process (`parallel=False`), with 9 built-in rules that use
  the same libcst metadata (QualifiedNameProvider, ScopeProvider);
- prefixkit single process on half the corpus, to check linear scaling;
- prefixkit with the re-lint cache: a first run (empty `.prefixkit_cache/`,
  which it fills) and an unchanged re-lint, in this process and as the
  `prefixkit lint` command (a new process each: start-up and imports included).

Runs are interleaved (so both tools see the same load on a shared machine)
and each timing is the best of `--repeat` runs after one warm-up;
single-process runs are compared on CPU time and on wall time.

With `--repos DIR...` each repository is also linted the way `prefixkit lint`
lints it (the CLI's own code in a new process: discovery, whole-project
analysis, one process, `--no-cache`), and the lines of its Python files and
notebooks (as bench/lint_real_world.py counts them) per CPU second of that
lint are printed per repository and overall (start-up and imports are not
counted). With `--baseline TREE` the same runs use another source tree's
prefixkit package too (a folder holding `linter/`, `sdk/`, ...: an extracted
`git archive` or a checkout), interleaved with this one, repository by
repository, best of `--repeat`. `--skip-corpus` leaves out the generated corpus.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prefixkit.linter import LintConfig, lint_paths
from prefixkit.linter.discovery import CACHE_DIR_NAME
from prefixkit.linter.result_cache import ResultCache, linter_fingerprint

FIXIT_RULES = (
    "CollapseIsinstanceChecks",
    "UseClsInClassmethod",
    "CompareSingletonPrimitivesByIs",
    "NoNamedTuple",
    "ReplaceUnionWithOptional",
    "UseAsyncSleepInAsyncDef",
    "VariadicCallableSyntax",
    "NoRedundantFString",
    "RewriteToLiteral",
)

HEADER = '''"""Prompt plumbing for the {n} assistant."""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from datetime import datetime as dt

import anthropic

log = logging.getLogger(__name__)
MODEL = os.environ.get("MODEL_{n}", "claude-sonnet-5")
PRODUCT = "Product{n}"
'''

BLOCKS = [
    '''
SYSTEM_{n} = f"""You are the support assistant for {{PRODUCT}}.
Answer briefly, cite the knowledge base, never invent order numbers.
Region: {{os.getenv("REGION", "eu")}}."""


def ask_{n}(client: anthropic.Anthropic, history: list[dict], question: str):
    started = time.perf_counter()
    reply = client.messages.create(
        model=MODEL,
        max_tokens=512,
        system=[{{"type": "text", "text": SYSTEM_{n}, "cache_control": {{"type": "ephemeral"}}}}],
        messages=[*history, {{"role": "user", "content": question}}],
        extra_headers={{"Idempotency-Key": str(time.time_ns())}},
    )
    log.info("ask_{n} took %.3fs", time.perf_counter() - started)
    return reply
''',
    '''
@dataclass
class Ticket{n}:
    title: str
    body: str
    priority: int = 3


class TicketPrompt{n}:
    """Builds the triage prompt for tickets."""

    def __init__(self, team: str, user_name: str):
        self.team = team
        self.user_name = user_name
        self.created = dt.now()

    def system(self) -> str:
        return "You triage tickets for the %s team." % self.team

    def render(self, ticket: Ticket{n}) -> list[dict]:
        return [
            {{"role": "system", "content": self.system()}},
            {{"role": "user", "content": f"{{ticket.title}}\\n{{ticket.body}} (by {{self.user_name}})"}},
        ]

    def send(self, client, ticket: Ticket{n}):
        if ticket.priority is None or ticket.priority > 5:
            raise ValueError("bad priority")
        return client.chat.completions.create(model=MODEL, messages=self.render(ticket))
''',
    """
SCHEMA_{n} = {{"type": "object", "properties": {{"answer": {{"type": "string"}}, "score": {{"type": "number"}}}}}}
TOOL_NAMES_{n} = ["search", "calculator", "weather"]
TOOL_SPECS_{n} = {{
    name: {{"name": name, "description": f"The {{name}} tool", "input_schema": SCHEMA_{n}}}
    for name in TOOL_NAMES_{n}
}}


def tools_{n}() -> list[dict]:
    return [TOOL_SPECS_{n}[name] for name in sorted(TOOL_SPECS_{n})]


def answer_format_{n}() -> str:
    return "Reply with JSON matching:\\n" + json.dumps(SCHEMA_{n}, indent=2, sort_keys=True)


def run_{n}(client, question: str):
    return client.messages.create(
        model=MODEL,
        system=answer_format_{n}(),
        tools=tools_{n}(),
        messages=[{{"role": "user", "content": question}}],
    )
""",
    """
def summarise_{n}(client, conversation: list[str], summary: str | None = None):
    text = "\\n".join(conversation[-20:])
    messages = [
        {{"role": "system", "content": "You write short, factual summaries."}},
        {{"role": "user", "content": f"Previous summary: {{summary or 'none'}}\\n\\n{{text}}"}},
    ]
    for attempt in range(3):
        try:
            return client.chat.completions.create(model=MODEL, messages=messages)
        except Exception:
            log.warning("retry %d at %s", attempt, time.time())
            time.sleep(0.5 * attempt)
    return None


def metrics_{n}(values: list[float]) -> dict:
    if isinstance(values, list) or isinstance(values, tuple):
        values = list(values)
    return {{"count": len(values), "mean": sum(values) / max(len(values), 1)}}
""",
    '''
class Agent{n}:
    """A tool-using agent with a rolling cache breakpoint on the latest turn."""

    instructions = "Plan, call tools, then answer. Keep answers under 200 words."

    def __init__(self, client, tools: list[dict]):
        self.client = client
        self.tools = tools
        self.history: list[dict] = []

    @classmethod
    def create(cls, client):
        return cls(client, tools=[{{"name": "lookup", "input_schema": {{"type": "object"}}}}])

    def turn(self, question: str):
        block = {{"type": "text", "text": question, "cache_control": {{"type": "ephemeral"}}}}
        self.history.append({{"role": "user", "content": [block]}})
        reply = self.client.messages.create(
            model=MODEL,
            system=self.instructions,
            tools=self.tools,
            messages=self.history,
        )
        self.history.append({{"role": "assistant", "content": reply.content}})
        return reply
''',
    """
def daily_brief_{n}(client, request, topics):
    header = "Daily brief generated at " + dt.now().strftime("%H:%M")
    system = f"{{header}}. Audience: {{request.user.name}}. Topics: {{', '.join(topics)}}"
    payload = json.dumps({{"topics": topics, "tenant": request.tenant_id}})
    return client.messages.create(
        model=MODEL,
        system=system,
        messages=[{{"role": "user", "content": payload}}],
    )


def format_row_{n}(row: dict) -> str:
    parts = []
    for key in sorted(row):
        parts.append(f"{{key}}={{row[key]!r}}")
    return ", ".join(parts)
""",
]


def generate(folder: Path, lines: int, seed: int = 7) -> tuple[list[Path], int]:
    """Write modules of about 250 lines into `folder` until `lines` is reached."""
    rng = random.Random(seed)
    files: list[Path] = []
    total = 0
    n = 0
    while total < lines:
        parts = [HEADER.format(n=n)]
        while sum(part.count("\n") for part in parts) < 250:
            n += 1
            parts.append(rng.choice(BLOCKS).format(n=n))
        text = "".join(parts)
        path = folder / f"module_{len(files):04d}.py"
        path.write_text(text, encoding="utf-8")
        files.append(path)
        total += text.count("\n")
    return files, total


def timed(action) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds of this process) for one call of `action`."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def run_fixit(files: list[Path]) -> int:
    from fixit.api import fixit_paths
    from fixit.ftypes import Options, QualifiedRule

    options = Options(rules=[QualifiedRule("fixit.rules", name) for name in FIXIT_RULES])
    count = 0
    for result in fixit_paths(files, options=options, parallel=False):
        if result.violation is not None:
            count += 1
        if result.error is not None:
            raise RuntimeError(f"fixit failed on {result.path}: {result.error}")
    return count


def lint_like_the_cli(repo: Path) -> dict[str, float | str]:
    """Lint `repo` as `prefixkit lint . --no-cache` does, in this process; its CPU and wall
    seconds (imports excluded) and which prefixkit linted it."""
    import prefixkit.linter
    from prefixkit.cli.main import main as prefixkit_main

    os.chdir(repo)
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        wall, cpu = time.perf_counter(), time.process_time()
        code = prefixkit_main(["lint", ".", "--format", "json", "--exit-zero", "--no-cache"])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if code != 0:
        raise SystemExit(f"prefixkit lint exited {code} in {repo}")
    return {"cpu": cpu, "wall": wall, "linter": str(Path(prefixkit.linter.__file__).parent)}


def package_path(tree: Path, scratch: Path) -> str:
    """A PYTHONPATH entry under which `import prefixkit` is `tree`'s package."""
    if not (tree / "linter" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {tree}: expected a prefixkit source tree holding linter/")
    if tree.name == "prefixkit":
        return str(tree.resolve().parent)
    (scratch / "prefixkit").symlink_to(tree.resolve(), target_is_directory=True)
    return str(scratch)


@dataclass
class RepoTimes:
    """A repository's lines and the best CPU seconds of each tree that linted it."""

    name: str
    lines: int
    cpu: dict[str, float] = field(default_factory=dict)


def time_in_subprocess(repo: Path, pythonpath: str | None) -> dict[str, float | str]:
    """`lint_like_the_cli(repo)` in a new process, under `pythonpath`'s prefixkit if given."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(repo)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"linting {repo} failed:\n{done.stderr[-2000:]}")
    result: dict[str, float | str] = json.loads(done.stdout.splitlines()[-1])
    return result


def repo_rates(
    runs: Sequence[RepoTimes], trees: Sequence[str]
) -> list[tuple[str, int, list[float]]]:
    """Per repository and overall: lines and lines per CPU second of each tree."""
    rows = [
        (
            run.name,
            run.lines,
            [run.lines / run.cpu[tree] if run.cpu[tree] else 0.0 for tree in trees],
        )
        for run in runs
    ]
    lines = sum(run.lines for run in runs)
    totals = [sum(run.cpu[tree] for run in runs) for tree in trees]
    rows.append(("**all**", lines, [lines / total if total else 0.0 for total in totals]))
    return rows


def real_repositories(repos: Sequence[Path], baseline: Path | None, repeat: int) -> None:
    """Lint each repository as the CLI does with this tree (and `baseline`), interleaved,
    best of `repeat`; print lines per CPU second per repository and overall."""
    from lint_real_world import count_lines, source_files

    with tempfile.TemporaryDirectory() as scratch:
        trees: dict[str, str | None] = {"this tree": None}
        if baseline is not None:
            trees[f"baseline {baseline}"] = package_path(baseline, Path(scratch))
        runs = [
            RepoTimes(
                repo.resolve().name, sum(count_lines(p) for p in source_files(repo.resolve()))
            )
            for repo in repos
        ]
        linters: dict[str, str] = {}
        for _ in range(repeat):
            for repo, run in zip(repos, runs, strict=True):
                for tree, pythonpath in trees.items():
                    result = time_in_subprocess(repo.resolve(), pythonpath)
                    linters[tree] = str(result["linter"])
                    cpu = float(result["cpu"])
                    run.cpu[tree] = min(run.cpu.get(tree, cpu), cpu)
                print(f"linted {run.name}", file=sys.stderr, flush=True)
    names = list(trees)
    print(
        f"\nreal repositories: lines per CPU second (best of {repeat}; `prefixkit lint . "
        "--no-cache` as the CLI runs it, whole-project analysis included, imports not)"
    )
    for tree in names:
        print(f"  {tree}: {linters[tree]}")
    header = ["repository", "lines", *(f"{tree} lines/CPU s" for tree in names)]
    if len(names) == 2:
        header.append("this / baseline")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, lines, rates in repo_rates(runs, names):
        cells = [name, f"{lines:,}", *(f"{rate:,.0f}" for rate in rates)]
        if len(names) == 2:
            cells.append(f"{rates[0] / rates[1]:.2f}x" if rates[1] else "-")
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--repos", nargs="*", type=Path, default=[], help="real repositories to lint as well"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another prefixkit source tree to time on --repos"
    )
    parser.add_argument("--skip-corpus", action="store_true", help="only the --repos run")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(lint_like_the_cli(args.worker)))
        return
    for repo in args.repos:
        if not repo.is_dir():
            parser.error(f"--repos {repo} is not a folder")
    if args.baseline is not None and not args.repos:
        parser.error("--baseline times real repositories: give --repos too")
    if not args.skip_corpus:
        corpus(args)
    if args.repos:
        real_repositories(args.repos, args.baseline, args.repeat)


def corpus(args: argparse.Namespace) -> None:
    """The generated corpus: prefixkit against Fixit, --jobs, linearity and the re-lint cache."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files, lines = generate(root, args.lines)
        half = files[: len(files) // 2]
        half_lines = sum(path.read_text(encoding="utf-8").count("\n") for path in half)
        config = LintConfig(root=root)

        findings = sum(len(o.findings) for o in lint_paths(files[:5], config))  # warm-up
        run_fixit(files[:5])
        findings = sum(len(o.findings) for o in lint_paths(files, config))
        fixit_findings = run_fixit(files)

        # Interleaved so both tools see the same machine load; best of `repeat`.
        # Single-process runs are compared on CPU time (robust on a shared
        # machine) and wall time; --jobs only has wall time (work is in children).
        runs: dict[str, list[tuple[float, float]]] = {
            "single": [],
            "fixit": [],
            "half": [],
            "jobs": [],
            "first": [],
            "relint": [],
            "command_first": [],
            "command": [],
        }
        cache_dir = root / CACHE_DIR_NAME
        command = [sys.executable, "-m", "prefixkit.cli.main", "lint", "--exit-zero", str(root)]
        # one fingerprint of the linter's code for the whole bench, so an edit of the
        # linter in the working tree during the run does not turn a re-lint into a miss
        fingerprint = linter_fingerprint()

        def cache(config: LintConfig) -> ResultCache:
            return ResultCache(config.root / CACHE_DIR_NAME, config, fingerprint)

        said: list[str] = []

        def command_run() -> None:
            done = subprocess.run(command, cwd=root, capture_output=True, check=True, text=True)
            said.append(done.stderr.splitlines()[-1])

        for _ in range(args.repeat):
            runs["single"].append(timed(lambda: lint_paths(files, config)))
            runs["fixit"].append(timed(lambda: run_fixit(files)))
            runs["half"].append(timed(lambda: lint_paths(half, config)))
            runs["jobs"].append(timed(lambda: lint_paths(files, config, jobs=args.jobs)))
            shutil.rmtree(cache_dir, ignore_errors=True)
            runs["first"].append(timed(lambda: lint_paths(files, config, cache=cache)))
            runs["relint"].append(timed(lambda: lint_paths(files, config, cache=cache)))
            # the command fingerprints the linter's code itself: its first run (empty
            # cache, which it fills), then its unchanged re-lint
            shutil.rmtree(cache_dir, ignore_errors=True)
            runs["command_first"].append(timed(command_run))
            runs["command"].append(timed(command_run))
        best = {
            name: (min(w for w, _ in times), min(c for _, c in times))
            for name, times in runs.items()
        }
        spread = {name: [w for w, _ in times] for name, times in runs.items()}

    def rate(seconds: float) -> str:
        return f"{seconds:7.2f} s {lines / seconds:8,.0f} lines/s"

    single, fixit, half_run, jobs = best["single"], best["fixit"], best["half"], best["jobs"]
    print(f"corpus: {len(files)} files, {lines:,} lines (seed 7), best of {args.repeat}")
    print(f"{'':34} {'CPU':>24} | {'wall':>24}")
    print(
        f"prefixkit single process           {rate(single[1])} | {rate(single[0])}  ({findings} findings)"
    )
    print(
        f"fixit single process ({len(FIXIT_RULES)} rules)     {rate(fixit[1])} | {rate(fixit[0])}  ({fixit_findings} findings)"
    )
    print(f"prefixkit --jobs {args.jobs:<2}                {'':24} | {rate(jobs[0])}")
    print(
        f"ratio fixit/prefixkit single (CPU)  : {fixit[1] / single[1]:5.2f}x (>1: prefixkit faster)"
    )
    print(f"ratio fixit/prefixkit single (wall) : {fixit[0] / single[0]:5.2f}x")
    print(f"ratio fixit single/prefixkit --jobs {args.jobs} (wall): {fixit[0] / jobs[0]:5.2f}x")
    print(f"ratio prefixkit single/--jobs {args.jobs} (wall)    : {single[0] / jobs[0]:5.2f}x")
    per_line = (single[1] / lines) / (half_run[1] / half_lines)
    print(
        f"linearity (CPU): {half_lines:,} lines {half_run[1]:.2f} s, {lines:,} lines "
        f"{single[1]:.2f} s; time per line full/half = {per_line:.2f} (1.00 = linear)"
    )
    first, relint = best["first"], best["relint"]
    command_first, command_best = best["command_first"], best["command"]
    print("re-lint cache (wall):")
    print(f"  in process: first run, empty cache      {first[0]:8.3f} s")
    print(
        f"  in process: unchanged re-lint           {relint[0]:8.3f} s   "
        f"{first[0] / relint[0]:7.1f}x faster"
    )
    print(f"  command:    first run, empty cache      {command_first[0]:8.3f} s")
    print(
        f"  command:    unchanged re-lint           {command_best[0]:8.3f} s   "
        f"{command_first[0] / command_best[0]:7.1f}x faster (new process: start-up and imports)"
    )
    for name in ("first", "relint", "command_first", "command"):
        print(f"  {name:13} runs: " + ", ".join(f"{w:.3f}" for w in spread[name]) + " s")
    print(f"  the command said: {said[-1]}")


if __name__ == "__main__":
    main()
