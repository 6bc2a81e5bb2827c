"""Where a value comes from: volatile, per-request, or non-deterministically ordered.

`TaintAnalysis.taints(expr, env)` follows an expression through f-strings,
`.format`, `%`, `+`, `"".join`, containers, local and module-level
assignments (via libcst's `ScopeProvider`), `self.<attr>` assignments and
small helper functions and methods of the same module (arguments bound to
parameters), and returns every `Taint` that reaches it:

- `volatile`: a call from the volatile catalog (clock, uuid, random, pid...),
  matched against every qualified name the callee may have (aliases and
  conditional imports included; no single name is privileged);
- `identity`: a parameter, attribute or key named like a user, tenant or
  session id, name or email;
- `request`: an unbound parameter of `root`, the function that builds the
  cached segment (data that arrives with each request);
- `json`: `json.dumps` without `sort_keys=True`;
- `set`: iteration over a set or frozenset, or `str()` of one.

Unknown calls into other modules are opaque (no taint): the analysis prefers
silence to guessing. The analysis is pure: it reads the module and its
metadata and never changes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import BuiltinAssignment, ImportAssignment, Scope

from .catalog import (
    MESSAGE_CLASSES,
    SET_METHODS,
    STABLE_ROOTS,
    STRING_METHODS,
    TRANSPARENT_FUNCTIONS,
    UNSORTED_JSON_FUNCTIONS,
    is_identity_name,
    is_volatile_callable,
)
from .module_index import FunctionNode, ModuleIndex, string_value

__all__ = ["Env", "Taint", "TaintAnalysis", "dotted_parts"]

_MAX_DEPTH = 6
_SET_BUILDERS = frozenset({"builtins.set", "builtins.frozenset"})
_SET_ANNOTATIONS = frozenset({"set", "frozenset", "Set", "FrozenSet", "AbstractSet", "MutableSet"})
_ORDER_EXPOSING = frozenset({"builtins.list", "builtins.tuple", "builtins.enumerate"})
_STRINGIFY = frozenset({"builtins.str", "builtins.repr"})
_SET_OPERATORS = (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)


@dataclass(frozen=True)
class Taint:
    """One reason an expression's value breaks caching.

    `origin` is the node to report (and, for `json` and `set`, the node a fix
    edits: the `json.dumps` call, or the set expression to wrap in `sorted`).
    """

    kind: str
    origin: cst.CSTNode
    detail: str


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


def dotted_parts(node: cst.BaseExpression) -> list[str] | None:
    """`a.b.c` as ['a', 'b', 'c']; None when the chain does not end in a name."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return parts[::-1]


def _is_stable_root(parts: list[str]) -> bool:
    return parts[0] in STABLE_ROOTS or ".".join(parts[:2]) in STABLE_ROOTS


def _annotation_is_set(annotation: cst.BaseExpression | None) -> bool:
    node = annotation
    if isinstance(node, cst.Subscript):
        node = node.value
    parts = dotted_parts(node) if isinstance(node, cst.BaseExpression) else None
    return bool(parts) and parts is not None and parts[-1] in _SET_ANNOTATIONS


