"""One error handler for every subcommand: a usage or configuration error exits 2 with the
message on stderr, a runtime failure exits 3 (`tests/cli/test_serve.py` has serve's)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from prefixkit.cli.main import exit_code, main
from prefixkit.engine_adapter import ReplicaStartError, TraceError
from prefixkit.sdk import MissingExtraError, PromptNotFoundError, UsageError

from tests.conftest import MOONCAKE_TRACE


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("x"), 2),
        (TraceError("x", path=Path("trace.jsonl")), 2),
        (PromptNotFoundError("x", root=Path("prompts")), 2),
        (MissingExtraError("x"), 2),
        (ReplicaStartError("x", replica=0, url="http://127.0.0.1:8100"), 3),
    ],
)
def test_an_error_maps_to_its_exit_code(error: Exception, code: int) -> None:
    assert exit_code(error) == code  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "no-such-trace.jsonl"], "prefixkit analyze: error: trace file"),
        (["analyze", str(MOONCAKE_TRACE), "--policies", "best"], "unknown policies ['best']"),
        (["analyze", str(MOONCAKE_TRACE), "--policies", "precise,,smg_like"], "policies ['']"),
        (["analyze", str(MOONCAKE_TRACE), "--replicas", "0"], "--replicas 0: give a positive"),
        (["analyze", str(MOONCAKE_TRACE), "--capacity", "-5"], "--capacity -5: give a positive"),
        (["analyze", str(MOONCAKE_TRACE), "--time-scale", "0"], "--time-scale 0.0: give a"),
        (["analyze", str(MOONCAKE_TRACE), "--plot", "no/p.png"], "the folder no does not exist"),
        (["analyze", str(MOONCAKE_TRACE), "--plot", "p.txt"], "give a file name ending in"),
        (["analyze", "."], "trace file . is a folder"),
        (["lint", "no-such-folder"], "prefixkit lint: error:"),
        (["lint", "--jobs", "0"], "--jobs must be at least 1"),
        (["lock", "--root", "no-such-folder"], "prefixkit lock: error:"),
    ],
)
def test_a_usage_error_exits_2_and_says_what_is_wrong(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_analyze_reads_the_compressed_trace_shipped_with_the_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["analyze", str(MOONCAKE_TRACE), "--limit", "300", "--replicas", "4"]
    assert main([*argv, "--format", "json"]) == 0
    assert '"policy": "precise"' in capsys.readouterr().out


def test_the_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"prefixkit {importlib.metadata.version('prefixkit')}"
