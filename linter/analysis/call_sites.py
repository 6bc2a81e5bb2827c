"""The calls of one module and the local functions they run, for following a parameter back.

A rule that meets a function's parameter (data the function receives) asks
`CallSites.callers(function)` which calls in the same module run that
function, from which enclosing function, and whether as a method; with
`ModuleBindings.arguments` it then reads what each call passes for the
parameter. The calls are the ones the module index records (`ModuleIndex.calls`, its
one traversal), so `module` must be the one `analysis.index` was built from.
"""

from __future__ import annotations

import functools

import libcst as cst

from .bindings import ModuleBindings
from .syntax import FunctionNode

__all__ = ["CallSite", "CallSites"]

CallSite = tuple[cst.Call, FunctionNode | None, bool]


class CallSites:
    """Calls of `module` by the local function they run (see the module docstring)."""

    def __init__(self, module: cst.Module, analysis: ModuleBindings) -> None:
        self.module = module
        self.analysis = analysis

    @property
    def _calls(self) -> list[tuple[cst.Call, FunctionNode | None]]:
        return self.analysis.index.calls

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
