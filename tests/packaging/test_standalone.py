"""The repository stands alone: nothing in it reads files from beside it (the machines it
is developed on keep a folder of shared material next to it; a clone has none)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = "".join(("sha", "red"))  # spelled apart, so this file does not match itself
PATTERNS = (f"../{FOLDER}", f'"{FOLDER}"')  # a relative path to it, or its name as a string


def test_no_tracked_file_reads_from_beside_the_repository() -> None:
    found = subprocess.run(
        ["git", "grep", "-n", "-I", "-F", "-e", PATTERNS[0], "-e", PATTERNS[1], "--", ":!*.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 1, found.stdout  # git grep: 1 means nothing found
