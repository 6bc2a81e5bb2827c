"""One import direction: no module of prefixkit imports, directly or through others, a module
that imports it back. Every import counts: at the top, inside functions, and under
`if TYPE_CHECKING:` (a cycle hidden in a function is still two modules that need each other)."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
PARTS = {
    "prefixkit.sdk": "sdk",
    "prefixkit.linter": "linter",
    "prefixkit.engine_adapter": "engine_adapter",
    "prefixkit.cli": "cli",
    "prefixkit.testing": "testing",
}

Graph = dict[str, set[str]]


def module_files() -> dict[str, Path]:
    """Every module of prefixkit by its dotted name (a package by its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for package, folder in PARTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def imported_modules(text: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `module` imports anywhere in `text`, relative imports
    resolved. `from X import a` imports the module `X.a` when there is one, else (a name
    defined in `X`) the module `X`. Importing a submodule is not counted as importing its
    package's `__init__`: Python runs it first, but a package's `__init__` is the part's
    door, which its own modules do not use."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in known else source)
    return (found & known) - {module}


def import_graph(sources: dict[str, tuple[str, bool]]) -> Graph:
    """module -> the modules it imports; `sources` maps each module to its text and whether
    it is a package."""
    known = set(sources)
    return {
        module: imported_modules(text, module, is_package, known)
        for module, (text, is_package) in sources.items()
    }


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_of_prefixkit_imports_one_that_imports_it_back() -> None:
    files = module_files()
    sources = {
        module: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for module, path in files.items()
    }
    found = cycles(import_graph(sources))
    assert found == [], "import cycles (move the shared piece to a module both import):\n" + (
        "\n".join(" <-> ".join(component) for component in found)
    )


def unit_of(module: str) -> str:
    """The part's piece a module belongs to: its subpackage (`prefixkit.engine_adapter.ray`
    for `...ray.gateway`), or the module itself at the top of a part."""
    for package in PARTS:
        if module.startswith(package + "."):
            return ".".join(module.split(".")[:3])
    return module


def collapse(graph: Graph) -> Graph:
    """The import graph between the pieces of each part (`unit_of`)."""
    collapsed: Graph = {}
    for module, targets in graph.items():
        unit = unit_of(module)
        collapsed.setdefault(unit, set()).update(
            unit_of(target) for target in targets if unit_of(target) != unit
        )
    return collapsed


def test_no_subpackage_of_a_part_imports_one_that_imports_it_back() -> None:
    """`serving` may use `routing`, or `routing` `serving`, not both: a shared piece moves
    to the one they both import."""
    files = module_files()
    sources = {
        module: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for module, path in files.items()
    }
    found = cycles(collapse(import_graph(sources)))
    assert found == [], "cycles between subpackages:\n" + (
        "\n".join(" <-> ".join(component) for component in found)
    )


# part -> the other parts it may import
LAYERS = {
    "prefixkit.sdk": set(),
    "prefixkit.linter": {"prefixkit.sdk"},
    "prefixkit.engine_adapter": {"prefixkit.sdk"},
    "prefixkit.testing": {"prefixkit.sdk", "prefixkit.engine_adapter"},
    "prefixkit.cli": {"prefixkit.sdk", "prefixkit.linter", "prefixkit.engine_adapter"},
}


def test_each_part_imports_only_the_parts_below_it() -> None:
    """The SDK imports no other part; the linter and the engine adapter import the SDK."""
    files = module_files()
    sources = {
        module: (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for module, path in files.items()
    }
    part_of = {module: ".".join(module.split(".")[:2]) for module in sources}
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph(sources).items()
        for target in targets
        if part_of[target] != part_of[module] and part_of[target] not in LAYERS[part_of[module]]
    )
    assert crossing == []


def _source(*lines: str) -> tuple[str, bool]:
    return "\n".join(lines) + "\n", False


def test_an_import_inside_a_function_closes_a_cycle() -> None:
    sources = {
        "p.a": _source("from p.b import x"),
        "p.b": _source("def f():", "    from p.a import y", "x = 1"),
    }
    assert cycles(import_graph(sources)) == [["p.a", "p.b"]]


def test_an_import_under_type_checking_closes_a_cycle() -> None:
    sources = {
        "p.a": _source("from .b import x"),
        "p.b": _source(
            "from typing import TYPE_CHECKING", "if TYPE_CHECKING:", "    from .a import Y"
        ),
    }
    assert cycles(import_graph(sources)) == [["p.a", "p.b"]]


def test_a_submodule_imported_from_its_package_is_an_edge_to_the_submodule_only() -> None:
    sources = {
        "p": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n", True),
        "p.a": _source("from p import b"),
        "p.b": _source("B = 1"),
    }
    assert import_graph(sources)["p.a"] == {"p.b"}
    assert cycles(import_graph(sources)) == []


def test_a_name_imported_from_a_package_door_is_an_edge_to_the_door() -> None:
    sources = {
        "p": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n", True),
        "p.a": _source("from p import B", "A = 1"),
        "p.b": _source("B = 1"),
    }
    assert cycles(import_graph(sources)) == [["p", "p.a"]]


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12))
def test_a_graph_has_a_cycle_exactly_when_some_edge_comes_back(
    edges: list[tuple[int, int]],
) -> None:
    graph: Graph = {f"m{n}": set() for n in range(6)}
    for source, target in edges:
        if source != target:
            graph[f"m{source}"].add(f"m{target}")

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            for target in graph[node]:
                if target == goal:
                    return True
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return False

    cyclic = any(reaches(node, node) for node in graph)
    assert bool(cycles(graph)) == cyclic
