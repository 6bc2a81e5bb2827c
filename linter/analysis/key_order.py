"""Whether a dict's key order can differ between runs or requests carrying equal data.

`json.dumps` writes keys in insertion order, which is deterministic for most
dicts: a literal, a schema generated from a Pydantic model
(`model_json_schema()`, `TypeAdapter(...).json_schema()`), `model_dump()`,
`dataclasses.asdict`. Serialising those without `sort_keys=True` is correct,
and sorting them would change what the program sends (a model's schema lists
its fields in declaration order on purpose). The order varies only when the
dict is built

- by iterating a set or frozenset (`{k: ... for k in TAGS}`, `dict.fromkeys(s)`,
  `dict(zip(s, ...))`): string hashes change with `PYTHONHASHSEED`, so every
  process start may list the keys differently;
- from an unordered source: a directory listing (`os.listdir`, `os.scandir`,
  `os.walk`, `glob.glob`, `Path.glob` / `rglob` / `iterdir`), whose order
  depends on the file system;
- by filling an empty dict in a loop over one of those (`d[k] = v`);
- by merging runtime data: `{**defaults, **overrides}`, `dict(base, **extra)`
  or `d.update(extra)` where `extra` is a parameter (data each caller passes,
  whose keys arrive in the caller's order).

A JSON schema or a tool definition keeps the order its authors wrote (as
prefixkit's SDK sends schemas: the model reads a schema's `properties` in
that order), whoever passes it: `KeyOrder.authored(node, env)` recognises one
by what it is, a dict with `properties`, `"type": "object"`, `$schema`,
`input_schema` or `parameters` (or holding one), a value also sent as
`tools=`, or what a schema API returns (`model_json_schema()`,
`TypeAdapter(...).json_schema()`, pydantic 1's `schema()`).

`KeyOrder.unstable(node, env)` answers with the first reason the order varies
(text for a message) or None; with `merges=False` merging runtime data is no
reason (for a dict whose order is its authors'). It follows names, helpers and nested containers through
the module's `TaintAnalysis`, and a parameter of a helper through the calls
to that helper in the same module. Anything it cannot see is assumed stable:
the rule reports only what the module shows.
"""

from __future__ import annotations

import functools

import libcst as cst

from .bindings import Env
from .call_sites import CallSites
from .syntax import spellings, string_value, walk
from .taint import TaintAnalysis

__all__ = ["KeyOrder"]

_MAX_DEPTH = 8
_UNORDERED_CALLS = frozenset({"os.listdir", "os.scandir", "os.walk", "glob.glob", "glob.iglob"})
_UNORDERED_METHODS = frozenset({"glob", "rglob", "iterdir"})
_DICT_VIEWS = frozenset({"keys", "values", "items"})
_MERGING_METHODS = frozenset({"update", "setdefault"})
# Keys that make a dict a JSON schema or a tool definition.
_SCHEMA_KEYS = frozenset({"properties", "$schema", "input_schema", "inputSchema", "parameters"})
# Methods returning a generated JSON schema: pydantic 2 (models and TypeAdapter), pydantic 1.
_SCHEMA_METHODS = frozenset({"model_json_schema", "json_schema", "schema"})


