"""`prefixkit serve`: topology checks before anything starts, their exit codes, and
`prefixkit serve status` against the session engine."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from prefixkit.cli.main import main
from prefixkit.cli.serve import _tier_savings
from prefixkit.engine_adapter import DeploymentConfigError, Topology
from prefixkit.engine_adapter.serving import smg
from prefixkit.testing.fake_vllm import free_port

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine


def _run(argv: list[str]) -> int:
    return main(["serve", *argv])


def test_several_replicas_behind_smg_without_the_smg_command_name_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(f"{smg.__name__}.shutil.which", lambda name: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    code = _run(["--model", str(tmp_path), "--replicas", "2", "--run-dir", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert "needs the `smg` command" in err
    assert "pip install 'prefixkit[serve]'" in err


@pytest.fixture
def model_and_tenants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments for a model folder that passes the checks, tenants from the environment."""
    monkeypatch.setenv("PREFIXKIT_TENANT_KEYS", "acme=key-acme")
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", "a-secret-of-sixteen-characters")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return ["--model", str(tmp_path / "model"), "--python", sys.executable]


def test_a_taken_gateway_port_is_a_runtime_failure(
    tmp_path: Path, model_and_tenants: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = _run([*model_and_tenants, "--port", str(port), "--run-dir", str(tmp_path)])
    assert code == 3
    assert f"port {port} on 127.0.0.1 is already in use" in " ".join(
        capsys.readouterr().err.split()
    )


def test_no_model_and_no_embedded_says_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--run-dir", str(tmp_path)]) == 2
    assert "give --model DIR" in " ".join(capsys.readouterr().err.split())


def test_status_without_a_running_serve_explains_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["status", "--run-dir", str(tmp_path)]) == 1
    assert "(no replicas.json)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.engine
def test_status_shows_health_block_size_and_hit_rate(
    engine: EmbeddedEngine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert _run(["status", "--run-dir", str(engine.run_dir)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if engine.base_url in line)
    cells = [cell.strip() for cell in row.split("│") if cell.strip()]
    assert cells[3:7] == ["healthy", "ok", "0", "32"]
    assert cells[8].endswith("%")


def test_gateway_port_colliding_with_the_router_metrics_port_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model", str(tmp_path), "--replicas", "2", "--router-port", "18062"]
    assert _run([*argv, "--port", "18063", "--run-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the gateway and the router metrics would both use port 18063" in err


def test_a_decision_log_without_the_precise_router_says_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model", str(tmp_path), "--replicas", "2", "--decision-log"]
    assert _run([*argv, "--run-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "give --replicas 2 or more and --router precise, or drop --decision-log" in err


@pytest.mark.parametrize(
    ("router", "ratio"),
    [("precise", "5.7"), ("smg", "0"), ("smg", "-2"), ("smg", "inf")],
)
def test_smg_chars_per_token_needs_smg_and_a_positive_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], router: str, ratio: str
) -> None:
    argv = ["--model", str(tmp_path), "--replicas", "2", "--router", router]
    assert _run([*argv, "--smg-chars-per-token", ratio, "--run-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--smg-chars-per-token {float(ratio)} sizes SMG's tree" in err


FAKE_ENGINE = """#!{python}
# Stands in for a vLLM interpreter: `-m vllm.entrypoints.openai.api_server ... --port P`
# serves a fake vLLM replica on P until SIGTERM.
import signal, sys, time
from prefixkit.testing.fake_vllm import FakeVLLM
port = int(sys.argv[sys.argv.index("--port") + 1])
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
with FakeVLLM(model="fake-model", port=port):
    while True:
        time.sleep(1)
"""


def test_sigterm_stops_everything_it_started_and_exits_0(tmp_path: Path) -> None:
    model = tmp_path / "fake-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    engine = tmp_path / "engine-python"
    engine.write_text(FAKE_ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    engine_port, port = free_port(), free_port()
    with subprocess.Popen(
        [
            str(Path(sys.executable).with_name("prefixkit")),
            *("serve", "--model", str(model), "--python", str(engine), "--no-kv-events"),
            *("--engine-port", str(engine_port), "--port", str(port)),
            *("--run-dir", str(tmp_path / "run"), "--grace", "5"),
        ],
        env={
            **os.environ,
            "PREFIXKIT_TENANT_KEYS": "acme=key-acme",
            "PREFIXKIT_SALT_SECRET": "a-secret-of-sixteen-characters",
        },
        stderr=subprocess.PIPE,
        text=True,
    ) as serve:  # closes its stderr pipe
        try:
            deadline = time.monotonic() + 60
            while not (tmp_path / "run" / "serve.json").exists():
                assert serve.poll() is None and time.monotonic() < deadline, serve.stderr
                time.sleep(0.2)
            headers = {"authorization": "Bearer key-acme"}
            assert (
                httpx.get(f"http://127.0.0.1:{port}/v1/models", headers=headers).status_code == 200
            )
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(30) == 0
        finally:
            if serve.poll() is None:
                serve.kill()
    for url in (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{engine_port}"):
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health")


def test_a_port_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _run(["--port", "70000"])
    assert exited.value.code == 2
    assert "70000 is not a port: give 1 to 65535" in capsys.readouterr().err


def test_an_address_this_machine_does_not_have_is_named(
    tmp_path: Path, model_and_tenants: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run([*model_and_tenants, "--host", "203.0.113.7", "--run-dir", str(tmp_path)]) == 2
    assert "203.0.113.7 is not an address of this machine" in capsys.readouterr().err


def test_the_run_directory_may_come_before_the_status_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--run-dir", str(tmp_path), "status"]) == 1
    assert str(tmp_path) in " ".join(capsys.readouterr().out.split())


def test_tier_savings_fill_missing_tiers_with_the_last_given() -> None:
    assert _tier_savings("1,0.5") == (1.0, 0.5, 0.5)


@pytest.mark.parametrize("text", ["1,x", "1,1.5", "1,0.5,0.2,0.1", "nan"])
def test_tier_savings_that_cannot_be_shares_of_a_block_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="GPU first"):
        _tier_savings(text)


def test_tier_savings_need_the_precise_router() -> None:
    with pytest.raises(DeploymentConfigError, match="--router precise") as caught:
        Topology(replicas=2, router="smg", tier_savings=(1.0, 0.5, 0.5))
    assert caught.value.parts == ("tier_savings", "router")


@pytest.mark.parametrize(
    "savings",
    [(1.0, 5.0, float("nan")), (), (1.0, 0.9, 0.4, 0.1), (float("-inf"),), (1.0, 1.5)],
    ids=["nan and above 1", "none", "four", "-inf", "above 1"],
)
def test_topology_refuses_tier_savings_the_router_cannot_use_before_anything_starts(
    savings: tuple[float, ...],
) -> None:
    with pytest.raises(DeploymentConfigError, match=r"tier_savings .*at most 1\.0") as caught:
        Topology(replicas=2, router="precise", tier_savings=savings)
    assert caught.value.parts == ("tier_savings",)


def test_topology_fills_missing_tier_savings_with_the_last_given() -> None:
    topology = Topology(replicas=2, router="precise", tier_savings=(1.0, 0.5))
    assert topology.tier_savings == (1.0, 0.5, 0.5)
