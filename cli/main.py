"""The `prefixkit` console script.

Each subcommand is a module of `prefixkit.cli` that exposes `configure(parser)` (add
arguments) and `run(args) -> int` (0, or 1 for findings / a failed check). Only the
chosen subcommand's module is imported, so one part's heavy or missing dependencies
never stand in the way of another part's command.

Errors are handled here, once, for every subcommand. Exit codes:

    0  ok
    1  findings (`lint`), a check that failed (`lock --check`, `serve status`)
    2  usage or configuration error: bad arguments, a bad config file, a part installed
       without its extra, input that cannot be read (`ValueError`, `LookupError` and
       `ImportError` errors of prefixkit)
    3  runtime failure: the engine did not start, a port is taken, an install or a
       download failed (prefixkit's `RuntimeError` errors)
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from prefixkit.sdk import PrefixkitError

__all__ = ["COMMANDS", "EXIT_CONFIG", "EXIT_RUNTIME", "exit_code", "main"]

EXIT_CONFIG = 2
EXIT_RUNTIME = 3

# subcommand -> (module implementing configure(parser) and run(args), one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "lock": ("prefixkit.cli.lock", "pin prompt files in prefixkit.lock, or --check them"),
    "lint": ("prefixkit.cli.lint", "find code and prompt files that break prompt caching"),
    "serve": ("prefixkit.cli.serve", "run vLLM with prefix caching, a router and the gateway"),
    "analyze": (
        "prefixkit.cli.analyze",
        "replay a trace: sharing, oracle bounds, routing policies",
    ),
    "warm": (
        "prefixkit.cli.warm",
        "warm a new prompt version's prefix on every replica, per tenant salt",
    ),
    "rule": ("prefixkit.cli.rule", "print a lint rule's documentation, or --all to list them"),
    "lsp": ("prefixkit.cli.lsp", "run the linter as a language server (LSP) for editors"),
    "models": ("prefixkit.cli.models", "list the models prefixkit knows: minimums and prices"),
    "explain": (
        "prefixkit.cli.explain",
        "compare two recorded request bodies: where the second stops reusing the cache",
    ),
}


def exit_code(error: PrefixkitError) -> int:
    """3 for a failure while running (`RuntimeError`), 2 for anything to fix first."""
    return EXIT_RUNTIME if isinstance(error, RuntimeError) else EXIT_CONFIG


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser; only `chosen`'s module is imported to add its arguments."""
    parser = argparse.ArgumentParser(
        prog="prefixkit",
        description="Make LLM requests reuse their shared opening (prompt caching).",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"prefixkit {importlib.metadata.version('prefixkit')}",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, summary) in COMMANDS.items():
        if name != chosen:
            subparsers.add_parser(name, help=summary)
            continue
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in arguments if not a.startswith("-")), None)
    command = chosen if chosen in COMMANDS else None
    try:
        args = build_parser(command).parse_args(arguments)
        code: int = args.run(args)
    except PrefixkitError as error:
        print(f"prefixkit {command}: error: {error}", file=sys.stderr)
        return exit_code(error)
    except KeyboardInterrupt:
        print(f"prefixkit {command}: stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # whoever read the output stopped reading (`| head`): nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
