"""One door per part: each part's public names are declared once (`_EXPORTS`), and its
`__all__`, the imports type checkers read, what the package gives at run time and the API
reference pages all name the same things. Renamed names keep a warning alias that
CHANGELOG.md lists."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import warnings
from pathlib import Path

import pytest
from prefixkit.sdk import PrefixkitDeprecationWarning
from prefixkit.sdk.deprecation import RENAMED

ROOT = Path(__file__).resolve().parents[2]
DOORS = {
    "prefixkit.sdk": ROOT / "sdk" / "__init__.py",
    "prefixkit.linter": ROOT / "linter" / "__init__.py",
    "prefixkit.engine_adapter": ROOT / "engine_adapter" / "__init__.py",
}


def exports(package: str) -> dict[str, str]:
    exported: dict[str, str] = vars(importlib.import_module(package))["_EXPORTS"]
    return exported


def type_checking_imports(door: Path) -> dict[str, str]:
    """name -> module of every `from .module import Name as Name` under `if TYPE_CHECKING:`."""
    found: dict[str, str] = {}
    for node in ast.parse(door.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in ast.walk(node):
                if isinstance(statement, ast.ImportFrom):
                    module = "." * statement.level + (statement.module or "")
                    for alias in statement.names:
                        assert alias.asname == alias.name, (
                            f"{door}: write `{alias.name} as {alias.name}` to re-export it"
                        )
                        found[alias.name] = module.removeprefix(".")
    return found


def documented(package: str) -> list[str]:
    """The names of `package` the API reference documents (`::: package.Name`), with repeats;
    a page documenting an internal module (`::: package.module`) is not counted."""
    pattern = re.compile(rf"^::: {re.escape(package)}\.(\w+)\s*$", re.MULTILINE)
    modules = {
        info.name for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
    }
    return [
        name
        for page in sorted((ROOT / "docs" / "api").glob("*.md"))
        for name in pattern.findall(page.read_text())
        if name not in modules
    ]


@pytest.mark.parametrize("package", DOORS)
def test_all_is_the_export_map(package: str) -> None:
    module = importlib.import_module(package)
    assert list(module.__all__) == list(exports(package))


@pytest.mark.parametrize("package", DOORS)
def test_type_checkers_see_every_export_from_its_module(package: str) -> None:
    assert type_checking_imports(DOORS[package]) == exports(package)


@pytest.mark.parametrize("package", DOORS)
def test_no_module_of_a_part_is_named_like_one_of_its_exports(package: str) -> None:
    """Importing such a module would bind it on the package over the exported name."""
    root = importlib.import_module(package)
    modules = {info.name.rpartition(".")[2] for info in pkgutil.walk_packages(root.__path__)}
    assert modules & set(exports(package)) == set()


@pytest.mark.parametrize("package", DOORS)
def test_every_export_resolves_without_a_warning(package: str) -> None:
    module = importlib.import_module(package)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in module.__all__:
            assert getattr(module, name) is not None, name


@pytest.mark.parametrize("package", DOORS)
def test_the_api_reference_documents_every_export_once(package: str) -> None:
    pages = documented(package)
    assert sorted(pages) == sorted(exports(package)), (
        "each exported name has exactly one `::: package.Name` in docs/api/"
    )


def _import_every_module() -> None:
    for package in DOORS:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            try:
                importlib.import_module(info.name)
            except ModuleNotFoundError as error:
                # the modules that run inside the Ray cluster import Ray and vLLM, which
                # live in the Ray engine's own virtualenv
                if (error.name or "").partition(".")[0] not in {"ray", "vllm"}:
                    raise


def changelog_renames() -> set[tuple[str, str]]:
    text = (ROOT / "CHANGELOG.md").read_text()
    return set(re.findall(r"^- `(prefixkit\.[\w.]+)` → `(prefixkit\.[\w.]+)`", text, re.M))


def test_changelog_lists_exactly_the_renamed_names() -> None:
    _import_every_module()
    aliases = {(entry.old_path, entry.new_path) for entry in RENAMED.values()}
    assert aliases == changelog_renames()


def test_a_renamed_name_warns_and_gives_the_new_object() -> None:
    _import_every_module()
    assert RENAMED, "no renamed names: drop this test with the last alias"
    for entry in RENAMED.values():
        old_module = importlib.import_module(entry.module)
        new = getattr(importlib.import_module(entry.new_module), entry.new)
        with pytest.warns(PrefixkitDeprecationWarning, match=re.escape(entry.new_path)):
            assert getattr(old_module, entry.old) is new
