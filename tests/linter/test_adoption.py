"""`prefixkit lint --diff REF` and `--baseline` on real git repositories (the real CLI)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from prefixkit.cli.main import main

from tests.linter.conftest import DAY_AND_SET_IN_SYSTEM, NOW_IN_SYSTEM, write

# NOW_IN_SYSTEM's finding is on row 2; DAY_AND_SET_IN_SYSTEM's two are on row 3.


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def repo(project: Path) -> Path:
    """The project as a git repository with one commit holding a PFX001 in old.py."""
    git(project, "init", "-q")
    write(project / "old.py", NOW_IN_SYSTEM)
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    return project


def codes_at(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["lint", "--no-cache", "--format", "json", *argv])
    items = json.loads(capsys.readouterr().out)
    return code, [f"{item['filename']}:{item['location']['row']}:{item['code']}" for item in items]


def test_diff_hides_findings_on_unchanged_lines(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert codes_at(capsys, "--diff", "HEAD") == (0, [])


def test_diff_reports_a_finding_on_a_modified_line_only(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / "new.py", DAY_AND_SET_IN_SYSTEM)
    git(repo, "add", "new.py")
    git(repo, "commit", "-q", "-m", "new")
    text = DAY_AND_SET_IN_SYSTEM.replace("Today {", "Date {")  # row 3 changes
    write(repo / "new.py", "# top\n" + text)  # and every row shifts down by one
    assert codes_at(capsys, "--diff", "HEAD") == (1, ["new.py:4:PFX001", "new.py:4:PFX004"])


def test_diff_counts_staged_and_committed_changes_since_the_ref(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = git(repo, "rev-parse", "HEAD").strip()
    write(repo / "a.py", NOW_IN_SYSTEM)
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "a")
    write(repo / "b.py", NOW_IN_SYSTEM)
    git(repo, "add", "b.py")
    assert codes_at(capsys, "--diff", start) == (1, ["a.py:2:PFX001", "b.py:2:PFX001"])


def test_diff_treats_an_untracked_file_as_wholly_changed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / "fresh.py", NOW_IN_SYSTEM)
    assert codes_at(capsys, "--diff", "HEAD") == (1, ["fresh.py:2:PFX001"])


def test_diff_treats_a_changed_notebook_as_wholly_changed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def notebook(*cells: str) -> str:
        return json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "metadata": {}, "source": cell, "outputs": []}
                    for cell in cells
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )

    write(repo / "nb.ipynb", notebook(NOW_IN_SYSTEM))
    git(repo, "add", "nb.ipynb")
    git(repo, "commit", "-q", "-m", "nb")
    assert codes_at(capsys, "--diff", "HEAD") == (0, [])
    write(repo / "nb.ipynb", notebook(NOW_IN_SYSTEM, "print('unrelated')"))
    assert codes_at(capsys, "--diff", "HEAD") == (1, ["nb.ipynb:2:PFX001"])


def test_diff_names_the_ref_when_it_is_unknown(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "--diff", "no-such-branch"]) == 2
    err = capsys.readouterr().err
    assert "unknown git ref 'no-such-branch'" in err
    assert "git fetch" in err


def test_diff_outside_a_git_repository_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "old.py", NOW_IN_SYSTEM)
    assert main(["lint", "--diff", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert "is not inside a git repository" in err
    assert "git init" in err


def test_diff_summary_counts_what_it_did_not_show(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["lint", "--no-cache", "--diff", "HEAD"])
    assert "1 finding(s) on lines unchanged since HEAD not shown" in capsys.readouterr().err


def test_a_written_baseline_hides_every_current_finding(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "app.py", DAY_AND_SET_IN_SYSTEM)
    assert main(["lint", "--no-cache", "--write-baseline", "baseline.json"]) == 0
    capsys.readouterr()
    assert codes_at(capsys, "--baseline", "baseline.json") == (0, [])


def test_the_baseline_file_is_sorted_json_keyed_without_rows(project: Path) -> None:
    write(project / "app.py", DAY_AND_SET_IN_SYSTEM)
    write(project / "copy.py", NOW_IN_SYSTEM + NOW_IN_SYSTEM.splitlines(keepends=True)[1])
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    data = json.loads((project / "baseline.json").read_text(encoding="utf-8"))
    entries = data["findings"]
    assert [(e["path"], e["code"], e["count"]) for e in entries] == [
        ("app.py", "PFX001", 1),
        ("app.py", "PFX004", 1),
        ("copy.py", "PFX001", 2),  # the same line twice: one entry, counted
    ]
    assert all(set(e) == {"path", "code", "fingerprint", "count"} for e in entries)
    first = (project / "baseline.json").read_text(encoding="utf-8")
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    assert (project / "baseline.json").read_text(encoding="utf-8") == first


def test_shifted_lines_stay_hidden_and_a_new_finding_is_reported(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "app.py", DAY_AND_SET_IN_SYSTEM)
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    capsys.readouterr()
    write(project / "app.py", "# a comment\n\n" + DAY_AND_SET_IN_SYSTEM)
    assert codes_at(capsys, "--baseline", "baseline.json") == (0, [])
    write(project / "app.py", DAY_AND_SET_IN_SYSTEM.replace("Today {", "Now {"))
    code, found = codes_at(capsys, "--baseline", "baseline.json")
    assert (code, found) == (1, ["app.py:3:PFX001", "app.py:3:PFX004"])


def test_a_second_copy_of_a_baselined_line_is_reported(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "app.py", NOW_IN_SYSTEM)
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    capsys.readouterr()
    write(project / "app.py", NOW_IN_SYSTEM + NOW_IN_SYSTEM.splitlines(keepends=True)[1])
    assert codes_at(capsys, "--baseline", "baseline.json") == (1, ["app.py:5:PFX001"])


def test_the_summary_says_how_many_the_baseline_hid(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "app.py", DAY_AND_SET_IN_SYSTEM)
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    capsys.readouterr()
    assert main(["lint", "--no-cache", "--baseline", "baseline.json"]) == 0
    assert "2 finding(s) hidden by the baseline baseline.json" in capsys.readouterr().err


def test_a_baseline_from_another_folder_matches_the_same_files(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "src" / "app.py", NOW_IN_SYSTEM)
    main(["lint", "--no-cache", "--write-baseline", "baseline.json"])
    monkeypatch.chdir(project / "src")
    capsys.readouterr()
    assert codes_at(capsys, "--baseline", "../baseline.json") == (0, [])


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "cannot read it"), ("not json", "not JSON"), ('{"version": 7}', "not a prefixkit")],
)
def test_an_unreadable_baseline_exits_two_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str], content: str | None, says: str
) -> None:
    write(project / "app.py", NOW_IN_SYSTEM)
    if content is not None:
        write(project / "old-baseline.json", content)
    assert main(["lint", "--baseline", "old-baseline.json"]) == 2
    err = capsys.readouterr().err
    assert "--baseline old-baseline.json" in err
    assert says in err
    assert "--write-baseline old-baseline.json" in err


def test_writing_a_baseline_with_a_filter_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "--write-baseline", "b.json", "--diff", "HEAD"]) == 2
    assert "drop --baseline and --diff" in capsys.readouterr().err
    assert not (project / "b.json").exists()
