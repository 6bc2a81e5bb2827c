"""What a value is built from: the expressions it may evaluate to, a list's items, a dict's keys.

`ValueShapes.resolve` follows a name to the values assigned to it and a call
of a local helper to its return values (its parameters bound to the call's
arguments); `elements` lists the items of a list in order (`*spread`, `a + b`,
comprehensions, `x.append(...)` on a named list); `entries` gives the string
keys of a dict (literals, `dict(...)`, the SDKs' typed params called with
keywords, `d["key"] = value` assignments). The rules lay out requests and
find roles, markers and message content with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..catalog import is_dict_shaped_call
from .bindings import Env, ModuleBindings
from .syntax import spellings, string_value

__all__ = ["ValueShapes"]

_MAX_DEPTH = 6


class ValueShapes(ModuleBindings):
    """Structure questions over one module (see the module docstring)."""

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
            for assignment in self.assignments(node):
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
        if isinstance(node, cst.Await):
            # `a, b = await self._build(...)`: the coroutine's return values
            yield from self._resolve(node.expression, env, depth + 1)
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
            for assignment in self.assignments(node):
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
        self, node: cst.BaseExpression, env: Env, depth: int = 0
    ) -> dict[str, tuple[cst.BaseExpression, Env, cst.CSTNode]]:
        """String keys of the dict `node` evaluates to: value, its env, and the key node.

        Dicts are literals, `dict(...)` and the SDKs' typed params
        (`TextBlockParam(...)`, ...) called with keywords, completed by
        `name["key"] = value` assignments.
        """
        result: dict[str, tuple[cst.BaseExpression, Env, cst.CSTNode]] = {}
        if depth > _MAX_DEPTH:
            return result  # `params = {**params, ...}` spreads itself
        for value, value_env in self._resolve(node, env, 0):
            if isinstance(value, cst.Dict):
                for element in value.elements:
                    if isinstance(element, cst.DictElement):
                        key = string_value(element.key)
                        if key is not None:
                            result[key] = (element.value, value_env, element.key)
                    else:
                        result.update(self.entries(element.value, value_env, depth + 1))
            elif isinstance(value, cst.Call) and is_dict_shaped_call(
                spellings(self.qualified_names(value.func), value.func)
            ):
                for arg in value.args:
                    if arg.keyword is not None:
                        result[arg.keyword.value] = (arg.value, value_env, arg.keyword)
        if isinstance(node, cst.Name):
            for write_key, write_value, key_node in self.item_writes(node):
                result[write_key] = (write_value, env, key_node)
        return result

    def item_writes(self, node: cst.Name) -> list[tuple[str, cst.BaseExpression, cst.CSTNode]]:
        """`node["key"] = value` assignments to the variable `node` names, in source order."""
        found: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []
        for assignment in self.assignments(node):
            for access in getattr(assignment, "references", ()):
                found += self.index.item_writes.get(id(access.node), [])
        return found
