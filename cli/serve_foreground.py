"""`prefixkit serve` in the foreground, for either backend: a live status line while the
engine is prepared and the deployment starts, then serving until Ctrl-C or SIGTERM, which
stop the deployment as its context manager exits."""

from __future__ import annotations

import argparse
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

from .serve_options import engine_config

if TYPE_CHECKING:
    from prefixkit.engine_adapter import EngineConfig
    from rich.console import Console
    from rich.status import Status

__all__ = ["serve_until_stopped"]

D = TypeVar("D")


def serve_until_stopped(
    args: argparse.Namespace,
    console: Console,
    start: Callable[[EngineConfig, Callable[[str], None]], AbstractContextManager[D]],
    announce: Callable[[D, EngineConfig], None],
    stopped: str,
) -> int:
    """Prepare the engine's config from `args`, enter `start(config, report)`, `announce`
    the running deployment, and serve until SIGTERM (exit 0, after printing `stopped`) or
    Ctrl-C (`KeyboardInterrupt`, for `prefixkit.cli.main`)."""
    report = _ConsoleReport(console)
    with report.live():
        config = engine_config(args, report)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with contextlib.ExitStack() as stack:
            with report.live():
                deployment = stack.enter_context(start(config, report))
            announce(deployment, config)
            while True:
                time.sleep(3600)
    except _Stopped:
        console.print(stopped)
        return 0


class _ConsoleReport:
    """`report(message)`: a live status line during long steps, plain lines otherwise."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.last_step = ""

    def __call__(self, message: str) -> None:
        if self.status is None:
            self.console.print(message, highlight=False, markup=False)
            return
        step = message.split(" (")[0]  # "(12 s)" suffixes update the line, not the log
        if step != self.last_step:
            self.console.print(step, style="dim", highlight=False, markup=False)
            self.last_step = step
        self.status.update(message)

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        with self.console.status("starting") as status:
            self.status = status
            try:
                yield
            finally:
                self.status = None


class _Stopped(Exception):
    """SIGTERM arrived: a service manager's normal way to stop `prefixkit serve` (exit 0;
    Ctrl-C is an interruption, exit 130)."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped
