"""Run the linter as a language server (LSP) over stdin and stdout, for editors.

    prefixkit lsp            # started by the editor; speaks LSP on stdin/stdout

Diagnostics for Python and prompt files as you type (their current text, with the
settings `prefixkit lint` uses for the file), each finding's fix and a `# noqa`
ignore as code actions. Editor set-up (VS Code, Neovim, Helix):
docs/linter/index.md ("In your editor").
"""

from __future__ import annotations

import argparse

from prefixkit.sdk import require_extra

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit lsp` arguments."""
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="talk LSP over stdin and stdout (the only transport, and the default; "
        "accepted because some editors pass it)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve one editor until it sends `exit`."""
    require_extra("lint", "prefixkit lsp", "libcst", "pathspec", "yaml", "pygls", "lsprotocol")
    from prefixkit.linter.lsp import run_stdio

    run_stdio()
    return 0
