"""What a module's names and calls refer to, and the parameters a call binds.

`ModuleBindings` answers over one module's `ScopeProvider` metadata and its
`ModuleIndex`: every qualified name a node may have (imports and aliases
resolved), the assignments of a name, whether code runs once at import, which
local functions and methods (through `self`/`cls`) a call may run, and what a
call passes for each parameter. `Env` is the context a value is followed in:
the function that builds the cached segment, and the arguments bound to the
parameters of the helpers being followed. The value analyses (`shapes`,
`sets`, `taint`) are built on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import ClassScope, ComprehensionScope, FunctionScope, GlobalScope, Scope

from .module_index import ModuleIndex
from .syntax import FunctionNode, all_params, binds_first

__all__ = ["Env", "ModuleBindings"]

# Decorators that run a function once and return its first result on every later call.
_CACHES = frozenset({"functools.cache", "functools.lru_cache"})


@dataclass(frozen=True)
class Env:
    """Evaluation context: parameter bindings of the helper being followed.

    `root` is the function that builds the cached segment: its unbound
    parameters are request data. `bindings` maps `id(Param)` to the argument
    expression and the caller's environment.
    """

    root: FunctionNode | None
    bindings: Mapping[int, tuple[cst.BaseExpression, Env]] = field(default_factory=dict)
    depth: int = 0
    calling: frozenset[int] = frozenset()


class ModuleBindings:
    """Name and call resolution over one module (see the module docstring).

    `scopes` is the resolved `ScopeProvider` mapping of the same module
    object the index was built from.
    """

    def __init__(self, index: ModuleIndex, scopes: Mapping[cst.CSTNode, Scope | None]) -> None:
        self.index = index
        self.scopes = scopes
        self._qualified: dict[int, frozenset[str]] = {}

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        """Every qualified name `node` may refer to (imports and aliases resolved).

        This is exactly the value `QualifiedNameProvider` would hold for the
        node (it wraps `Scope.get_qualified_names_for` in a lazy value for
        every node of the module); asking the scope on demand skips that
        provider's full pass, which cost about a third of the lint time.
        """
        cached = self._qualified.get(id(node))
        if cached is None:
            scope = self.scopes.get(node)
            names = scope.get_qualified_names_for(node) if scope is not None else ()
            cached = frozenset(name.name for name in names)
            self._qualified[id(node)] = cached
        return cached

    def assignments(self, name: cst.Name) -> list[object]:
        """The scope's assignments of `name` (every one, not only the reaching ones)."""
        scope = self.scopes.get(name)
        if scope is None:
            return []
        try:
            return list(scope[name.value])
        except KeyError:
            return []

    def at_import(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs once at import: in a module or class body, not a function."""
        scope = self.scopes.get(node)
        while isinstance(scope, ComprehensionScope):
            scope = scope.parent
        return isinstance(scope, (GlobalScope, ClassScope))

    def cached_once(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function whose body `node` runs in when that body runs once per process: a
        function without parameters, defined at import and cached by `functools.cache` /
        `lru_cache` (every later call returns the first result)."""
        scope = self.scopes.get(node)
        while isinstance(scope, ComprehensionScope):
            scope = scope.parent
        function = scope.node if isinstance(scope, FunctionScope) else None
        if not isinstance(function, cst.FunctionDef) or _takes_arguments(function):
            return None
        for decorator in function.decorators:
            expression = decorator.decorator
            if isinstance(expression, cst.Call):
                expression = expression.func
            if self.qualified_names(expression) & _CACHES and self.at_import(function):
                return function
        return None

    def functions_called(self, call: cst.Call) -> list[tuple[FunctionNode, bool]]:
        """Local functions `call` may run, and methods of the module's classes called on
        `self`/`cls` or on an instance (`Store().render(...)`, `store.render(...)` with
        `store = Store()`); True when the first parameter is bound (a method)."""
        func = call.func
        found: list[tuple[FunctionNode, bool]] = []
        if isinstance(func, cst.Name):
            found = [(f, False) for f in self.functions_named(func)]
        elif isinstance(func, cst.Attribute):
            owner = self._owner_class(func.value) or self._instance_class(func.value)
            if owner is not None:
                method = self.index.class_methods.get(id(owner), {}).get(func.attr.value)
                if method is not None:
                    found.append((method, bool(binds_first(method, on_instance=True))))
        return found

    def constructed_by(self, node: cst.BaseExpression) -> list[cst.Call]:
        """The calls `node` is the result of, when every binding of it is a call: a call
        itself, or a name or `self.<attr>` assigned only calls (`store = Store()`); else
        none."""
        if isinstance(node, cst.Call):
            return [node]
        values: list[cst.BaseExpression | None] = []
        if isinstance(node, cst.Attribute):
            values = list(self.attribute_values(node))
        elif isinstance(node, cst.Name):
            for assignment in self.assignments(node):
                target = _node(assignment)
                if not isinstance(target, cst.Name):
                    return []  # a parameter, an import, a class or function
                values += [source.value for source in self.index.values.get(id(target), [])]
        calls = [value for value in values if isinstance(value, cst.Call)]
        return calls if values and len(calls) == len(values) else []

    def _instance_class(self, node: cst.BaseExpression) -> cst.ClassDef | None:
        """The module's class `node` is an instance of (`Store()`, `store = Store()`)."""
        owners = [self.named_class(call.func) for call in self.constructed_by(node)]
        first = owners[0] if owners else None
        return first if first is not None and all(o is first for o in owners) else None

    def functions_named(self, name: cst.Name | cst.Attribute) -> list[FunctionNode]:
        """The module's functions (defs and lambdas bound to a name) `name` may refer to;
        for `self.method` / `cls.method`, that method of the enclosing class."""
        found: list[FunctionNode] = []
        if isinstance(name, cst.Attribute):
            owner = self._owner_class(name.value)
            method = (
                self.index.class_methods.get(id(owner), {}).get(name.attr.value)
                if owner is not None
                else None
            )
            return [method] if method is not None else []
        for assignment in self.assignments(name):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.FunctionDef):
                found.append(target)
            elif isinstance(target, cst.Name):
                for source in self.index.values.get(id(target), []):
                    if isinstance(source.value, cst.Lambda):
                        found.append(source.value)
        return found

    def attribute_values(self, node: cst.Attribute) -> list[cst.BaseExpression]:
        """What `self.<attr>` / `cls.<attr>` is assigned in its class (body or methods)."""
        owner = self._owner_class(node.value)
        if owner is None:
            return []
        entries = self.index.class_attrs.get(id(owner), {}).get(node.attr.value, [])
        return [value for value, _function in entries]

    def named_class(self, node: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of the module `node` names (`Config` in `Config.STARTED`), when
        every binding of the name is that class statement."""
        if not isinstance(node, cst.Name):
            return None
        bound = {id(target): target for a in self.assignments(node) if (target := _node(a))}
        found = next(iter(bound.values())) if len(bound) == 1 else None
        return found if isinstance(found, cst.ClassDef) else None

    def _owner_class(self, node: cst.BaseExpression) -> cst.ClassDef | None:
        if not isinstance(node, cst.Name) or node.value not in ("self", "cls"):
            return None
        for assignment in self.assignments(node):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                function = self.index.param_function.get(id(target))
                if function is not None:
                    return self.index.function_class.get(id(function))
        return None

    def arguments(
        self, function: FunctionNode, call: cst.Call, method: bool
    ) -> dict[int, cst.BaseExpression]:
        """`id(Param)` to the expression `call` passes (or the default), for `function`."""
        params = function.params
        positional = [*params.posonly_params, *params.params]
        if method and positional:
            positional = positional[1:]
        by_name = {p.name.value: p for p in (*positional, *params.kwonly_params)}
        bound: dict[int, cst.BaseExpression] = {}
        position = 0
        for arg in call.args:
            if arg.star:
                continue
            if arg.keyword is None:
                if position < len(positional):
                    bound[id(positional[position])] = arg.value
                position += 1
            elif arg.keyword.value in by_name:
                bound[id(by_name[arg.keyword.value])] = arg.value
        for param in by_name.values():
            if id(param) not in bound and param.default is not None:
                bound[id(param)] = param.default
        return bound

    def bind(self, function: FunctionNode, call: cst.Call, method: bool, env: Env) -> Env:
        """The environment for running `function` on `call`'s arguments."""
        defaults = {id(p.default) for p in all_params(function) if p.default is not None}
        root_env = Env(env.root)
        bindings = {
            key: (value, root_env if id(value) in defaults else env)
            for key, value in self.arguments(function, call, method).items()
        }
        return Env(env.root, bindings, env.depth + 1, env.calling | {id(function)})


def _node(assignment: object) -> cst.CSTNode | None:
    node = getattr(assignment, "node", None)
    return node if isinstance(node, cst.CSTNode) else None


def _takes_arguments(function: cst.FunctionDef) -> bool:
    params = function.params
    return (
        bool(all_params(function))
        or isinstance(params.star_arg, cst.Param)
        or params.star_kwarg is not None
    )
