"""`prefixkit models`: what the SDK knows about each model, run as the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from prefixkit.sdk import known_models

PREFIXKIT = Path(sys.executable).parent / "prefixkit"


def prefixkit_models(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PREFIXKIT), "models", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_table_lists_every_known_model_with_its_prices() -> None:
    result = prefixkit_models()
    assert result.returncode == 0, result.stderr
    rows = {line.split()[1]: line.split() for line in result.stdout.splitlines()[1:] if line}
    assert set(rows) >= {info.name for info in known_models()}
    # claude-sonnet-5-5: no published minimum, $2 / $10, reads at 0.05x (secondary source)
    assert rows["claude-sonnet-5-5"][2:6] == ["-", "2", "10", "0.05x*"]


def test_json_carries_every_fact_with_its_source_and_date() -> None:
    result = prefixkit_models("--provider", "anthropic", "--format", "json")
    assert result.returncode == 0, result.stderr
    records = {record["model"]: record for record in json.loads(result.stdout)}
    assert {record["provider"] for record in records.values()} == {"anthropic"}
    haiku = records["claude-haiku-5-5"]
    assert haiku["long_prompt"] == {
        "above_tokens": 100_000,
        "input_usd_per_mtok": 0.5,
        "output_usd_per_mtok": 2.5,
    }
    assert all(record["source"] and record["read_on"] for record in records.values())


def test_an_unknown_provider_is_a_usage_error() -> None:
    result = prefixkit_models("--provider", "gemini")
    assert result.returncode == 2
    assert "invalid choice: 'gemini'" in result.stderr


def test_the_provider_facts_page_shows_the_current_anthropic_table() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/providers/models.md").read_text()
    table = prefixkit_models("--provider", "anthropic").stdout
    assert f"```text\n{table}```" in page
