"""The linter's read-only traversal (`syntax.walk`) makes the same callbacks, in the same
order, as libcst's own `node.visit(visitor)`, on every fixture module of the rules."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from prefixkit.linter.analysis.syntax import children, walk

from tests.linter.fixture_modules import FIXTURE_MODULES, parsed


class _Trace(cst.CSTVisitor):
    """Every callback, and a subtree skipped wherever libcst lets a visitor skip one."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


def _module(path: Path) -> cst.Module:
    module = parsed(path)
    assert module is not None
    return module


def test_there_are_fixtures() -> None:
    assert len(FIXTURE_MODULES) > 100


@pytest.mark.parametrize("path", FIXTURE_MODULES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_walk_makes_the_callbacks_visit_makes(path: Path) -> None:
    module = _module(path)
    expected, walked = _Trace(), _Trace()
    module.visit(expected)
    walk(module, walked)
    assert walked.events == expected.events


@pytest.mark.parametrize(
    "path", FIXTURE_MODULES[:40], ids=lambda p: str(p.relative_to(p.parents[1]))
)
def test_children_are_the_nodes_children(path: Path) -> None:
    pending: list[cst.CSTNode] = [_module(path)]
    while pending:
        node = pending.pop()
        assert [id(child) for child in children(node)] == [id(child) for child in node.children]
        pending += node.children
