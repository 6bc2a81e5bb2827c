"""The calls of one module and the local functions they run, for following a parameter back.

A rule that meets a function's parameter (data the function receives) asks
`CallSites.callers(function)` which calls in the same module run that
function, from which enclosing function, and whether as a method; with
`ModuleBindings.arguments` it then reads what each call passes for the
parameter. One traversal of the module, done on first use.
"""

from __future__ import annotations

import functools

import libcst as cst

from .bindings import ModuleBindings
from .syntax import FunctionNode

__all__ = ["CallSite", "CallSites"]

CallSite = tuple[cst.Call, FunctionNode | None, bool]


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.functions: list[FunctionNode] = []
        self.calls: list[tuple[cst.Call, FunctionNode | None]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.functions.append(node)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self.functions[-1] if self.functions else None))


class CallSites:
    """Calls of `module` by the local function they run (see the module docstring)."""

    def __init__(self, module: cst.Module, analysis: ModuleBindings) -> None:
        self.module = module
        self.analysis = analysis

    @functools.cached_property
    def _calls(self) -> list[tuple[cst.Call, FunctionNode | None]]:
        visitor = _Calls()
        self.module.visit(visitor)
        return visitor.calls

    @functools.cached_property
    def _enclosing(self) -> dict[int, FunctionNode | None]:
        return {id(call): function for call, function in self._calls}

    @functools.cached_property
    def _callers(self) -> dict[int, list[CallSite]]:
        callers: dict[int, list[CallSite]] = {}
        for call, enclosing in self._calls:
            for function, method in self.analysis.functions_called(call):
                callers.setdefault(id(function), []).append((call, enclosing, method))
        return callers

    def calls(self) -> list[cst.Call]:
        """Every call of the module, in source order."""
        return [call for call, _enclosing in self._calls]

    def enclosing(self, call: cst.Call) -> FunctionNode | None:
        """The function whose body holds `call` (None at module level)."""
        return self._enclosing.get(id(call))

    def callers(self, function: FunctionNode) -> list[CallSite]:
        """Calls in the module that run `function`: (call, enclosing function, as a method)."""
        return self._callers.get(id(function), [])

    def parameter(self, name: cst.Name) -> cst.Param | None:
        """The parameter (not `self`/`cls`) that `name` refers to, if it is one."""
        for assignment in self.analysis.assignments(name):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param) and target.name.value not in ("self", "cls"):
                return target
        return None
