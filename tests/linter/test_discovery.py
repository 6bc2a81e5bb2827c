"""Which files `prefixkit lint` checks, which it skips and why, and what it says about both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixkit.cli.main import main

from tests.linter.conftest import NOW_IN_SYSTEM, write

GOOD = "SYSTEM = 'You are helpful.'\n"
# static text after a placeholder: what makes a volatile placeholder a cache breaker
POLICY = "Answer in English, cite the policy section you rely on, and never promise a refund or a delivery date yourself.\n"
NOTEBOOK = Path(__file__).parent / "notebooks" / "magics.ipynb"


def linted(*argv: str, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The files reported with findings (every file holds a finding here)."""
    main(["lint", "--no-cache", "--format", "json", *argv])
    return {item["filename"] for item in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize("pattern", ["vendor", "vendor/", "**/vendor", "**/vendor/**"])
def test_exclude_matches_the_folder_at_any_depth(
    project: Path, capsys: pytest.CaptureFixture[str], pattern: str
) -> None:
    write(project / "vendor" / "a.py", NOW_IN_SYSTEM)
    write(project / "lib" / "vendor" / "b.py", NOW_IN_SYSTEM)
    write(project / "vendors" / "c.py", NOW_IN_SYSTEM)
    write(project / "pyproject.toml", f"[tool.prefixkit.lint]\nexclude = [{pattern!r}]\n")
    assert linted(capsys=capsys) == {"vendors/c.py"}


@pytest.mark.parametrize("pattern", ["/vendor", "vendor/**", "/vendor/"])
def test_a_pattern_with_an_inner_or_leading_slash_matches_only_at_the_root(
    project: Path, capsys: pytest.CaptureFixture[str], pattern: str
) -> None:
    write(project / "vendor" / "a.py", NOW_IN_SYSTEM)
    write(project / "lib" / "vendor" / "b.py", NOW_IN_SYSTEM)
    write(project / "pyproject.toml", f"[tool.prefixkit.lint]\nextend-exclude = [{pattern!r}]\n")
    assert linted(capsys=capsys) == {"lib/vendor/b.py"}


def test_exclude_flag_adds_patterns(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(project / "generated" / "a.py", NOW_IN_SYSTEM)
    write(project / "b.py", NOW_IN_SYSTEM)
    assert linted("--exclude", "generated", "--exclude", "*.pyi", capsys=capsys) == {"b.py"}


def test_a_pattern_that_matches_nothing_is_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "vendor" / "a.py", GOOD)
    write(project / "pyproject.toml", "[tool.prefixkit.lint]\nexclude = ['vendor', 'vendr/']\n")
    assert main(["lint", "--no-cache", "--exclude", "nowhere"]) == 0
    err = capsys.readouterr().err
    assert "warning: exclude pattern 'vendr/'" in err and "matches nothing" in err
    assert "'vendor'" not in err
    assert "warning: --exclude 'nowhere' matches nothing" in err


def test_named_files_are_linted_even_when_excluded_unless_forced(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "vendor" / "a.py", NOW_IN_SYSTEM)
    write(project / "pyproject.toml", "[tool.prefixkit.lint]\nexclude = ['vendor']\n")
    assert linted("vendor/a.py", capsys=capsys) == {"vendor/a.py"}
    assert linted("--force-exclude", "vendor/a.py", capsys=capsys) == set()


def test_a_named_markdown_file_is_a_prompt_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "docs" / "system.md", "Today is {{ current_date }}.\n" + POLICY)
    assert linted(capsys=capsys) == set()  # outside the prompt globs: not walked
    assert linted("docs/system.md", capsys=capsys) == {"docs/system.md"}
    assert linted("--force-exclude", "docs/system.md", capsys=capsys) == set()


