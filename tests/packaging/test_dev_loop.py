"""The repository's own check loop: its pre-commit configuration is valid and runs the ruff
that `make check` and CI run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_repositorys_pre_commit_configuration_is_valid() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pre_commit_runs_the_ruff_pinned_for_make_check() -> None:
    (pinned,) = re.findall(r'"ruff==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    hooks = set(re.findall(r'"ruff==([^"]+)"', (ROOT / ".pre-commit-config.yaml").read_text()))
    assert hooks == {pinned}
