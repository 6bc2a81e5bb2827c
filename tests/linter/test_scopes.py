"""The linter's scope resolution (`syntax.scopes`) gives what libcst's `MetadataWrapper`
resolves for `ScopeProvider`, on every fixture module of the rules: the same scope for
each node of the tree, binding the same names to the same nodes and reading them at the
same places."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, Scope, ScopeProvider
from prefixkit.linter.analysis.syntax import children, scopes

from tests.linter.fixture_modules import FIXTURE_MODULES, parsed


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    pending: list[cst.CSTNode] = [module]
    while pending:
        node = pending.pop()
        found.append(node)
        pending += reversed(children(node))
    return found


def _layout(nodes: list[cst.CSTNode], resolved: Mapping[cst.CSTNode, Scope | None]) -> list[object]:
    """Each node's scope, spelled by what tells scopes apart: its kind, where it is among
    the scopes met so far, its parent's place, and what it binds and reads (the nodes of
    the tree by their place; a node of a string annotation, parsed anew at each
    resolution, by its kind)."""
    place = {id(node): position for position, node in enumerate(nodes)}
    numbered: dict[int, int] = {}

    def where(node: object) -> object:
        return place.get(id(node), type(node).__name__)

    def spelled(scope: Scope | None) -> object:
        if scope is None:
            return None
        if id(scope) not in numbered:
            numbered[id(scope)] = len(numbered)
            parent = scope.parent
            return (
                type(scope).__name__,
                numbered[id(scope)],
                numbered.get(id(parent)) if parent is not scope else "self",
                sorted(
                    (a.name, str(where(getattr(a, "node", None))))
                    for name in scope._assignments
                    for a in scope[name]
                ),
                sorted(
                    (
                        access.node.value if isinstance(access.node, cst.Name) else "",
                        str(where(access.node)),
                    )
                    for access in scope.accesses
                ),
            )
        return numbered[id(scope)]

    return [spelled(resolved.get(node)) for node in nodes]


def test_there_are_fixtures() -> None:
    assert len(FIXTURE_MODULES) > 100


@pytest.mark.parametrize("path", FIXTURE_MODULES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_scopes_are_the_wrappers(path: Path) -> None:
    module = parsed(path)
    assert module is not None
    nodes = _nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    assert _layout(nodes, scopes(module)) == _layout(nodes, expected)
