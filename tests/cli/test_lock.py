"""`prefixkit lock` and `prefixkit lock --check`, run as the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PREFIXKIT = Path(sys.executable).parent / "prefixkit"


def prefixkit_lock(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PREFIXKIT), "lock", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(prompt_root: Path) -> Path:
    """A project folder with ./prompts and no lock yet."""
    return prompt_root.parent


def test_lock_writes_prefixkit_lock_beside_the_prompt_folder(project: Path) -> None:
    result = prefixkit_lock(cwd=project)
    assert result.returncode == 0, result.stderr
    assert "added    support@v2" in result.stdout
    prompts = json.loads((project / "prefixkit.lock").read_text())["prompts"]
    assert "support@v2" in prompts


def test_check_exits_0_when_every_prompt_matches(project: Path) -> None:
    prefixkit_lock(cwd=project)
    result = prefixkit_lock("--check", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all prompts match" in result.stdout


def test_check_exits_1_and_names_the_drifted_prompt_with_digests(project: Path) -> None:
    prefixkit_lock(cwd=project)
    locked = json.loads((project / "prefixkit.lock").read_text())["prompts"]["greeting"]
    (project / "prompts" / "greeting.txt").write_text("Greet the customer warmly.\n")
    result = prefixkit_lock("--check", cwd=project)
    assert result.returncode == 1
    assert "DRIFT prompt greeting changed" in result.stdout
    assert locked["sha256"] in result.stdout
    assert "+Greet the customer warmly." in result.stdout


def test_check_does_not_write_the_lock(project: Path) -> None:
    prefixkit_lock(cwd=project)
    before = (project / "prefixkit.lock").read_bytes()
    (project / "prompts" / "greeting.txt").write_text("Greet the customer warmly.\n")
    prefixkit_lock("--check", cwd=project)
    assert (project / "prefixkit.lock").read_bytes() == before


def test_check_without_a_lock_exits_2_and_says_how_to_create_it(project: Path) -> None:
    result = prefixkit_lock("--check", cwd=project)
    assert result.returncode == 2
    assert "run `prefixkit lock`" in result.stderr


def test_malformed_lock_exits_2(project: Path) -> None:
    (project / "prefixkit.lock").write_text("{not json")
    result = prefixkit_lock("--check", cwd=project)
    assert result.returncode == 2
    assert "line 1" in result.stderr


def test_root_and_lock_options_point_anywhere(tmp_path: Path, prompt_root: Path) -> None:
    lock = tmp_path / "locks" / "app.lock"
    lock.parent.mkdir()
    written = prefixkit_lock("--root", str(prompt_root), "--lock", str(lock), cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    checked = prefixkit_lock(
        "--check", "--root", str(prompt_root), "--lock", str(lock), cwd=tmp_path
    )
    assert checked.returncode == 0
    assert not (prompt_root.parent / "prefixkit.lock").exists()


def test_missing_prompt_folder_exits_2(tmp_path: Path) -> None:
    result = prefixkit_lock("--root", "nowhere", cwd=tmp_path)
    assert result.returncode == 2
    assert "prompt folder nowhere does not exist" in result.stderr
