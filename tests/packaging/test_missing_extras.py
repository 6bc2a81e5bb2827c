"""Each optional part checks every module of its extra that it needs where the part starts,
so one missing module is enough for the one clear error naming the extra (the clean
install in test_wheel.py lacks them all at once). A module set to None in `sys.modules`
is one Python cannot import and `importlib.util.find_spec` reports as not installed."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import pytest
from prefixkit.cli import analyze
from prefixkit.sdk import MissingExtraError

from tests.conftest import MOONCAKE_TRACE


@pytest.mark.parametrize(
    ("part", "module", "extra"),
    [
        ("prefixkit.linter", "libcst", "lint"),
        ("prefixkit.linter", "pathspec", "lint"),
        ("prefixkit.linter", "yaml", "lint"),
        ("prefixkit.engine_adapter.engine", "pydantic", "serve"),
        ("prefixkit.engine_adapter.engine", "httpx", "serve"),
        ("prefixkit.engine_adapter.engine", "prometheus_client", "serve"),
        ("prefixkit.engine_adapter.serving", "anyio", "serve"),
        ("prefixkit.engine_adapter.serving", "httpx", "serve"),
        ("prefixkit.engine_adapter.serving", "starlette", "serve"),
        ("prefixkit.engine_adapter.routing.kv_events", "zmq", "serve"),
        ("prefixkit.engine_adapter.routing.kv_events", "msgpack", "serve"),
        ("prefixkit.testing", "anthropic", "testing"),
        ("prefixkit.testing", "uvicorn", "testing"),
    ],
)
def test_a_part_missing_one_module_of_its_extra_names_the_module_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, part: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, part, raising=False)  # run its check again
    with pytest.raises(
        MissingExtraError, match=rf" needs {module}, which .* pip install 'prefixkit\[{extra}\]'$"
    ):
        importlib.import_module(part)


def analyze_args(trace: Path, *options: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    analyze.configure(parser)
    return parser.parse_args([str(trace), "--limit", "10", *options])


def test_prefixkit_analyze_without_rich_names_the_analyze_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    with pytest.raises(MissingExtraError, match=r"^prefixkit analyze needs rich.*\[analyze\]'$"):
        analyze.run(analyze_args(MOONCAKE_TRACE))


def test_prefixkit_analyze_plot_without_matplotlib_says_so_before_reading_the_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the trace does not exist: reading it first would end in a TraceError (exit 2)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(
        MissingExtraError, match=r"^prefixkit analyze --plot needs matplotlib.*\[analyze\]'$"
    ):
        analyze.run(analyze_args(tmp_path / "absent.jsonl", "--plot", str(tmp_path / "p.png")))


def test_a_trace_of_prompts_without_transformers_names_the_hf_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # imported here, so that a stale replay build fails this test only
    from prefixkit.engine_adapter.replay.trace import load_trace

    trace = tmp_path / "prompts.jsonl"
    trace.write_text(json.dumps({"prompt": "How much is egress?"}) + "\n")
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingExtraError, match=r"--tokenizer\) needs transformers.*\[hf\]'$"):
        load_trace(trace, tokenizer=str(tmp_path))
