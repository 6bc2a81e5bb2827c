"""The examples a user copies: each runs as documented (dry-run, live, or as a config)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prefixkit.engine_adapter import ReplicaEndpoint, Tenants, Topology, deploy

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
GATEWAY_PORT = 18470


def run(*command: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def tenant_rows(stdout: str) -> dict[tuple[str, int], tuple[int, int]]:
    """`tenant request prompt cached` rows of vllm_tenants.py."""
    rows = re.findall(r"^(\w+)\s+(\d)\s+(\d+)\s+(\d+)$", stdout, re.M)
    return {(t, int(n)): (int(p), int(c)) for t, n, p, c in rows}


def assert_tenants_isolated_and_repeats_hit(stdout: str) -> None:
    rows = tenant_rows(stdout)
    assert set(rows) == {("acme", 1), ("acme", 2), ("globex", 1), ("globex", 2)}, stdout
    for tenant in ("acme", "globex"):
        prompt_tokens, cached = rows[(tenant, 2)]
        assert rows[(tenant, 1)][1] == 0, f"{tenant}'s first request hit someone's cache"
        # whole blocks of 32, everything but the last (always recomputed) block
        assert cached == (prompt_tokens - 1) // 32 * 32, stdout


@pytest.mark.engine
def test_vllm_tenants_dry_run_isolates_tenants_with_an_aligned_prefix(
    engine: EmbeddedEngine,
) -> None:
    result = run(
        sys.executable,
        str(EXAMPLES / "vllm_tenants.py"),
        "--dry-run",
        "--tokenizer",
        str(engine.config.model),
    )
    assert result.returncode == 0, result.stderr
    assert "not aligned" not in result.stderr
    assert_tenants_isolated_and_repeats_hit(result.stdout)


@pytest.mark.engine
def test_vllm_tenants_against_the_real_engine_through_the_gateway(
    engine: EmbeddedEngine,
) -> None:
    keys = {"acme": f"key-{secrets.token_hex(4)}", "globex": f"key-{secrets.token_hex(4)}"}
    tenants = Tenants({key: tenant for tenant, key in keys.items()}, secrets.token_hex(16))
    endpoint = ReplicaEndpoint.of(engine.config)
    with deploy([endpoint], Topology(port=GATEWAY_PORT), tenants=tenants) as deployment:
        result = run(
            sys.executable,
            str(EXAMPLES / "vllm_tenants.py"),
            "--base-url",
            f"{deployment.url}/v1",
            "--model",
            engine.model,
            "--tokenizer",
            str(engine.config.model),
            *(f"--key={tenant}={key}" for tenant, key in keys.items()),
        )
    assert result.returncode == 0, result.stderr
    assert_tenants_isolated_and_repeats_hit(result.stdout)


def test_analyze_example_ranks_policies_on_the_bundled_trace(tmp_path: Path) -> None:
    result = run(
        "bash",
        str(EXAMPLES / "analyze_trace.sh"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Caching pays" in result.stdout
    policies = json.loads((tmp_path / "policies.json").read_text())
    assert {p["policy"] for p in policies} >= {"round_robin", "smg_like", "precise"}
    assert (tmp_path / "policies.png").stat().st_size > 0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository using examples/pre-commit-config.yaml, with a pinned prompt."""
    shutil.copy(EXAMPLES / "pre-commit-config.yaml", tmp_path / ".pre-commit-config.yaml")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "support@v1.md").write_text("You are a support assistant.\n")
    assert run("prefixkit", "lock", cwd=tmp_path).returncode == 0
    run("git", "init", "-q", cwd=tmp_path)
    run("git", "config", "user.email", "dev@example.invalid", cwd=tmp_path)
    run("git", "config", "user.name", "dev", cwd=tmp_path)
    return tmp_path


def pre_commit(project: Path) -> subprocess.CompletedProcess[str]:
    run("git", "add", "-A", cwd=project)
    return run("pre-commit", "run", "--all-files", cwd=project)


APP_GOOD = """\
import anthropic

SYSTEM = "You are a support assistant."


def ask(client: anthropic.Anthropic, question: str) -> object:
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, system=SYSTEM,
        messages=[{"role": "user", "content": question}],
    )
"""


def test_pre_commit_example_passes_a_clean_project(project: Path) -> None:
    (project / "app.py").write_text(APP_GOOD)
    result = pre_commit(project)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pre_commit_example_blocks_a_clock_in_the_system_prompt(project: Path) -> None:
    (project / "app.py").write_text(
        APP_GOOD.replace(
            'SYSTEM = "You are a support assistant."',
            'from datetime import datetime\n\nSYSTEM = f"Now: {datetime.now()}. Be helpful."',
        )
    )
    result = pre_commit(project)
    assert result.returncode == 1
    assert "PFX001" in result.stdout


def test_pre_commit_example_blocks_a_prompt_edited_without_relocking(project: Path) -> None:
    (project / "app.py").write_text(APP_GOOD)
    (project / "prompts" / "support@v1.md").write_text("You are a helpful support assistant.\n")
    result = pre_commit(project)
    assert result.returncode == 1
    assert "support@v1" in result.stdout
