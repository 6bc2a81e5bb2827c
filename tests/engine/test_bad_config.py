"""Configurations that cannot work fail before or during start-up with a clear message."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prefixkit.cli.main import main
from prefixkit.engine_adapter import EngineConfigError, PortInUseError, ReplicaStartError
from prefixkit.engine_adapter.engine.replicas import ReplicaSet

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 18020))
        listener.listen()
        yield 18020


def test_port_in_use_is_named_before_launch(
    engine: EmbeddedEngine, occupied_port: int, tmp_path: Path
) -> None:
    config = engine.config.derive(
        port=occupied_port, kv_events_endpoint=None, kv_events_replay_endpoint=None
    )
    with pytest.raises(
        PortInUseError, match=f"port {occupied_port} on 127.0.0.1 is already in use"
    ):
        ReplicaSet([config], tmp_path).start()


def test_missing_model_directory_is_named(engine: EmbeddedEngine, tmp_path: Path) -> None:
    config = engine.config.derive(model=tmp_path / "no-such-model", port=18021)
    with pytest.raises(EngineConfigError, match="no-such-model does not exist"):
        ReplicaSet([config], tmp_path).start()


def test_directory_without_a_model_is_named(engine: EmbeddedEngine, tmp_path: Path) -> None:
    config = engine.config.derive(model=tmp_path, port=18021)
    with pytest.raises(EngineConfigError, match=r"has no config\.json"):
        ReplicaSet([config], tmp_path).start()


def test_missing_engine_interpreter_says_how_to_install_it(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    config = engine.config.derive(python=tmp_path / "bin" / "python", port=18021)
    with pytest.raises(EngineConfigError, match="prefixkit serve --embedded"):
        ReplicaSet([config], tmp_path).start()


def test_odd_block_size_on_the_command_line_exits_with_the_fix(
    engine: EmbeddedEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--embedded", "--block-size", "48", "--run-dir", str(tmp_path)]) == 2
    assert "use --block-size 64" in capsys.readouterr().err.replace("\n", " ")


def test_engine_that_exits_during_start_up_shows_its_last_log_lines(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    # SmolLM2 supports 8,192 positions; vLLM refuses a longer max_model_len at start-up
    config = engine.config.derive(
        port=18022, max_model_len=100_000, kv_events_endpoint=None, kv_events_replay_endpoint=None
    )
    with pytest.raises(ReplicaStartError) as caught:
        ReplicaSet([config], tmp_path, start_timeout=600).start()
    message = str(caught.value)
    assert "replica 0 at http://127.0.0.1:18022 exited during start-up" in message
    assert "last lines of" in message
    assert "User-specified max_model_len (100000) is greater than" in message
