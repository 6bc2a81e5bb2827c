"""`make demo` runs the whole story: real engine, three tenants, summary, a prompt roll-out
whose miss is named, linter, clean stop."""

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


def test_demo_serves_three_tenants_isolated_names_a_rollout_miss_lints_and_stops() -> None:
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
    # the roll-out: the guard names the changed segment and block, Anthropic its reason
    rollout = out[out.index("a roll-out mid-run") : out.index("the linter on the app")]
    requests = re.findall(
        r"^\s+request \d on v4: ([\d,]+) prompt tokens, ([\d,]+) cached$", rollout, re.M
    )
    assert len(requests) == 2, rollout
    first, second = (tuple(int(n.replace(",", "")) for n in row) for row in requests)
    assert re.search(r"^\s+segment:\s+support@v4$", rollout, re.M), rollout
    assert re.search(r"^\s+cause:\s+static_text$", rollout, re.M), rollout
    block = re.search(r"^\s+block:\s+(\d+) \(tokens (\d+)-\d+\)$", rollout, re.M)
    assert block is not None, rollout
    # vLLM read every block before the first changed one, none after it
    assert 0 < first[1] == int(block.group(2)) < first[0], rollout
    lost = re.search(r"^\s+tokens lost:\s+([\d,]+)$", rollout, re.M)
    assert lost is not None and int(lost.group(1).replace(",", "")) > 0, rollout
    assert second[1] > first[1], "the second request on v4 did not read the new prefix"
    assert "provider reason: system_changed" in rollout, rollout
    assert "the guard adds the segment: support@v4" in rollout, rollout
    assert "All checks passed!" in out  # the app
    assert "PFX001" in out and "PFX101" in out  # the broken copy: code and prompt file
    # nothing left listening on the demo's engine or gateway port
    ports = subprocess.run(["ss", "-ltn"], capture_output=True, text=True, check=False).stdout
    assert f":{DEMO_PORT} " not in ports and f":{DEMO_PORT + 90} " not in ports