def test_prompt_folders_at_any_depth_are_prompt_files(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the layout anthropic-cookbook uses: patterns/agents/prompts/*.md
    write(
        project / "patterns" / "agents" / "prompts" / "research.md",
        "Date: {{.CurrentDate}}\n" + POLICY,
    )
    write(project / "prompts" / "support.txt", "Hello {{ user_name }}\n" + POLICY)
    write(project / "notes" / "todo.md", "Due {{ date }}\n" + POLICY)
    assert linted(capsys=capsys) == {"patterns/agents/prompts/research.md", "prompts/support.txt"}


@pytest.mark.parametrize(
    "folder",
    [".git", ".venv", "node_modules", "build", "dist", "site-packages", "__pycache__", ".tox",
     ".nox", ".prefixkit_cache", "pkg.egg-info"],
)  # fmt: skip
def test_tool_folders_are_never_walked(
    project: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    write(project / folder / "lib" / "a.py", NOW_IN_SYSTEM)
    write(project / folder / "prompts" / "p.md", "{{ now }}\n")
    write(project / "b.py", NOW_IN_SYSTEM)
    assert linted(capsys=capsys) == {"b.py"}


def test_a_parent_gitignore_applies_to_a_linted_sub_folder(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".git").mkdir()
    write(project / ".gitignore", "generated/\n")
    write(project / "src" / "generated" / "a.py", NOW_IN_SYSTEM)
    write(project / "src" / "b.py", NOW_IN_SYSTEM)
    assert linted("src", capsys=capsys) == {"src/b.py"}


def test_a_jinja_template_named_py_is_skipped_with_a_reason(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        project / "template.py", "from {{ package }} import app\n{% if debug %}x = 1{% endif %}\n"
    )
    write(project / "broken.py", "def f(:\n")
    assert main(["lint", "--no-cache", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert [item["filename"] for item in json.loads(captured.out)] == ["broken.py"]
    assert "skipped template.py: a Jinja template" in captured.err
    assert "skipped 1 (1 Jinja template)" in captured.err


def test_the_summary_counts_files_by_kind_and_skips_by_reason(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "pyproject.toml", "[tool.prefixkit.lint]\nmax-file-size = 2000\n")
    write(project / "a.py", GOOD)
    write(project / "b.py", GOOD)
    write(project / "huge.py", GOOD * 100)
    write(project / "prompts" / "support.md", "You are helpful.\n")
    (project / "nb.ipynb").write_bytes(NOTEBOOK.read_bytes())
    (project / "blob.py").write_bytes(b"\0\1\2")
    main(["lint", "--no-cache"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "prefixkit lint: Checked 4 files (2 Python, 1 notebook, 1 prompt file); "
        "skipped 2 (1 binary, 1 over 2 kB)"
    )
    main(["lint", "--no-cache", "--statistics", "--format", "json"])
    statistics = json.loads(capsys.readouterr().out)
    assert statistics["checked"] == {"total": 4, "python": 2, "notebook": 1, "prompt": 1}
    assert statistics["skipped"] == {"total": 2, "binary": 1, "over 2 kB": 1}
    assert statistics["findings"] == {"total": 1, "PFX001": 1}


def test_a_clean_run_still_says_what_it_checked(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "a.py", GOOD)
    assert main(["lint", "--no-cache"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "All checks passed!\n"
    assert captured.err == "prefixkit lint: Checked 1 file (1 Python)\n"


def test_test_code_is_skipped_and_counted_unless_included(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "app.py", NOW_IN_SYSTEM)
    for name in ("tests/helpers.py", "pkg/test_api.py", "pkg/api_test.py", "conftest.py"):
        write(project / name, NOW_IN_SYSTEM)
    assert linted(capsys=capsys) == {"app.py"}
    main(["lint", "--no-cache"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("skipped 4 (4 test code)")
    everything = {"app.py", "tests/helpers.py", "pkg/test_api.py", "pkg/api_test.py", "conftest.py"}
    assert linted("--include-tests", capsys=capsys) == everything
    write(project / "pyproject.toml", "[tool.prefixkit.lint]\ninclude-tests = true\n")
    assert linted(capsys=capsys) == everything


def test_named_test_files_and_test_folders_are_linted_unless_forced(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "tests" / "test_agent.py", NOW_IN_SYSTEM)
    assert linted("tests/test_agent.py", capsys=capsys) == {"tests/test_agent.py"}
    assert linted("tests", capsys=capsys) == {"tests/test_agent.py"}
    assert linted("--force-exclude", "tests/test_agent.py", capsys=capsys) == set()
    assert linted("--force-exclude", "--include-tests", "tests/test_agent.py", capsys=capsys) == {
        "tests/test_agent.py"
    }
