"""`make demo` runs the whole story: real engine, three tenants, summary, linter, clean stop."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO_PORT = 18440

pytestmark = pytest.mark.engine


def test_demo_serves_three_tenants_isolated_then_lints_and_stops_everything() -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [
            sys.executable,
            "examples/demo.py",
            "--turns",
            "2",
            "--conversations",
            "1",
            "--port",
            str(DEMO_PORT),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    rows = re.findall(r"^(acme|globex|initech)\s+1\s+(\d)\s+(\d+)\s+(\d+)\s+\d+$", out, re.M)
    assert len(rows) == 6, out
    for tenant, turn, _prompt_tokens, cached in rows:
        if turn == "1":
            assert cached == "0", f"{tenant}'s first request hit another tenant's cache"
        else:
            assert int(cached) > 1000, f"{tenant}'s second turn missed its own prefix"
    assert "tenant isolation" in out and "held" in out
    assert "All checks passed!" in out  # the app
    assert "PFX001" in out and "PFX101" in out  # the broken copy: code and prompt file
    # nothing left listening on the demo's engine or gateway port
    ports = subprocess.run(["ss", "-ltn"], capture_output=True, text=True, check=False).stdout
    assert f":{DEMO_PORT} " not in ports and f":{DEMO_PORT + 90} " not in ports
