"""`prefixkit lint`: exit codes, output formats, --fix, config errors, noqa, skipped files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prefixkit.cli import lint as command
from prefixkit.cli.main import main
from prefixkit.linter.formats import FORMATS

from tests.linter.conftest import DAY_AND_SET_IN_SYSTEM

UNSAFE = (
    "import json\n"
    "def ask(client, q, overrides):\n"
    "    policy = json.dumps({'tone': 'formal', **overrides})\n"
    "    return client.messages.create(system=policy, messages=[q])\n"
)
GOOD = "SYSTEM = 'You are helpful.'\ndef ask(client, q):\n    return client.messages.create(system=SYSTEM, messages=[q])\n"


def lint(*argv: str) -> int:
    return main(["lint", *argv])


def test_clean_project_exits_zero(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "good.py").write_text(GOOD, encoding="utf-8")
    assert lint() == 0
    assert "All checks passed!" in capsys.readouterr().out


def test_findings_exit_one_and_exit_zero_overrides(project: Path) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    assert lint() == 1
    assert lint("--exit-zero") == 0


def test_json_output_has_ruff_shape(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    lint("--format", "json")
    items = json.loads(capsys.readouterr().out)
    assert [item["code"] for item in items] == ["PFX001", "PFX004"]
    first = items[0]
    assert first["filename"] == "bad.py"
    assert first["location"] == {"row": 3, "column": 19}
    assert first["end_location"] == {"row": 3, "column": 27}
    assert first["fix"] is None
    edit = items[1]["fix"]["edits"][0]
    assert edit["content"] == "sorted("
    assert items[1]["fix"]["applicability"] == "safe"
    assert first["cell"] is None


def test_sarif_output_is_sarif_2_1_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    lint("--format", "sarif")
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "prefixkit"
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert result["message"]["text"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.py"


def test_github_output_is_one_annotation_per_finding(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    lint("--format", "github")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error title=prefixkit (PFX001),file=bad.py,line=3,col=19,")


def test_full_output_shows_the_source_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    lint("--format", "full")
    out = capsys.readouterr().out
    assert "3 | SYSTEM = f'Today" in out
    assert "^^^^^^^^" in out
    assert "= help: " in out


def test_fix_applies_safe_fixes_only_and_keeps_formatting(project: Path) -> None:
    path = project / "bad.py"
    path.write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    assert lint("--fix") == 1  # the clock has no safe fix
    assert path.read_text(encoding="utf-8") == DAY_AND_SET_IN_SYSTEM.replace(
        ".join(TOOL_NAMES)", ".join(sorted(TOOL_NAMES))"
    )
    fixed_once = path.read_text(encoding="utf-8")
    lint("--fix")
    assert path.read_text(encoding="utf-8") == fixed_once


def test_unsafe_fixes_are_applied_only_when_asked(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "unsafe.py"
    path.write_text(UNSAFE, encoding="utf-8")
    assert lint("--fix") == 1
    assert path.read_text(encoding="utf-8") == UNSAFE
    out = capsys.readouterr().out
    assert "PFX003 `json.dumps`" in out  # no [*]: --fix alone does not apply it
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in out
    assert lint("--fix", "--unsafe-fixes") == 0
    assert path.read_text(encoding="utf-8") == UNSAFE.replace(
        "**overrides})", "**overrides}, sort_keys=True)"
    )


def test_noqa_comment_silences_one_line(project: Path) -> None:
    source = DAY_AND_SET_IN_SYSTEM.replace('{", ".join(TOOL_NAMES)}\'', "'  # noqa: PFX001")
    (project / "bad.py").write_text(source, encoding="utf-8")
    assert lint() == 0


def test_noqa_for_another_code_does_not_silence(project: Path) -> None:
    source = DAY_AND_SET_IN_SYSTEM.replace(
        '{", ".join(TOOL_NAMES)}\'', "search and refund.'  # noqa: PFX002"
    )
    (project / "bad.py").write_text(source, encoding="utf-8")
    assert lint() == 1


def test_file_level_noqa_silences_the_file(project: Path) -> None:
    (project / "bad.py").write_text("# prefixkit: noqa\n" + DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    assert lint() == 0


def test_config_ignore_and_per_file_ignores(project: Path) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    (project / "pyproject.toml").write_text(
        "[tool.prefixkit.lint]\nignore = ['PFX004']\nper-file-ignores = {'bad.py' = ['PFX001']}\n",
        encoding="utf-8",
    )
    assert lint() == 0


def test_config_extends_volatile_callables_and_cached_keywords(project: Path) -> None:
    (project / "app.py").write_text(
        "from myapp.clock import now\n"
        "def ask(agent, q):\n"
        "    return agent.run(preamble=f'Started {now()}', input=q)\n",
        encoding="utf-8",
    )
    assert lint() == 0
    (project / "pyproject.toml").write_text(
        "[tool.prefixkit.lint]\n"
        "extra-volatile-callables = ['myapp.clock.now']\n"
        "extra-cached-keywords = ['preamble']\n",
        encoding="utf-8",
    )
    assert lint() == 1


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("select = ['PFX999']", "matches no rule"),
        ("colour = 'red'", "unknown key `colour`"),
        ("ignore = 'PFX001'", "must be a list of strings"),
        ("max-file-size = -1", "positive number of bytes"),
        ("per-file-ignores = ['x']", "must be a table"),
    ],
)
def test_bad_config_exits_two_with_a_clear_message(
    project: Path, capsys: pytest.CaptureFixture[str], section: str, expected: str
) -> None:
    (project / "pyproject.toml").write_text(f"[tool.prefixkit.lint]\n{section}\n", encoding="utf-8")
    assert lint() == 2
    err = capsys.readouterr().err
    assert expected in err and "pyproject.toml" in err


def test_invalid_toml_exits_two(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text("[tool.prefixkit.lint\n", encoding="utf-8")
    assert lint() == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_missing_path_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint("nowhere.py") == 2
    assert "nowhere.py: no such file" in capsys.readouterr().err


def test_syntax_error_is_a_finding_and_other_files_are_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    assert lint("--format", "json") == 1
    codes = {(i["filename"], i["code"]) for i in json.loads(capsys.readouterr().out)}
    assert ("broken.py", "PFX000") in codes
    assert ("bad.py", "PFX001") in codes


def test_binary_huge_and_non_utf8_files_are_skipped_with_a_note(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text(
        "[tool.prefixkit.lint]\nmax-file-size = 100\n", encoding="utf-8"
    )
    (project / "blob.py").write_bytes(b"x = 1\0\1\2")
    (project / "huge.py").write_text("x = 1\n" * 50, encoding="utf-8")
    (project / "latin.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    assert lint() == 0
    err = capsys.readouterr().err
    assert "skipped blob.py: binary file" in err
    assert "skipped huge.py: 300 bytes is over max-file-size (100)" in err
    assert "skipped latin.py: not UTF-8" in err


def test_default_excludes_and_gitignore_are_honoured(project: Path) -> None:
    for folder in (".venv/lib", "build", "generated", "src"):
        (project / folder).mkdir(parents=True)
    for folder in (".venv/lib", "build", "generated"):
        (project / folder / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    (project / ".gitignore").write_text("generated/\n", encoding="utf-8")
    (project / "src" / "good.py").write_text(GOOD, encoding="utf-8")
    assert lint() == 0
    assert lint("generated/bad.py") == 1  # named explicitly: linted


def test_jobs_gives_the_same_findings(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(4):
        (project / f"bad{n}.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    lint("--format", "json")
    single = capsys.readouterr().out
    lint("--format", "json", "--jobs", "2")
    assert capsys.readouterr().out == single


def test_jobs_must_be_positive(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint("--jobs", "0") == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_command_formats_match_the_renderers() -> None:
    assert command._FORMATS == FORMATS


def test_console_script_reports_without_traceback(project: Path) -> None:
    (project / "broken.py").write_text("def f(:\n", encoding="utf-8")
    (project / "pyproject.toml").write_text("[tool.prefixkit.lint]\nselect = 1\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "prefixkit.cli.main", "lint"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "`select` must be a list of strings" in result.stderr


def test_prompt_drift_uses_the_sdk_lock(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prefixkit.sdk.registry import write_lock

    prompts = project / "prompts"
    prompts.mkdir()
    (prompts / "support@v3.md").write_text("You are a support agent.\n", encoding="utf-8")
    write_lock(prompts)
    assert lint() == 0
    (prompts / "support@v3.md").write_text("You are a sales agent.\n", encoding="utf-8")
    assert lint() == 1
    out = capsys.readouterr().out
    assert "prompts/support@v3.md:1:1: PFX102 prompt support@v3 changed since it was locked" in out


def test_malformed_lock_is_an_error_not_a_traceback(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "prompts").mkdir()
    (project / "prompts" / "a.md").write_text("Hello.\n", encoding="utf-8")
    (project / "prefixkit.lock").write_text("{not json", encoding="utf-8")
    assert lint() == 2
    err = capsys.readouterr().err
    assert "prefixkit.lock: not valid JSON" in err and "Traceback" not in err


def test_explicit_config_file_is_used(project: Path, tmp_path: Path) -> None:
    (project / "bad.py").write_text(DAY_AND_SET_IN_SYSTEM, encoding="utf-8")
    other = tmp_path / "lint.toml"
    other.write_text("[tool.prefixkit.lint]\nselect = ['PFX101']\n", encoding="utf-8")
    assert lint("--config", str(other)) == 0
    assert lint("--config", str(tmp_path / "missing.toml")) == 2


def test_the_same_files_give_the_same_report_in_every_process() -> None:
    # a finding that names one of several causes names the same one every time
    reports = {
        subprocess.run(
            [sys.executable, "-m", "prefixkit.cli.main", "lint", "examples/broken_app"],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
        ).stdout
        for _ in range(6)
    }
    assert len(reports) == 1