class _Uses(cst.CSTVisitor):
    """One pass: `d[k] = v` and `d.update(v)` with the loops around them."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[cst.BaseExpression] = []
        # id(receiver Name) -> ("item" for `d[k] = v` | "merge" for `d.update(v)`, loops, v)
        self.writes: dict[
            int, list[tuple[str, tuple[cst.BaseExpression, ...], cst.BaseExpression]]
        ] = {}

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node.iter)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            subscript = target.target
            if isinstance(subscript, cst.Subscript) and isinstance(subscript.value, cst.Name):
                entry = ("item", tuple(self.loops), node.value)
                self.writes.setdefault(id(subscript.value), []).append(entry)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.attr.value in _MERGING_METHODS
            and node.args
        ):
            entry = ("merge", tuple(self.loops), node.args[0].value)
            self.writes.setdefault(id(func.value), []).append(entry)


class KeyOrder:
    """Key-order questions over one module (see the module docstring)."""

    def __init__(self, module: cst.Module, analysis: TaintAnalysis, sites: CallSites) -> None:
        self.module = module
        self.analysis = analysis
        self.sites = sites
        self._merges = True

    @functools.cached_property
    def _uses(self) -> _Uses:
        uses = _Uses()
        walk(self.module, uses)
        return uses

    def unstable(self, node: cst.BaseExpression, env: Env, *, merges: bool = True) -> str | None:
        """Why the key order of the dict `node` evaluates to can vary, or None (with
        `merges=False`, merging data each caller passes is not a reason)."""
        self._merges = merges
        try:
            return self._unstable(node, env, 0)
        finally:
            self._merges = True

    def authored(self, node: cst.BaseExpression, env: Env) -> str | None:
        """What the value of `node` is or holds whose key order is its authors' (a JSON
        schema, a tool definition), as words for a message, or None."""
        return self._authored(node, env, 0)

    @functools.cached_property
    def _sent_as_tools(self) -> frozenset[int]:
        """The values the module's `tools=` arguments evaluate to, and their items."""
        found: set[int] = set()
        for call, function in self.analysis.index.requests:
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value != "tools":
                    continue
                env = Env(function)
                items = [(arg.value, env)] + [
                    (item, item_env) for item, item_env, _ in self.analysis.elements(arg.value, env)
                ]
                for item, item_env in items:
                    found |= {id(value) for value, _ in self.analysis.resolve(item, item_env)}
        return frozenset(found)

    def _authored(self, node: cst.BaseExpression, env: Env, depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return None
        for value, value_env in self.analysis.resolve(node, env):
            if id(value) in self._sent_as_tools:
                return "a tool definition"
            func = value.func if isinstance(value, cst.Call) else None
            if isinstance(func, cst.Attribute) and func.attr.value in _SCHEMA_METHODS:
                return "a JSON schema"
            entries = self.analysis.entries(value, value_env)
            kind = entries.get("type")
            if entries.keys() & _SCHEMA_KEYS or (kind and string_value(kind[0]) == "object"):
                tool = entries.keys() & {"input_schema", "inputSchema", "parameters"}
                return "a tool definition" if tool else "a JSON schema"
            for child in [*_children(value), *(item for item, _, _ in entries.values())]:
                found = self._authored(child, value_env, depth + 1)
                if found is not None:
                    return found
        return None

    def _unstable(self, node: cst.BaseExpression, env: Env, depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, cst.Name):
            reason = self._filled(node, env, depth)
            if reason is not None:
                return reason
        for value, value_env in self.analysis.resolve(node, env):
            reason = self._value(value, value_env, depth)
            if reason is not None:
                return reason
        return None

    def _value(self, value: cst.BaseExpression, env: Env, depth: int) -> str | None:
        if isinstance(value, cst.Name):
            return self._through_callers(value, depth)
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.StarredDictElement) and self._runtime(
                    element.value, env
                ):
                    return "it merges `**` data each caller passes, in the caller's key order"
                reason = self._unstable(element.value, env, depth + 1)
                if reason is not None:
                    return reason
            return None
        if isinstance(value, cst.DictComp):
            for comp in _comp_fors(value.for_in):
                reason = self._unordered(comp.iter, env, depth)
                if reason is not None:
                    return f"its keys come from {reason}"
            return self._unstable(value.value, env, depth + 1)
        if isinstance(value, (cst.List, cst.Tuple)):
            for item in value.elements:
                reason = self._unstable(item.value, env, depth + 1)
                if reason is not None:
                    return reason
            return None
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return self._unstable(value.elt, env, depth + 1)
        if isinstance(value, cst.Call):
            return self._call(value, env, depth)
        return None

    def _call(self, call: cst.Call, env: Env, depth: int) -> str | None:
        func = call.func
        names = spellings(self.analysis.qualified_names(func), func)
        if isinstance(func, cst.Attribute) and func.attr.value == "fromkeys" and call.args:
            reason = self._unordered(call.args[0].value, env, depth)
            return f"its keys come from {reason}" if reason is not None else None
        if isinstance(func, cst.Attribute) and func.attr.value == "copy":
            return self._unstable(func.value, env, depth + 1)
        if not names & {"builtins.dict", "dict"}:
            return None
        for arg in call.args:
            if arg.star == "**" and self._runtime(arg.value, env):
                return "it merges `**` data each caller passes, in the caller's key order"
            if arg.keyword is None and not arg.star:
                reason = self._unordered(arg.value, env, depth)
                if reason is not None:
                    return f"its keys come from {reason}"
            reason = self._unstable(arg.value, env, depth + 1)
            if reason is not None:
                return reason
        return None

    def _filled(self, name: cst.Name, env: Env, depth: int) -> str | None:
        """A reason from `name[k] = v` in a loop over unordered keys, or `name.update(param)`."""
        uses = self._uses
        for assignment in self.analysis.assignments(name):
            for access in getattr(assignment, "references", ()):
                for kind, loops, value in uses.writes.get(id(access.node), []):
                    for loop in loops:
                        reason = self._unordered(loop, env, depth)
                        if reason is not None:
                            return f"it is filled in a loop over {reason}"
                    if kind == "merge" and self._runtime(value, env):
                        return "it is updated with data each caller passes, in the caller's order"
        return None

    def _unordered(self, node: cst.BaseExpression, env: Env, depth: int) -> str | None:
        """What makes iterating `node` unordered (a set, a directory listing), or None."""
        if depth > _MAX_DEPTH:
            return None
        if self.analysis.is_set(node, env):
            return "a set (its order changes with PYTHONHASHSEED)"
        for value, value_env in self.analysis.resolve(node, env):
            if not isinstance(value, cst.Call):
                continue
            func = value.func
            names = spellings(self.analysis.qualified_names(func), func)
            if "builtins.sorted" in names or "sorted" in names:
                continue
            if names & _UNORDERED_CALLS or (
                isinstance(func, cst.Attribute) and func.attr.value in _UNORDERED_METHODS
            ):
                return "a directory listing (its order depends on the file system)"
            if isinstance(func, cst.Attribute) and func.attr.value in _DICT_VIEWS:
                reason = self._unstable(func.value, value_env, depth + 1)
                if reason is not None:
                    return "a dict whose own order varies"
            if names & {"builtins.zip", "zip", "builtins.enumerate", "enumerate"}:
                for arg in value.args:
                    reason = self._unordered(arg.value, value_env, depth + 1)
                    if reason is not None:
                        return reason
        return None

    def _runtime(self, node: cst.BaseExpression, env: Env, depth: int = 0) -> bool:
        """Whether `node` is data each caller passes: a parameter of a function that no call
        in the module reaches, or one a call fills with such data."""
        if depth > _MAX_DEPTH or not self._merges:
            return False
        for value, _ in self.analysis.resolve(node, env):
            param = self.sites.parameter(value) if isinstance(value, cst.Name) else None
            if param is None:
                continue
            function = self.analysis.index.param_function.get(id(param))
            callers = self.sites.callers(function) if function is not None else []
            if not callers or function is None:
                return True
            for call, enclosing, method in callers:
                argument = self.analysis.arguments(function, call, method).get(id(param))
                if argument is not None and self._runtime(argument, Env(enclosing), depth + 1):
                    return True
        return False

    def _through_callers(self, name: cst.Name, depth: int) -> str | None:
        """A helper's parameter: unstable when a call in the module passes an unstable dict."""
        param = self.sites.parameter(name)
        if param is None:
            return None
        function = self.analysis.index.param_function.get(id(param))
        if function is None:
            return None
        for call, enclosing, method in self.sites.callers(function):
            argument = self.analysis.arguments(function, call, method).get(id(param))
            if argument is None:
                continue
            reason = self._unstable(argument, Env(enclosing), depth + 1)
            if reason is not None:
                return reason
        return None


def _children(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a container literal or comprehension holds (dict values, `**` spreads
    and list items)."""
    if isinstance(value, cst.Dict):
        return [element.value for element in value.elements]
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        return [element.value for element in value.elements]
    if isinstance(value, cst.DictComp):
        return [value.value]
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return [value.elt]
    return []


def _comp_fors(comp: cst.CompFor) -> list[cst.CompFor]:
    found = [comp]
    while comp.inner_for_in is not None:
        comp = comp.inner_for_in
        found.append(comp)
    return found
