"""The `prefixkit` console script.

Each part of prefixkit owns its subcommands in a module that exposes
`configure(parser)` (add arguments) and `run(args) -> int` (exit code). Only the
chosen subcommand's module is imported, so one part's heavy or broken
dependencies never stand in the way of another part's command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "main"]

# subcommand -> (module implementing configure(parser) and run(args), one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "lock": ("prefixkit.cli.lock", "pin prompt files in prefixkit.lock, or --check them"),
    "lint": ("prefixkit.cli.lint", "find code and prompt files that break prompt caching"),
    "serve": ("prefixkit.cli.serve", "run vLLM with prefix caching"),
    "analyze": (
        "prefixkit.cli.analyze",
        "replay a trace: sharing, oracle bounds, routing policies",
    ),
}


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser; only `chosen`'s module is imported to add its arguments."""
    parser = argparse.ArgumentParser(
        prog="prefixkit",
        description="Make LLM requests reuse their shared opening (prompt caching).",
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
    args = build_parser(chosen if chosen in COMMANDS else None).parse_args(arguments)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