class TaintAnalysis:
    """Taint queries over one module (see the module docstring).

    `scopes` is the resolved `ScopeProvider` mapping of the same module
    object the index was built from. `extra_volatile` extends the volatile
    catalog.
    """

    def __init__(
        self,
        index: ModuleIndex,
        scopes: Mapping[cst.CSTNode, Scope | None],
        extra_volatile: frozenset[str] = frozenset(),
    ) -> None:
        self.index = index
        self.scopes = scopes
        self.extra_volatile = extra_volatile
        self._qualified: dict[int, frozenset[str]] = {}
        self._cache: dict[tuple[int, int], frozenset[Taint]] = {}
        self._active: set[tuple[int, int]] = set()

    # names ------------------------------------------------------------------
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

    def _assignments(self, name: cst.Name) -> list[object]:
        scope = self.scopes.get(name)
        if scope is None:
            return []
        try:
            return list(scope[name.value])
        except KeyError:
            return []

    def functions_called(self, call: cst.Call) -> list[tuple[FunctionNode, bool]]:
        """Local functions (and methods via `self.`) `call` may run; True when a method."""
        func = call.func
        found: list[tuple[FunctionNode, bool]] = []
        if isinstance(func, cst.Name):
            for assignment in self._assignments(func):
                target = getattr(assignment, "node", None)
                if isinstance(target, cst.FunctionDef):
                    found.append((target, False))
                elif isinstance(target, cst.Name):
                    for source in self.index.values.get(id(target), []):
                        if isinstance(source.value, cst.Lambda):
                            found.append((source.value, False))
        elif isinstance(func, cst.Attribute):
            owner = self._owner_class(func.value)
            if owner is not None:
                method = self.index.class_methods.get(id(owner), {}).get(func.attr.value)
                if method is not None:
                    found.append((method, True))
        return found

    def _owner_class(self, node: cst.BaseExpression) -> cst.ClassDef | None:
        if not isinstance(node, cst.Name) or node.value not in ("self", "cls"):
            return None
        for assignment in self._assignments(node):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                function = self.index.param_function.get(id(target))
                if function is not None:
                    return self.index.function_class.get(id(function))
        return None

    def bind(self, function: FunctionNode, call: cst.Call, method: bool, env: Env) -> Env:
        """The environment for running `function` on `call`'s arguments."""
        params = function.params
        positional = [*params.posonly_params, *params.params]
        if method and positional:
            positional = positional[1:]
        by_name = {p.name.value: p for p in (*positional, *params.kwonly_params)}
        bindings: dict[int, tuple[cst.BaseExpression, Env]] = {}
        position = 0
        for arg in call.args:
            if arg.star:
                continue
            if arg.keyword is None:
                if position < len(positional):
                    bindings[id(positional[position])] = (arg.value, env)
                position += 1
            elif arg.keyword.value in by_name:
                bindings[id(by_name[arg.keyword.value])] = (arg.value, env)
        root_env = Env(env.root)
        for param in by_name.values():
            if id(param) not in bindings and param.default is not None:
                bindings[id(param)] = (param.default, root_env)
        return Env(env.root, bindings, env.depth + 1, env.calling | {id(function)})

    # taints -----------------------------------------------------------------
    def taints(self, node: cst.CSTNode, env: Env) -> frozenset[Taint]:
        """Every taint reaching the value of `node` (an expression) in `env`."""
        if env.depth > _MAX_DEPTH or not isinstance(node, cst.BaseExpression):
            return frozenset()
        key = (id(node), id(env.root) if not env.bindings else id(env))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return frozenset()
        self._active.add(key)
        try:
            result = frozenset(self._taints(node, env))
        finally:
            self._active.discard(key)
        if not env.bindings:
            self._cache[key] = result
        return result

    def _union(self, nodes: Iterable[cst.CSTNode], env: Env) -> set[Taint]:
        result: set[Taint] = set()
        for node in nodes:
            result |= self.taints(node, env)
        return result

    def _taints(self, node: cst.BaseExpression, env: Env) -> set[Taint]:
        if isinstance(node, cst.Name):
            return self._name(node, env)
        if isinstance(node, cst.Attribute):
            return self._attribute(node, env)
        if isinstance(node, cst.Call):
            return self._call(node, env)
        if isinstance(node, cst.FormattedString):
            return self._union(
                [p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression)],
                env,
            )
        if isinstance(node, (cst.ConcatenatedString, cst.BinaryOperation, cst.BooleanOperation)):
            return self._union([node.left, node.right], env)
        if isinstance(node, cst.UnaryOperation):
            return set(self.taints(node.expression, env))
        if isinstance(node, cst.IfExp):
            return self._union([node.body, node.orelse], env)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, env)
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            return self._union([e.value for e in node.elements], env)
        if isinstance(node, cst.Dict):
            values: list[cst.CSTNode] = []
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    values += [element.key, element.value]
                else:
                    values.append(element.value)
            return self._union(values, env)
        # Comprehension targets resolve (through the index) to their iterables,
        # so the element expressions carry the iteration's taints.
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return set(self.taints(node.elt, env))
        if isinstance(node, cst.DictComp):
            return self._union([node.key, node.value], env)
        if isinstance(node, cst.SetComp):
            return {t for t in self.taints(node.elt, env) if t.kind != "set"}
        if isinstance(node, cst.Await):
            return set(self.taints(node.expression, env))
        if isinstance(node, cst.NamedExpr):
            return set(self.taints(node.value, env))
        return set()

    def _name(self, node: cst.Name, env: Env) -> set[Taint]:
        result: set[Taint] = set()
        for assignment in self._assignments(node):
            if isinstance(assignment, (BuiltinAssignment, ImportAssignment)):
                continue
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                result |= self._param(target, node, env)
            elif isinstance(target, cst.Name):
                for source in self.index.values.get(id(target), []):
                    if source.value is None:
                        continue
                    result |= self.taints(source.value, env)
                    if source.kind == "iter" and self.is_set(source.value, env):
                        result.add(Taint("set", source.value, "iterates over a set"))
                for access in getattr(assignment, "references", ()):
                    for mutation in self.index.mutations.get(id(access.node), []):
                        result |= self._union([arg.value for arg in mutation.call.args], env)
        return result

    def _param(self, param: cst.Param, use: cst.Name, env: Env) -> set[Taint]:
        name = param.name.value
        if name in ("self", "cls"):
            return set()
        result: set[Taint] = set()
        if is_identity_name([name]):
            result.add(Taint("identity", use, f"parameter `{name}`"))
        bound = env.bindings.get(id(param))
        if bound is not None:
            argument, caller = bound
            result |= self.taints(argument, caller)
        elif self.index.param_function.get(id(param)) is env.root and env.root is not None:
            result.add(Taint("request", use, f"parameter `{name}`"))
        return result

    def _attribute(self, node: cst.Attribute, env: Env) -> set[Taint]:
        parts = dotted_parts(node)
        if parts is not None and _is_stable_root(parts):
            return set()
        owner = self._owner_class(node.value)
        if owner is not None:
            return self._class_attribute(owner, node, env)
        result = set(self.taints(node.value, env))
        if parts is not None and is_identity_name(parts):
            # one finding for `user.email`, not another for `user`
            result = {t for t in result if t.kind != "identity"}
            result.add(Taint("identity", node, f"`{'.'.join(parts)}`"))
        return result

    def _class_attribute(self, owner: cst.ClassDef, node: cst.Attribute, env: Env) -> set[Taint]:
        name = node.attr.value
        result: set[Taint] = set()
        entries = self.index.class_attrs.get(id(owner), {}).get(name, [])
        method = self.index.class_methods.get(id(owner), {}).get(name)
        if method is not None and not entries:
            for value in self.index.returns.get(id(method), []):
                result |= self.taints(value, Env(env.root, {}, env.depth + 1))
            return result
        for value, _function in entries:
            result |= self.taints(value, Env(env.root, {}, env.depth + 1))
        literal_only = bool(entries) and all(
            isinstance(value, (cst.SimpleString, cst.Integer, cst.Float)) for value, _ in entries
        )
        if is_identity_name([name]) and not literal_only:
            # reported where it enters the prompt, not where __init__ stored it
            result = {t for t in result if t.kind != "identity"}
            result.add(Taint("identity", node, f"`self.{name}`"))
        return result

    def _subscript(self, node: cst.Subscript, env: Env) -> set[Taint]:
        parts = dotted_parts(node.value)
        if parts is not None and _is_stable_root(parts):
            return set()
        result = set(self.taints(node.value, env))
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                result |= self.taints(element.slice.value, env)
                key = string_value(element.slice.value)
                if key is not None and is_identity_name([key]):
                    result.add(Taint("identity", node, f"key {key!r}"))
        return result

    def _call(self, node: cst.Call, env: Env) -> set[Taint]:
        names = self.qualified_names(node.func)
        for name in sorted(names):
            if is_volatile_callable(name, self.extra_volatile):
                return {Taint("volatile", node, f"`{name}()`")}
        args = [arg.value for arg in node.args]
        first = args[0] if args else None
        if names & UNSORTED_JSON_FUNCTIONS:
            result = self._union(args, env)
            if not _sorts_keys(node):
                result.add(Taint("json", node, "`json.dumps` without `sort_keys=True`"))
            return result
        if "builtins.sorted" in names or names & _SET_BUILDERS:
            return {t for t in self._union(args, env) if t.kind != "set"}
        if names & (_STRINGIFY | _ORDER_EXPOSING) and first is not None:
            result = self._union(args, env)
            if self.is_set(first, env):
                result.add(Taint("set", first, "turns a set into ordered text or a sequence"))
            return result
        functions = [(f, m) for f, m in self.functions_called(node) if id(f) not in env.calling]
        if functions:
            result = set()
            for function, method in functions:
                inner = self.bind(function, node, method, env)
                result |= self._union(self.index.returns.get(id(function), []), inner)
            return result
        func = node.func
        if isinstance(func, cst.Attribute):
            result = set(self.taints(func.value, env))
            if func.attr.value in STRING_METHODS:
                result |= self._union(args, env)
                if func.attr.value == "join" and first is not None and self.is_set(first, env):
                    result.add(Taint("set", first, "joins a set"))
            return result
        if names & TRANSPARENT_FUNCTIONS or _is_message_class(names, func):
            return self._union(args, env)
        return set()

    # sets -------------------------------------------------------------------
    def is_set(self, node: cst.BaseExpression, env: Env) -> bool:
        """Whether `node` evaluates to a set or frozenset (as far as the module shows)."""
        return self._is_set(node, env, set())

    def _is_set(self, node: cst.BaseExpression, env: Env, seen: set[int]) -> bool:
        if id(node) in seen or len(seen) > 64:
            return False
        seen.add(id(node))
        if isinstance(node, (cst.Set, cst.SetComp)):
            return True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _SET_OPERATORS):
            return self._is_set(node.left, env, seen) or self._is_set(node.right, env, seen)
        if isinstance(node, cst.Call):
            if self.qualified_names(node.func) & _SET_BUILDERS:
                return True
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in SET_METHODS:
                return self._is_set(func.value, env, seen)
            return any(
                self._is_set(value, env, seen)
                for function, _ in self.functions_called(node)
                for value in self.index.returns.get(id(function), [])
            )
        if isinstance(node, cst.Attribute):
            owner = self._owner_class(node.value)
            if owner is None:
                return False
            entries = self.index.class_attrs.get(id(owner), {}).get(node.attr.value, [])
            return any(self._is_set(value, env, seen) for value, _ in entries)
        if isinstance(node, cst.Name):
            for assignment in self._assignments(node):
                target = getattr(assignment, "node", None)
                if isinstance(target, cst.Param):
                    annotation = target.annotation
                    if annotation is not None and _annotation_is_set(annotation.annotation):
                        return True
                    bound = env.bindings.get(id(target))
                    if bound is not None and self._is_set(bound[0], bound[1], seen):
                        return True
                elif isinstance(target, cst.Name):
                    for source in self.index.values.get(id(target), []):
                        if _annotation_is_set(source.annotation):
                            return True
                        if (
                            source.kind == "assign"
                            and source.value is not None
                            and self._is_set(source.value, env, seen)
                        ):
                            return True
        return False

    # structure --------------------------------------------------------------
    def resolve(self, node: cst.BaseExpression, env: Env) -> list[tuple[cst.BaseExpression, Env]]:
        """The expressions `node` may evaluate to, following names and local helpers."""
        return list(self._resolve(node, env, 0))

    def _resolve(
        self, node: cst.BaseExpression, env: Env, depth: int
    ) -> Iterator[tuple[cst.BaseExpression, Env]]:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, cst.Name):
            sources: list[tuple[cst.BaseExpression, Env]] = []
            for assignment in self._assignments(node):
                target = getattr(assignment, "node", None)
                if isinstance(target, cst.Param) and id(target) in env.bindings:
                    sources.append(env.bindings[id(target)])
                elif isinstance(target, cst.Name):
                    sources += [
                        (s.value, env)
                        for s in self.index.values.get(id(target), [])
                        if s.kind == "assign" and s.value is not None
                    ]
            if not sources:
                yield node, env
            for value, value_env in sources:
                yield from self._resolve(value, value_env, depth + 1)
            return
        if isinstance(node, cst.Call):
            functions = [(f, m) for f, m in self.functions_called(node) if id(f) not in env.calling]
            if functions:
                for function, method in functions:
                    inner = self.bind(function, node, method, env)
                    for value in self.index.returns.get(id(function), []):
                        yield from self._resolve(value, inner, depth + 1)
                return
        if isinstance(node, cst.IfExp):
            yield from self._resolve(node.body, env, depth + 1)
            yield from self._resolve(node.orelse, env, depth + 1)
            return
        yield node, env

    def elements(
        self, node: cst.BaseExpression, env: Env
    ) -> list[tuple[cst.BaseExpression, Env, bool]]:
        """Items of the list `node` evaluates to, in order; True marks a repeated item.

        Follows names, helpers, `*spread`, `a + b`, comprehensions (their
        element, repeated) and `x.append(...)` calls on a named list. Items the
        module does not show are left out, so counts are lower bounds.
        """
        found: list[tuple[cst.BaseExpression, Env, bool]] = []
        self._elements(node, env, found, 0)
        return found

    def _elements(
        self,
        node: cst.BaseExpression,
        env: Env,
        found: list[tuple[cst.BaseExpression, Env, bool]],
        depth: int,
    ) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, cst.Name):
            for assignment in self._assignments(node):
                for access in getattr(assignment, "references", ()):
                    for mutation in self.index.mutations.get(id(access.node), []):
                        args = mutation.call.args
                        if mutation.method == "append" and args:
                            found.append((args[0].value, env, False))
                        elif mutation.method == "extend" and args:
                            self._elements(args[0].value, env, found, depth + 1)
        for value, value_env in self._resolve(node, env, 0):
            if isinstance(value, (cst.List, cst.Tuple)):
                for element in value.elements:
                    if isinstance(element, cst.StarredElement):
                        self._elements(element.value, value_env, found, depth + 1)
                    else:
                        found.append((element.value, value_env, False))
            elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
                found.append((value.elt, value_env, True))
            elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                self._elements(value.left, value_env, found, depth + 1)
                self._elements(value.right, value_env, found, depth + 1)

    def entries(
        self, node: cst.BaseExpression, env: Env
    ) -> dict[str, tuple[cst.BaseExpression, Env, cst.CSTNode]]:
        """String keys of the dict `node` evaluates to: value, its env, and the key node."""
        result: dict[str, tuple[cst.BaseExpression, Env, cst.CSTNode]] = {}
        for value, value_env in self._resolve(node, env, 0):
            if isinstance(value, cst.Dict):
                for element in value.elements:
                    if isinstance(element, cst.DictElement):
                        key = string_value(element.key)
                        if key is not None:
                            result[key] = (element.value, value_env, element.key)
                    else:
                        result.update(self.entries(element.value, value_env))
            elif isinstance(value, cst.Call) and "builtins.dict" in self.qualified_names(
                value.func
            ):
                for arg in value.args:
                    if arg.keyword is not None:
                        result[arg.keyword.value] = (arg.value, value_env, arg.keyword)
        return result


def _is_message_class(names: frozenset[str], func: cst.BaseExpression) -> bool:
    parts = dotted_parts(func)
    tails = {name.rsplit(".", 1)[-1] for name in names} | ({parts[-1]} if parts else set())
    return bool(tails & MESSAGE_CLASSES)


def _sorts_keys(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.star == "**":
            return True
        if arg.keyword is not None and arg.keyword.value == "sort_keys":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return False
