"""examples/agent_loop.py: the tool loop through the official clients (dry run) and live on
the embedded vLLM engine, each turn reading the previous one from the cache."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.example_run import run_example

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\s+(\d+)  (\S.*?)\s+(\d+)\s+(\d+)\s+(?:-|([\d.]+)%)$", re.M)


def run(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "examples/agent_loop.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def turns(out: str) -> list[tuple[int, str, int, int]]:
    return [(int(n), calls, int(p), int(c)) for n, calls, p, c, _ in ROW.findall(out)]


def test_dry_run_asks_two_tools_then_answers_reading_each_previous_turn_from_cache() -> None:
    result = run_example(ROOT / "examples" / "agent_loop.py", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    sections = [s for s in result.stdout.split("\n\n") if "turns, stopped" in s]
    assert len(sections) == 3  # Anthropic, Responses, Chat
    for section in sections:
        rows = turns(section)
        assert [calls.strip() for _, calls, _, _ in rows] == [
            "get_weather",
            "get_local_time",
            "(answer)",
        ], section
        assert rows[0][3] == 0
        for previous, current in itertools.pairwise(rows):
            assert current[3] >= 0.9 * previous[2], section


@pytest.mark.engine
def test_live_engine_reads_at_least_90_percent_of_the_previous_prompt_every_turn() -> None:
    result = run(timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = turns(result.stdout)
    assert len(rows) == 3 and rows[-1][1].strip() == "(answer)", result.stdout
    for previous, current in itertools.pairwise(rows):
        assert current[3] >= 0.9 * previous[2], result.stdout
    assert "2..n: held" in result.stdout
