"""The `prefixkit` console script.

Each part of prefixkit owns its subcommands in a module that exposes
`configure(parser)` (add arguments) and `run(args) -> int` (exit code). The
modules must stay cheap to import: heavy dependencies are imported inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# subcommand -> module implementing configure(parser) and run(args)
COMMANDS: dict[str, str] = {
    "lock": "prefixkit.sdk.lock_command",
    "lint": "prefixkit.linter.command",
    "serve": "prefixkit.engine_adapter.serve_command",
    "analyze": "prefixkit.engine_adapter.analyze_command",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prefixkit",
        description="Make LLM requests reuse their shared opening (prompt caching).",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        summary = (module.__doc__ or "").strip().splitlines()[0]
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
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
