"""A replica or a set-up step that fails raises an error carrying what a program needs to
act on it (which replica, which step, the last lines of its output), with no real engine:
stand-in interpreters that fail at once."""

from __future__ import annotations

import pickle
import stat
from pathlib import Path

import pytest
from prefixkit.engine_adapter import (
    EngineConfig,
    ModelPrepareError,
    PortInUseError,
    ReplicaStartError,
)
from prefixkit.engine_adapter.engine.replicas import ReplicaSet
from prefixkit.engine_adapter.engine.setup_steps import SetupStep, run_setup_steps
from prefixkit.testing.fake_vllm import free_port


def _failing_python(path: Path, output: str) -> Path:
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_replica_that_exits_at_start_carries_its_index_url_and_log_tail(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    python = _failing_python(tmp_path / "python", "no engine here")
    config = EngineConfig(model=model, python=python, port=free_port())
    with pytest.raises(ReplicaStartError) as caught:
        ReplicaSet([config], tmp_path / "run", start_timeout=30).start()
    error = caught.value
    assert (error.replica, error.url) == (0, config.base_url)
    assert error.log_tail.splitlines()[-1] == "no engine here"


def test_a_failed_model_step_carries_the_step_and_its_output(tmp_path: Path) -> None:
    steps = [SetupStep("dequantising the model", ("sh", "-c", "echo 'out of memory'; exit 2"))]
    with pytest.raises(ModelPrepareError) as caught:
        run_setup_steps(steps, tmp_path / "prepare.log", lambda message: None, ModelPrepareError)
    assert caught.value.step == "[1/1] dequantising the model"
    assert caught.value.output_tail.splitlines()[-1] == "out of memory"


def test_an_error_keeps_its_data_through_pickling() -> None:
    # Ray sends errors between processes
    error = pickle.loads(pickle.dumps(PortInUseError("taken", port=8000, host="127.0.0.1")))
    assert (type(error), str(error), error.port, error.host) == (
        PortInUseError,
        "taken",
        8000,
        "127.0.0.1",
    )
