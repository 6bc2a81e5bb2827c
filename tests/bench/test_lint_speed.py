"""bench/lint_speed.py's real-repository run: which tree is timed, and the rates it prints."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.bench.conftest import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("lint_speed")


def test_an_extracted_package_is_imported_from_its_parent(
    bench: ModuleType, tmp_path: Path
) -> None:
    tree = tmp_path / "frozen" / "prefixkit"
    (tree / "linter").mkdir(parents=True)
    (tree / "linter" / "__init__.py").write_text("", encoding="utf-8")
    assert bench.package_path(tree, tmp_path / "scratch") == str(tree.parent)


def test_a_checkout_is_imported_as_prefixkit_through_a_link(
    bench: ModuleType, tmp_path: Path
) -> None:
    checkout = tmp_path / "main"
    (checkout / "linter").mkdir(parents=True)
    (checkout / "linter" / "__init__.py").write_text("", encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert bench.package_path(checkout, scratch) == str(scratch)
    assert (scratch / "prefixkit" / "linter" / "__init__.py").is_file()


def test_a_folder_without_the_linter_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holding linter/"):
        bench.package_path(tmp_path, tmp_path)


def test_rates_are_lines_per_cpu_second_per_repository_and_overall(bench: ModuleType) -> None:
    runs = [
        bench.RepoTimes("quill", 1_000, {"this": 2.0, "base": 4.0}),
        bench.RepoTimes("heron", 3_000, {"this": 2.0, "base": 2.0}),
    ]
    assert bench.repo_rates(runs, ["this", "base"]) == [
        ("quill", 1_000, [500.0, 250.0]),
        ("heron", 3_000, [1_500.0, 1_500.0]),
        ("**all**", 4_000, [1_000.0, 4_000 / 6]),
    ]
