"""Run an example script as `python examples/NAME.py ARGS...` does, in the test process.

A fresh interpreter spends about 3 s importing the official clients before an example's
first line; the test process has them imported already. The script runs as `__main__`
with its own `sys.argv`, its environment, its standard streams captured, warnings shown
(on its standard error, as the interpreter shows them) rather than raised, and its exit
status taken from `SystemExit`.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExampleRun:
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(environ: Mapping[str, str] | None) -> Iterator[None]:
    if environ is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_example(script: Path, *args: str, environ: Mapping[str, str] | None = None) -> ExampleRun:
    """Run `script` with `args`; `environ` replaces the environment while it runs."""
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = sys.argv
    code = 0
    try:
        sys.argv = [str(script), *args]
        with (
            _environment(environ),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("default")
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exit_:
                code = (
                    exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                )
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
    finally:
        sys.argv = argv
    return ExampleRun(code, stdout.getvalue(), stderr.getvalue())
