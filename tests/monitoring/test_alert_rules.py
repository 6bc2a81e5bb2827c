"""The Prometheus alert rules (deploy/monitoring/prefixkit-alerts.yml) pass their tests under
the real ``promtool test rules`` (tests/monitoring/prefixkit-alerts.test.yml): a tenant's
hit rate below 70% over 15 minutes, a tenant that stopped hitting after a roll-out, a replica
that does not answer. promtool comes from Debian's prometheus package (`make promtool`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prefixkit.engine_adapter.engine.home import prefixkit_home

HERE = Path(__file__).parent
RULES = HERE.parent.parent / "deploy" / "monitoring" / "prefixkit-alerts.yml"
RULES_TEST = HERE / "prefixkit-alerts.test.yml"


def _promtool() -> str:
    """promtool on PATH, else where `make promtool` unpacks it; fails (never skips) when
    neither has it."""
    found = shutil.which("promtool")
    unpacked = prefixkit_home() / "bin" / "promtool"
    if found is None and unpacked.is_file():
        found = str(unpacked)
    if found is None:
        pytest.fail(
            "promtool is missing: run `make promtool` (it unpacks it from Debian's "
            f"prometheus package into {unpacked.parent}) or `apt-get install prometheus`"
        )
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args], cwd=HERE, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_alert_rules_are_valid_prometheus_rules() -> None:
    checked = _run("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout


def test_the_alert_rules_pass_their_promtool_tests() -> None:
    tested = _run("test", "rules", RULES_TEST.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
