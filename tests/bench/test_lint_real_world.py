"""bench/lint_real_world.py's scoring of the other linters, on small invented outputs."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench.conftest import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("lint_real_world")


ROOT = Path("/repos/ledgerly")

JUDGED: dict[str, Any] = {
    "findings": [
        {"repo": "ledgerly", "path": "app/agent.py", "line": 12, "rule": "PFX001",
         "verdict": True, "reason": "clock in the system prompt"},
        {"repo": "ledgerly", "path": "app/tools.py", "line": 40, "rule": "PFX003",
         "verdict": False, "reason": "a log line"},
    ],
    "breakers": [
        {"id": "L1", "repo": "ledgerly", "path": "app/agent.py", "lines": [12, 13],
         "rule": "PFX001", "what": "clock"},
        {"id": "L2", "repo": "ledgerly", "path": "app/prompt.py", "line": 5,
         "rule": "PFX004", "what": "set order",
         "also": [{"path": "app/build.py", "line": 30}]},
        {"id": "L3", "repo": "ledgerly", "path": "app/other.py", "line": 9,
         "rule": "PFX002", "what": "user id"},
    ],
}  # fmt: skip


def test_cachedrift_findings_map_to_repository_paths_and_lines(bench: ModuleType) -> None:
    output = json.dumps(
        {
            "tool": "cachedrift",
            "findings": [
                {"rule": "CD01", "severity": "fail", "file": "app/agent.py", "line": 13},
                {"rule": "CD08", "severity": "warn", "file": "./app/tools.py", "line": 40},
            ],
        }
    )
    found = bench.findings_from_cachedrift(output, ROOT)
    assert [(f["code"], f["path"], f["location"]["row"]) for f in found] == [
        ("CD01", "app/agent.py", 13),
        ("CD08", "app/tools.py", 40),
    ]


def test_pcdlint_findings_map_to_repository_paths_and_lines(bench: ModuleType) -> None:
    output = json.dumps(
        [
            {"rule_id": "PCL002", "file_path": str(ROOT / "app" / "build.py"), "lineno": 30},
            {"rule_id": "PCL001", "file_path": "app/x.py", "lineno": 3},
        ]
    )
    found = bench.findings_from_pcdlint(output, ROOT)
    assert [(f["code"], f["path"], f["location"]["row"]) for f in found] == [
        ("PCL002", "app/build.py", 30),
        ("PCL001", "app/x.py", 3),
    ]
    assert bench.findings_from_pcdlint("", ROOT) == []


def run(bench: ModuleType, found: list[tuple[str, str, int]]) -> Any:
    tool_run = bench.RepoRun("ledgerly", ROOT)
    tool_run.findings = [bench._finding(code, path, line) for code, path, line in found]
    return tool_run


def test_another_tools_finding_takes_the_verdict_judged_at_its_line(bench: ModuleType) -> None:
    tool_run = run(bench, [("CD01", "app/agent.py", 12), ("CD08", "app/tools.py", 40)])
    result = bench.score_by_place([tool_run], JUDGED, {"ledgerly"})
    assert (sum(result.judged.values()), sum(result.true.values())) == (2, 1)
    assert result.precision == 0.5 and result.unjudged == []


def test_a_finding_on_a_breakers_line_is_true_and_one_elsewhere_unjudged(
    bench: ModuleType,
) -> None:
    tool_run = run(bench, [("PCL002", "app/build.py", 30), ("PCL001", "app/x.py", 3)])
    result = bench.score_by_place([tool_run], JUDGED, {"ledgerly"})
    assert (sum(result.judged.values()), sum(result.true.values())) == (1, 1)
    assert result.unjudged == ["ledgerly/app/x.py:3 PCL001"]


def test_recall_counts_a_breaker_caught_at_any_of_its_lines_or_places(bench: ModuleType) -> None:
    tool_run = run(bench, [("CD01", "app/agent.py", 13), ("PCL002", "app/build.py", 30)])
    result = bench.score_by_place([tool_run], JUDGED, {"ledgerly"})
    assert result.breakers == 3
    assert [entry["id"] for entry in result.missed] == ["L3"]
    assert result.recall == pytest.approx(2 / 3)


def test_no_findings_scores_no_precision_and_no_recall(bench: ModuleType) -> None:
    result = bench.score_by_place([run(bench, [])], JUDGED, {"ledgerly"})
    assert (result.precision, result.recall, len(result.missed)) == (0.0, 0.0, 3)
    (row,) = bench.compare_tools({"pcdlint 0.3.0": ([run(bench, [])], result)})[2:]
    assert row.startswith("| pcdlint 0.3.0 | 0 | 0 | 0 | - | 0 | 0/3 | 0.00 |")


def test_a_saved_run_is_scored_without_linting_again(bench: ModuleType, tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    finding = {"repo": "ledgerly", **bench._finding("PFX001", "app/agent.py", 12)}
    saved.write_text(json.dumps([finding, {**finding, "repo": "other"}]), encoding="utf-8")
    runs = [bench.RepoRun("ledgerly", ROOT)]
    bench.load_saved(saved, runs)
    assert [f["path"] for f in runs[0].findings] == ["app/agent.py"]
