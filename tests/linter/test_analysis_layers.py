"""The analysis modules import only downward, in the order `prefixkit.linter.analysis`
states (`LAYERS`), and nothing of the linter above them."""

from __future__ import annotations

from prefixkit.linter.analysis import LAYERS

from tests.packaging.test_import_cycles import ROOT, imported_modules, module_files

PACKAGE = "prefixkit.linter.analysis"
# What the analyses may use of the linter outside their package: the tables of what is
# known of the SDKs and frameworks, and the record of the files a result depends on.
BELOW = frozenset({"prefixkit.linter.catalog", "prefixkit.linter.dependencies"})


def _layer_of() -> dict[str, int]:
    return {f"{PACKAGE}.{name}": level for level, names in enumerate(LAYERS) for name in names}


def _imports() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {
        module: imported_modules(path.read_text(encoding="utf-8"), module, False, known)
        for module, path in files.items()
        if module.startswith(f"{PACKAGE}.")
    }


def test_every_analysis_module_has_a_layer() -> None:
    assert set(_imports()) == set(_layer_of())


def test_an_analysis_module_imports_only_modules_of_lower_layers() -> None:
    layer_of = _layer_of()
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in _imports().items()
        for target in targets
        if target.startswith(f"{PACKAGE}.") and layer_of[target] >= layer_of[module]
    )
    assert upward == []


def test_the_analyses_use_nothing_of_the_linter_above_them() -> None:
    outside = sorted(
        f"{module} imports {target}"
        for module, targets in _imports().items()
        for target in targets
        if not target.startswith(f"{PACKAGE}.") and target not in BELOW
    )
    assert outside == []


def test_the_modules_below_the_analyses_import_none_of_them() -> None:
    files = module_files()
    known = set(files)
    for module in BELOW:
        text = files[module].read_text(encoding="utf-8")
        assert not any(t.startswith(PACKAGE) for t in imported_modules(text, module, False, known))


def test_the_package_docstring_draws_every_layer() -> None:
    doc = (ROOT / "linter" / "analysis" / "__init__.py").read_text(encoding="utf-8")
    drawn = [
        line.strip().split("   ")[0].split() for line in doc.splitlines() if line.startswith("    ")
    ]
    assert [sorted(names) for names in drawn if names][: len(LAYERS)] == [
        sorted(names) for names in reversed(LAYERS)
    ]
