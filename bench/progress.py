"""How the bench scripts show the engine's set-up progress: each step on stderr, without
the once-a-second elapsed-time updates of a long step."""

import sys


def report(message: str) -> None:
    """A `Report` for `prepare_embedded` and the other set-up functions."""
    if " s)" not in message:
        print(f"  {message}", file=sys.stderr, flush=True)
