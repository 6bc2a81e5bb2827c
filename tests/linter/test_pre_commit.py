"""The pre-commit hooks, run by real `pre-commit try-repo` on a temporary git repo
holding a Python file, a notebook and a README.

The hook repository is a snapshot of this working tree (tracked and untracked,
non-ignored files) committed into a temporary git repo, so uncommitted work is
what gets tested. pre-commit builds the hook's virtualenv from it (one
install, about half a minute with a warm pip cache) and runs both hooks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.linter.conftest import DAY_AND_SET_IN_SYSTEM

ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
GOOD = "SYSTEM = 'You are helpful.'\n"
NOTEBOOK = Path(__file__).parent / "notebooks" / "support_prompts.ipynb"
README = "# Demo\n\nThe prompt says `Today is {{ date }}`.\n"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=prefixkit", "-c", "user.email=ci@prefixkit.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _snapshot(destination: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(destination, "init", "-q")
    _git(destination, "add", ".")
    _git(destination, "commit", "-q", "-m", "snapshot")
    return destination


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _snapshot(tmp_path_factory.mktemp("hook-repo"))


@pytest.mark.slow  # pre-commit builds the hooks' virtualenv and installs prefixkit into it
@pytest.mark.timeout(600)
def test_hooks_fail_on_the_bad_files_fix_them_and_leave_the_good_ones(
    hook_repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    (tmp_path / "good.py").write_text(GOOD, encoding="utf-8")
    (tmp_path / "analysis.ipynb").write_bytes(NOTEBOOK.read_bytes())
    (tmp_path / "README.md").write_text(README, encoding="utf-8")  # not a prompt file
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    env = {**os.environ, "PRE_COMMIT_COLOR": "never"}
    result = subprocess.run(
        [str(PRE_COMMIT), "try-repo", str(hook_repo), "--all-files"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "- hook id: prefixkit-lint\n" in out
    assert "- hook id: prefixkit-lint-fix\n" in out
    assert "bad.py:3:19: PFX001" in out
    assert "bad.py:3:57: PFX004 [*]" in out
    assert "analysis.ipynb:cell 3:2:73: PFX004 [*]" in out
    assert "analysis.ipynb:cell 3:3:22: PFX001" in out
    assert "good.py" not in out and "README.md" not in out
    assert "files were modified by this hook" in out
    assert "Traceback" not in out
    fixed = (tmp_path / "bad.py").read_text(encoding="utf-8")
    assert ".join(sorted(TOOL_NAMES))" in fixed
    notebook = (tmp_path / "analysis.ipynb").read_bytes()
    assert notebook == NOTEBOOK.read_bytes().replace(
        b"for name in TOOL_NAMES]", b"for name in sorted(TOOL_NAMES)]"
    )
    assert (tmp_path / "good.py").read_text(encoding="utf-8") == GOOD


def test_the_hooks_install_the_lint_extra() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["lint"]
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [hook["additional_dependencies"] for hook in hooks] == [extra] * len(hooks)
