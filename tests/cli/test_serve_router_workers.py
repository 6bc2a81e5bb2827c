"""`prefixkit serve --router-workers N`: refused, before anything starts, where it does
not fit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prefixkit.cli.main import main
from prefixkit.engine_adapter.engine.replicas import port_is_free
from prefixkit.testing.fake_vllm import free_port


def test_router_workers_without_the_precise_router_say_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--model", str(tmp_path), "--replicas", "2", "--router-workers", "2"]
    assert main([*argv, "--run-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--router-workers 2 runs that many precise routers on one port" in err
    assert "give --replicas 2 or more and --router precise" in err


def test_router_workers_on_the_ray_backend_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--backend", "ray", "--model", str(tmp_path), "--router-workers", "2"]
    assert main([*argv, "--run-dir", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--router-workers 2 runs local router processes" in err


FAKE_ENGINE = """#!{python}
# Stands in for a vLLM interpreter: `-m vllm.entrypoints.openai.api_server ... --port P
# --kv-events-config JSON` serves a fake vLLM replica on P, publishing KV events, until
# SIGTERM.
import json, signal, sys, time
from prefixkit.testing.fake_vllm import FakeVLLM
port = int(sys.argv[sys.argv.index("--port") + 1])
events = json.loads(sys.argv[sys.argv.index("--kv-events-config") + 1])["endpoint"]
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
with FakeVLLM(model="fake-model", port=port, kv_events=events):
    while True:
        time.sleep(1)
"""


def _two_free_ports() -> int:
    """A free port whose next port is free too (the two replicas' ports)."""
    while True:
        port = free_port()
        if port < 65535 and port_is_free("127.0.0.1", port + 1):
            return port


def test_two_router_workers_serve_one_port_until_sigterm_stops_them(tmp_path: Path) -> None:
    model = tmp_path / "fake-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    engine = tmp_path / "engine-python"
    engine.write_text(FAKE_ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    run = tmp_path / "run"
    engine_port, port = _two_free_ports(), free_port()
    with subprocess.Popen(
        [
            str(Path(sys.executable).with_name("prefixkit")),
            *("serve", "--model", str(model), "--python", str(engine), "--replicas", "2"),
            *("--router", "precise", "--router-workers", "2"),
            *("--engine-port", str(engine_port), "--port", str(port)),
            *("--run-dir", str(run), "--grace", "5"),
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
            deadline = time.monotonic() + 90
            while not (run / "serve.json").exists():
                assert serve.poll() is None, serve.communicate()[1]
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
            answers = [
                httpx.post(
                    f"http://127.0.0.1:{port}/v1/completions",
                    json={"model": "fake-model", "prompt": f"question {n}", "max_tokens": 2},
                    headers={"authorization": "Bearer key-acme"},
                    timeout=30,
                )
                for n in range(24)
            ]
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(30) == 0
        finally:
            if serve.poll() is None:
                serve.kill()
    assert [a.status_code for a in answers] == [200] * 24
    assert {a.headers["x-prefixkit-worker"] for a in answers} == {"0", "1"}
    assert (run / "router-worker0.log").exists() and (run / "router-worker1.log").exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")
