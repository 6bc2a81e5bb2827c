"""Long set-up steps (virtualenvs, pip installs, conversions) run with a log file and progress.

A `SetupStep` is either a command (`argv`) or a local action (`action`, e.g. writing a file).
`run_setup_steps(steps, log, report)` runs them in order, appends every command's output to
`log`, calls `report(message)` about once a second with the step number and elapsed time, and
raises `failure(message, step=..., output_tail=...)` naming the step, the command and the last
log lines when a step fails.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = ["Report", "SetupStep", "StepFailure", "log_tail", "run_setup_steps"]

Report = Callable[[str], None]


class StepFailure(Protocol):
    """Makes the error a failed step raises (`EngineInstallError`, `ModelPrepareError`)."""

    def __call__(self, message: str, *, step: str, output_tail: str) -> Exception: ...


@dataclass(frozen=True)
class SetupStep:
    """One step: a command to run, or an in-process action; `description` is shown to people."""

    description: str
    argv: tuple[str, ...] = ()
    action: Callable[[], None] | None = None
    env: Mapping[str, str] | None = field(default=None, compare=False)


def log_tail(path: Path, lines: int = 25) -> str:
    """The last `lines` lines of a log file ('' if it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_setup_steps(
    steps: Sequence[SetupStep],
    log: Path,
    report: Report,
    failure: StepFailure,
) -> None:
    """Run `steps` in order; on failure raise `failure(...)` with the step and the log tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    total = len(steps)
    for number, step in enumerate(steps, start=1):
        label = f"[{number}/{total}] {step.description}"
        report(label)
        with log.open("a") as sink:
            sink.write(f"\n==> {label}\n")
            if step.argv:
                sink.write("$ " + " ".join(step.argv) + "\n")
        if step.action is not None:
            try:
                step.action()
            except OSError as error:
                raise failure(f"{label} failed: {error}", step=label, output_tail="") from error
            continue
        code = _run_reporting(step, log, label, report)
        if code != 0:
            tail = log_tail(log)
            raise failure(
                f"{label} failed (exit code {code}): {' '.join(step.argv)}\n"
                f"last lines of {log}:\n{tail}",
                step=label,
                output_tail=tail,
            )


def _run_reporting(step: SetupStep, log: Path, label: str, report: Report) -> int:
    started = time.monotonic()
    with log.open("a") as sink:
        process = subprocess.Popen(
            step.argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(step.env) if step.env is not None else None,
        )
        try:
            while True:
                try:
                    return process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    report(f"{label} ({time.monotonic() - started:.0f} s)")
        except BaseException:
            process.kill()
            process.wait()
            raise
