"""Whether a value is a set, and what it holds.

Iterating a set of strings exposes an order that changes with
`PYTHONHASHSEED`, so every process may see another one. `SetValues.is_set`
says whether an expression evaluates to a set or frozenset as far as the
module shows (literals, comprehensions, `set(...)`, set operators and
methods, annotations, helpers returning one, `self.<attr>`, arguments bound
in the `Env`); `set_elements` says whether its elements are strings (order
varies per process), ints and the like (the same order in every process) or
unknown.
"""

from __future__ import annotations

import libcst as cst

from ..catalog import SET_METHODS
from .bindings import Env, ModuleBindings
from .syntax import dotted_parts

__all__ = ["SET_BUILDERS", "SetValues"]

SET_BUILDERS = frozenset({"builtins.set", "builtins.frozenset"})
_SET_ANNOTATIONS = frozenset({"set", "frozenset", "Set", "FrozenSet", "AbstractSet", "MutableSet"})
_SET_OPERATORS = (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)


class SetValues(ModuleBindings):
    """Set questions over one module (see the module docstring)."""

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
            if self.qualified_names(node.func) & SET_BUILDERS:
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
            return self._name_is_set(node, env, seen)
        return False

    def _name_is_set(self, node: cst.Name, env: Env, seen: set[int]) -> bool:
        for assignment in self.assignments(node):
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

    def set_elements(self, node: cst.BaseExpression, env: Env) -> str:
        """What a set holds: "str" (strings: order varies per process, `sorted` works),
        "stable" (ints, bools, None and tuples of them: hash order is the same in every
        process) or "unknown"."""
        kinds = self._element_kinds(node, env, set())
        if not kinds or "unknown" in kinds or len(kinds) > 1:
            return "unknown"
        return kinds.pop()

    def _element_kinds(self, node: cst.BaseExpression, env: Env, seen: set[int]) -> set[str]:
        if id(node) in seen or len(seen) > 64:
            return {"unknown"}
        seen.add(id(node))
        if isinstance(node, (cst.Set, cst.List, cst.Tuple)):
            return {_literal_kind(e.value) for e in node.elements} or {"unknown"}
        if isinstance(node, cst.SetComp):
            return {_literal_kind(node.elt)}
        if isinstance(node, cst.BinaryOperation):
            return self._element_kinds(node.left, env, seen) | self._element_kinds(
                node.right, env, seen
            )
        if isinstance(node, cst.Call):
            func = node.func
            if self.qualified_names(func) & SET_BUILDERS:
                if not node.args:
                    return set()
                return self._element_kinds(node.args[0].value, env, seen)
            if isinstance(func, cst.Attribute) and func.attr.value in SET_METHODS:
                result = self._element_kinds(func.value, env, seen)
                for arg in node.args:
                    result |= self._element_kinds(arg.value, env, seen)
                return result
            return {"unknown"}
        if isinstance(node, cst.Attribute):
            owner = self._owner_class(node.value)
            entries = self.index.class_attrs.get(id(owner), {}).get(node.attr.value, [])
            if owner is None or not entries:
                return {"unknown"}
            result = set()
            for value, _ in entries:
                result |= self._element_kinds(value, env, seen)
            return result
        if isinstance(node, cst.Name):
            return self._name_element_kinds(node, env, seen)
        return {"unknown"}

    def _name_element_kinds(self, node: cst.Name, env: Env, seen: set[int]) -> set[str]:
        result: set[str] = set()
        for assignment in self.assignments(node):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                bound = env.bindings.get(id(target))
                annotation = target.annotation
                if bound is not None:
                    result |= self._element_kinds(bound[0], bound[1], seen)
                elif annotation is not None:
                    result.add(_annotation_element_kind(annotation.annotation))
                else:
                    result.add("unknown")
            elif isinstance(target, cst.Name):
                for source in self.index.values.get(id(target), []):
                    if source.annotation is not None:
                        result.add(_annotation_element_kind(source.annotation))
                    elif source.kind == "assign" and source.value is not None:
                        result |= self._element_kinds(source.value, env, seen)
                    else:
                        result.add("unknown")
            else:
                result.add("unknown")
        return result or {"unknown"}


def _annotation_is_set(annotation: cst.BaseExpression | None) -> bool:
    node = annotation
    if isinstance(node, cst.Subscript):
        node = node.value
    parts = dotted_parts(node) if isinstance(node, cst.BaseExpression) else None
    return bool(parts) and parts is not None and parts[-1] in _SET_ANNOTATIONS


def _literal_kind(node: cst.BaseExpression) -> str:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "str"
    if isinstance(node, (cst.Integer, cst.Float)) or (
        isinstance(node, cst.Name) and node.value in ("True", "False", "None")
    ):
        return "stable"
    if isinstance(node, cst.Tuple) and node.elements:
        kinds = {_literal_kind(e.value) for e in node.elements}
        return "stable" if kinds == {"stable"} else "unknown"
    return "unknown"


def _annotation_element_kind(annotation: cst.BaseExpression) -> str:
    """`set[str]` / `frozenset[str]` / `list[str]` give "str"; `set[int]` gives "stable"."""
    if isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1:
        inner = annotation.slice[0].slice
        if isinstance(inner, cst.Index) and isinstance(inner.value, cst.Name):
            if inner.value.value == "str":
                return "str"
            if inner.value.value in ("int", "bool"):
                return "stable"
    return "unknown"
