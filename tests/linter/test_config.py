"""Which settings apply to a linted path: the nearest config above it, relative to its folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.linter import LintConfig, LintConfigError, lint_paths, load_config
from prefixkit.linter.config import ConfigResolver
from prefixkit.linter.rules import ALL_RULES

from tests.linter.conftest import NOW_IN_SYSTEM, write

KNOWN = frozenset(rule.code for rule in ALL_RULES)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder: outside the project that gets linted."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    write(cwd / "pyproject.toml", "[tool.prefixkit.lint]\nselect = ['PFX101']\n")
    monkeypatch.chdir(cwd)
    return cwd


def test_config_is_found_from_the_linted_path_not_the_current_folder(
    tmp_path: Path, elsewhere: Path
) -> None:
    write(tmp_path / "project" / "app" / "bad.py", NOW_IN_SYSTEM)
    assert main(["lint", "--no-cache", str(tmp_path / "project")]) == 1
    # the project's own config, not the current folder's, decides
    write(tmp_path / "project" / "pyproject.toml", "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    assert main(["lint", "--no-cache", str(tmp_path / "project")]) == 0


def test_paths_in_the_config_are_relative_to_its_folder(tmp_path: Path, elsewhere: Path) -> None:
    write(tmp_path / "project" / "app" / "bad.py", NOW_IN_SYSTEM)
    write(
        tmp_path / "project" / "pyproject.toml",
        "[tool.prefixkit.lint]\nper-file-ignores = {'app/*.py' = ['PFX001']}\n",
    )
    assert main(["lint", "--no-cache", str(tmp_path / "project" / "app" / "bad.py")]) == 0


def test_a_sub_project_uses_its_own_config(tmp_path: Path, elsewhere: Path) -> None:
    write(tmp_path / "mono" / "pyproject.toml", "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    write(tmp_path / "mono" / "root.py", NOW_IN_SYSTEM)
    write(tmp_path / "mono" / "strict" / "prefixkit.toml", "[lint]\nselect = ['PFX']\n")
    write(tmp_path / "mono" / "strict" / "bad.py", NOW_IN_SYSTEM)
    resolver = ConfigResolver(KNOWN)
    assert resolver.for_path(tmp_path / "mono" / "root.py").ignore == ("PFX001",)
    strict = resolver.for_path(tmp_path / "mono" / "strict" / "bad.py")
    assert strict.ignore == () and strict.root == tmp_path / "mono" / "strict"
    assert main(["lint", "--no-cache", str(tmp_path / "mono")]) == 1


def test_a_pyproject_without_the_table_is_passed_over(tmp_path: Path, elsewhere: Path) -> None:
    write(tmp_path / "mono" / "pyproject.toml", "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    write(tmp_path / "mono" / "pkg" / "pyproject.toml", "[project]\nname = 'pkg'\n")
    config = ConfigResolver(KNOWN).for_path(
        write(tmp_path / "mono" / "pkg" / "a.py", NOW_IN_SYSTEM)
    )
    assert config.ignore == ("PFX001",) and config.root == tmp_path / "mono"


def test_without_any_config_the_project_root_is_the_nearest_pyproject(tmp_path: Path) -> None:
    write(tmp_path / "project" / "pyproject.toml", "[project]\nname = 'p'\n")
    config = ConfigResolver(KNOWN).for_path(
        write(tmp_path / "project" / "src" / "a.py", NOW_IN_SYSTEM)
    )
    assert config == LintConfig(root=tmp_path / "project")


def test_prefixkit_toml_errors_name_its_lint_table(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "project" / "prefixkit.toml", "[lint]\ncolour = 'red'\n")
    write(tmp_path / "project" / "a.py", NOW_IN_SYSTEM)
    assert main(["lint", str(tmp_path / "project")]) == 2
    assert "prefixkit.toml [lint]: unknown key `colour`" in capsys.readouterr().err


def test_config_option_applies_to_every_path(tmp_path: Path, elsewhere: Path) -> None:
    write(tmp_path / "project" / "pyproject.toml", "[tool.prefixkit.lint]\nignore = ['PFX001']\n")
    write(tmp_path / "project" / "a.py", NOW_IN_SYSTEM)
    other = write(tmp_path / "strict.toml", "[tool.prefixkit.lint]\nselect = ['PFX001']\n")
    assert main(["lint", "--no-cache", "--config", str(other), str(tmp_path / "project")]) == 1


def test_fingerprint_is_the_same_in_every_process() -> None:
    # frozensets print in a hash-seed order; the fingerprint must not follow it
    one = LintConfig(root=Path("/p"), extra_cached_keywords=frozenset({"a", "b", "c", "d"}))
    two = LintConfig(root=Path("/p"), extra_cached_keywords=frozenset({"d", "c", "b", "a"}))
    assert one.fingerprint() == two.fingerprint()
    assert one.fingerprint() != LintConfig(root=Path("/p")).fingerprint()


def test_include_tests_must_be_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "prefixkit.toml").write_text('[lint]\ninclude-tests = "yes"\n', encoding="utf-8")
    with pytest.raises(LintConfigError, match="`include-tests` must be true or false"):
        load_config(tmp_path / "prefixkit.toml", frozenset({"PFX001"}))


def test_a_config_error_names_the_file_the_key_and_the_bad_value(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[tool.prefixkit.lint]\nmax-file-size = -1\n")
    with pytest.raises(LintConfigError) as caught:
        load_config(config)
    assert (caught.value.path, caught.value.key, caught.value.value) == (
        config,
        "max-file-size",
        -1,
    )


def test_a_code_that_matches_no_rule_is_the_value_of_the_config_error(tmp_path: Path) -> None:
    config = write(tmp_path / "prefixkit.toml", "[lint]\nignore = ['PFX001', 'PFX9']\n")
    with pytest.raises(LintConfigError) as caught:
        load_config(config)
    assert (caught.value.key, caught.value.value) == ("ignore", "PFX9")


def test_a_config_file_that_is_not_toml_is_named_without_a_key(tmp_path: Path) -> None:
    config = write(tmp_path / "prefixkit.toml", "[lint\n")
    with pytest.raises(LintConfigError) as caught:
        load_config(config)
    assert (caught.value.path, caught.value.key, caught.value.value) == (config, None, None)


def test_lint_paths_without_a_config_lints_each_file_with_the_settings_above_it(
    tmp_path: Path,
) -> None:
    write(tmp_path / "mono" / "pyproject.toml", "[tool.prefixkit.lint]\nselect = ['PFX001']\n")
    strict = write(tmp_path / "mono" / "a.py", NOW_IN_SYSTEM)
    write(tmp_path / "mono" / "lax" / "prefixkit.toml", "[lint]\nignore = ['PFX001']\n")
    lax = write(tmp_path / "mono" / "lax" / "b.py", NOW_IN_SYSTEM)
    outcomes = lint_paths([strict, lax])
    assert [[f.code for f in outcome.findings] for outcome in outcomes] == [["PFX001"], []]
