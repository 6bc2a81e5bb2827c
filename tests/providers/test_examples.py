"""The provider examples run end to end with --dry-run (official clients, simulated API)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.example_run import ExampleRun, run_example

EXAMPLES = Path(__file__).parents[2] / "examples"


def run(name: str, *args: str, env: dict[str, str] | None = None) -> ExampleRun:
    return run_example(EXAMPLES / name, *args, environ=env)


def total_cached(stdout: str) -> int:
    match = re.search(r"^TOTAL \d+ request\(s\): \d+ prompt tokens, (\d+) cached", stdout, re.M)
    assert match, stdout
    return int(match.group(1))


def test_anthropic_rag_dry_run_caches_the_static_prefix_across_customers() -> None:
    result = run("anthropic_rag.py", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert total_cached(result.stdout) > 0
    requests = result.stdout.split("request ")[1:]
    assert len(requests) == 6
    # Customers arrive every 20 minutes: the static and versioned system blocks take 1h,
    # the session's rolling breakpoint 5m.
    assert re.search(r"system\[1\] .* cache_control ttl=1h", requests[0])
    assert re.search(
        r'user\[0\]\.content\[\d\] .* \{"type": "ephemeral", "ttl": "5m"\}', requests[0]
    )
    assert ", 0 cached" not in requests[3]  # bob's first request reads alice's static prefix
    assert "break-even" in result.stdout and "pays=True" in result.stdout


def test_openai_chat_dry_run_keys_differ_per_tenant_and_repeat_within_one() -> None:
    result = run("openai_chat.py", "--dry-run")
    assert result.returncode == 0, result.stderr
    keys = re.findall(r'prompt_cache_key="(pk-[0-9a-f]+)"', result.stdout)
    assert len(keys) == 6
    assert len(set(keys[:3])) == 1 and len(set(keys[3:])) == 1 and keys[0] != keys[3]
    assert total_cached(result.stdout) > 0


def test_openai_responses_dry_run_sends_explicit_breakpoints_with_12h_ttl() -> None:
    result = run("openai_responses.py", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert 'prompt_cache_options={"mode": "explicit", "ttl": "12h"}' in result.stdout
    assert '{"mode": "explicit"}' in result.stdout
    assert total_cached(result.stdout) > 0


@pytest.mark.parametrize("name", ["anthropic_rag.py", "openai_chat.py", "openai_responses.py"])
def test_examples_without_a_key_or_dry_run_say_what_to_do(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    result = run(name, env=env)
    assert result.returncode == 2
    assert "or pass --dry-run" in result.stderr
