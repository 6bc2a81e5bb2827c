"""prefixkit lint vs Fixit: lines per second on a generated prompt-building corpus.

    .venv/bin/python bench/lint_speed.py                 # 50k lines, --jobs 2
    .venv/bin/python bench/lint_speed.py --lines 100000 --jobs 4

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
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

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
