"""The re-lint cache: same findings as a fresh run, invalidated by every input it depends on."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.linter import FileOutcome, LintConfig, lint_paths
from prefixkit.linter.dependencies import record_dependency, recording
from prefixkit.linter.discovery import Target
from prefixkit.linter.result_cache import ResultCache

BAD = (
    "import time\n"
    "ENABLED = {'search', 'refund'}\n"
    "TOOLS = [{'name': name} for name in ENABLED]\n"
    "def ask(client, q):\n"
    "    return client.messages.create(system=f'at {time.time()}', tools=TOOLS, messages=[q])\n"
)
GOOD = "SYSTEM = 'You are helpful.'\n"
NOTEBOOK = Path(__file__).parent / "notebooks" / "support_prompts.ipynb"


@pytest.fixture
def project(project: Path) -> Path:
    """The project, holding bad.py, good.py and nb.ipynb."""
    (project / "bad.py").write_text(BAD, encoding="utf-8")
    (project / "good.py").write_text(GOOD, encoding="utf-8")
    (project / "nb.ipynb").write_bytes(NOTEBOOK.read_bytes())
    return project


def run(project: Path, config: LintConfig | None = None) -> list[FileOutcome]:
    config = config or LintConfig(root=project)
    files = sorted(project.glob("*.py")) + sorted(project.glob("*.ipynb"))
    return lint_paths(files, config, cache=ResultCache.for_config)


def test_cached_findings_equal_fresh_findings(project: Path) -> None:
    fresh = lint_paths(
        [*sorted(project.glob("*.py")), project / "nb.ipynb"], LintConfig(root=project)
    )
    first = run(project)
    second = run(project)
    assert not any(outcome.cached for outcome in first)
    assert all(outcome.cached for outcome in second)
    assert (
        [o.findings for o in second] == [o.findings for o in first] == [o.findings for o in fresh]
    )
    assert [o.lines for o in second] == [o.lines for o in fresh]
    assert any(f.fix is not None for o in second for f in o.findings)
    assert any(f.cell == 3 for o in second for f in o.findings)


def test_a_changed_file_is_linted_again(project: Path) -> None:
    run(project)
    (project / "good.py").write_text(BAD, encoding="utf-8")
    outcomes = {o.path.name: o for o in run(project)}
    assert not outcomes["good.py"].cached and outcomes["good.py"].findings
    assert outcomes["bad.py"].cached


def test_other_settings_do_not_use_the_cached_results(project: Path) -> None:
    run(project)
    ignoring = LintConfig(root=project, ignore=("PFX001",))
    outcomes = run(project, ignoring)
    assert not any(o.cached for o in outcomes)
    assert all(f.code != "PFX001" for o in outcomes for f in o.findings)


def test_another_prefixkit_version_does_not_use_the_cached_results(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(project)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "99.0.0")
    assert not any(o.cached for o in run(project))


def test_a_recorded_dependency_that_changes_invalidates_the_result(project: Path) -> None:
    constants = project / "constants.py"
    constants.write_text("SYSTEM = 'v1'\n", encoding="utf-8")
    config = LintConfig(root=project)
    target = Target(project / "good.py", config, "python")
    with recording() as used:
        record_dependency(constants)
        record_dependency(project / "not_yet.py")
    cache = ResultCache.for_config(config)
    cache.store(target, FileOutcome(target.path, digest=_digest(target.path), dependencies=used))
    cache.save()
    assert ResultCache.for_config(config).lookup(target) is not None
    constants.write_text("SYSTEM = 'v2'\n", encoding="utf-8")
    assert ResultCache.for_config(config).lookup(target) is None
    constants.write_text("SYSTEM = 'v1'\n", encoding="utf-8")
    (project / "not_yet.py").write_text("", encoding="utf-8")  # a file that appeared
    assert ResultCache.for_config(config).lookup(target) is None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_prompt_file_is_linted_again_when_the_lock_changes(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixkit.sdk.registry import write_lock

    prompts = project / "prompts"
    prompts.mkdir()
    (prompts / "support@v1.md").write_text("You are a support agent.\n", encoding="utf-8")
    write_lock(prompts)
    (prompts / "support@v1.md").write_text("You are a sales agent.\n", encoding="utf-8")
    assert main(["lint", "prompts"]) == 1  # drifted from the lock
    write_lock(prompts)  # the prompt file is unchanged; the lock now matches it
    assert main(["lint", "prompts"]) == 0
    assert capsys.readouterr().err.endswith("Checked 1 file (1 prompt file)\n")  # not cached


def test_the_cache_is_at_the_project_root_and_ignores_itself(project: Path) -> None:
    (project / "app").mkdir()
    (project / "app" / "main.py").write_text(GOOD, encoding="utf-8")
    assert main(["lint", "app"]) == 0
    cache = project / ".prefixkit_cache"
    assert (cache / ".gitignore").read_text(encoding="utf-8") == "*\n"
    assert (cache / "CACHEDIR.TAG").read_text(encoding="utf-8").startswith("Signature: ")
    assert list(cache.glob("*/*.json"))


def test_no_cache_neither_reads_nor_writes_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "--no-cache"]) == 1
    assert not (project / ".prefixkit_cache").exists()
    main(["lint"])
    capsys.readouterr()
    main(["lint", "--no-cache"])
    assert "cached" not in capsys.readouterr().err


def test_a_corrupt_cache_counts_as_empty(project: Path) -> None:
    run(project)
    for stored in (project / ".prefixkit_cache").glob("*/*.json"):
        stored.write_text("{not json", encoding="utf-8")
    outcomes = run(project)
    assert not any(o.cached for o in outcomes)
    assert all(o.cached for o in run(project))


def test_concurrent_runs_with_jobs_leave_a_valid_cache(project: Path) -> None:
    for n in range(6):
        (project / f"bad{n}.py").write_text(BAD.replace("refund", f"refund{n}"), encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "prefixkit.cli.main",
        "lint",
        "--jobs",
        "2",
        "--format",
        "json",
    ]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate()[0] for process in runs]
    assert outputs[0] == outputs[1]
    (stored,) = (project / ".prefixkit_cache").glob("*/*.json")
    assert len(json.loads(stored.read_text(encoding="utf-8"))["files"]) == 9
    again = subprocess.run(command, capture_output=True, text=True)
    assert again.stdout == outputs[0]
    assert "9 unchanged since the last run (cached)" in again.stderr


def test_entries_of_deleted_files_are_dropped(project: Path) -> None:
    run(project)
    (project / "bad.py").unlink()
    (project / "good.py").write_text(GOOD + "\n", encoding="utf-8")
    run(project)
    (stored,) = (project / ".prefixkit_cache").glob("*/*.json")
    assert sorted(json.loads(stored.read_text(encoding="utf-8"))["files"]) == [
        "good.py",
        "nb.ipynb",
    ]


def test_an_unchanged_relint_command_imports_neither_the_rules_nor_the_sdk(project: Path) -> None:
    assert main(["lint", "--exit-zero", "--format", "json", str(project)]) == 0
    probe = (
        "import sys\n"
        "from prefixkit.cli.main import main\n"
        f"main(['lint', '--exit-zero', '--format', 'json', {str(project)!r}])\n"
        "heavy = ('libcst', 'prefixkit.linter.rules', 'prefixkit.linter.lint_file',"
        " 'prefixkit.sdk.clients', 'prefixkit.sdk.prompt')\n"
        "print(sorted(name for name in heavy if name in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "3 unchanged since the last run (cached)" in done.stderr
    assert done.stderr.splitlines()[-1] == "[]"
