"""Pin prompt files by sha256 in prefixkit.lock, or check them against it (--check).

    prefixkit lock                       # write/update ./prefixkit.lock for ./prompts
    prefixkit lock --check               # CI: exit 1 if any prompt drifted from the lock
    prefixkit lock --root app/prompts --lock app/prefixkit.lock

Exit codes: 0 clean (or lock written), 1 drift found by --check, 2 usage or
configuration error (missing prompt folder, malformed lock, bad file name).
The lock defaults to prefixkit.lock in the prompt folder's parent directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit lock` arguments."""
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("prompts"),
        help="prompt folder (default: prompts)",
    )
    parser.add_argument(
        "--lock",
        type=Path,
        default=None,
        help="lock file (default: prefixkit.lock in the prompt folder's parent directory)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if a prompt differs from the lock (for CI)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the lock, or with --check compare the prompt files with it."""
    from prefixkit.sdk import check_prompt_files, default_lock_path, write_lock

    root: Path = args.root
    lock_path: Path = default_lock_path(root) if args.lock is None else args.lock
    if args.check:
        drifts = check_prompt_files(root, lock_path)
        for drift in drifts:
            print(f"DRIFT {drift.message}")
        if drifts:
            print(f"{len(drifts)} prompt(s) differ from {lock_path}", file=sys.stderr)
            return 1
        print(f"{lock_path}: all prompts match")
        return 0
    update = write_lock(root, lock_path)
    for label, keys in (
        ("added", update.added),
        ("changed", update.changed),
        ("removed", update.removed),
    ):
        for key in keys:
            print(f"{label:8} {key}")
    total = len(update.added) + len(update.changed) + len(update.unchanged)
    print(f"wrote {update.path}: {total} prompt(s) pinned")
    return 0
