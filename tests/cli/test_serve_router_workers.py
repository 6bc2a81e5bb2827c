"""`prefixkit serve --router-workers N`: refused, before anything starts, where it does
not fit."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.cli.main import main


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
