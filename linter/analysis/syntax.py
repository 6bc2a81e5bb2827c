"""What a piece of syntax says on its own, without the module around it.

A string literal's value, a dotted name's parts, a function's parameters: pure
functions of one libcst node, shared by every analysis of the package.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import cast

import libcst as cst
from libcst.metadata import ExpressionContextProvider, Scope, ScopeProvider
from libcst.metadata.expression_context_provider import (
    ExpressionContext,
    ExpressionContextVisitor,
)

__all__ = [
    "FunctionNode",
    "all_params",
    "binds_first",
    "children",
    "dotted_parts",
    "read_names",
    "scopes",
    "spellings",
    "string_value",
    "target_names",
    "walk",
]

FunctionNode = cst.FunctionDef | cst.Lambda


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a visitor that only reads (no `visit_<Node>_<field>`
    hooks): the same callbacks in the same order, without rebuilding every node the
    way libcst's own traversal does (which costs about half of an index pass)."""
    if visitor.on_visit(node):
        for child in children(node):
            walk(child, visitor)
    visitor.on_leave(node)


def scopes(module: cst.Module) -> Mapping[cst.CSTNode, Scope | None]:
    """libcst's `ScopeProvider` metadata of `module` (whose nodes are taken as they are,
    as `MetadataWrapper(module, unsafe_skip_copy=True)` takes them), computed by the
    two traversals that compute it: the expression contexts, then the scopes. Resolved
    through a `MetadataWrapper`, each provider's traversal runs inside one more
    traversal of the whole module that finds nothing else to do (about as costly)."""
    contexts = ExpressionContextProvider()
    module.visit(ExpressionContextVisitor(contexts, ExpressionContext.LOAD))
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts._computed}
    provider.visit_Module(module)
    return cast(Mapping[cst.CSTNode, Scope | None], provider._computed)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node.children` (its child nodes in source order), read from its fields."""
    kind = type(node)
    order = _FIELD_ORDER.get(kind, _UNKNOWN)
    if order is _UNKNOWN:
        order = _FIELD_ORDER[kind] = _visited_fields(kind)
    if order is None:
        return list(node.children)
    # a visited field holds a node, a sequence of nodes, None or a `MaybeSentinel`
    # (told apart by type: `isinstance` on libcst's abstract node class costs more)
    found: list[cst.CSTNode] = []
    for name in order:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found += value
        elif value is not None and kind is not cst.MaybeSentinel:
            found.append(value)
    return found


_UNKNOWN: tuple[str, ...] = ("?",)
_FIELD_ORDER: dict[type[cst.CSTNode], tuple[str, ...] | None] = {}


def _visited_fields(kind: type[cst.CSTNode]) -> tuple[str, ...] | None:
    """The fields libcst visits for a node type, in its order: read from its
    `_visit_and_replace_children`, which rebuilds the node with one keyword per field
    (`Name(lpar=visit_sequence(self, "lpar", self.lpar, visitor), value=self.value,
    ...)`, evaluated left to right); None when it has another shape (then the node's
    own `children` is used)."""
    try:
        source = textwrap.dedent(inspect.getsource(kind._visit_and_replace_children))
        function = ast.parse(source).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(function, ast.FunctionDef):
        return None
    body = [
        s
        for s in function.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if not isinstance(call, ast.Call) or call.args:
        return None
    order: list[str] = []
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg is None:
            return None
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id.startswith("visit_")
            and len(value.args) >= 3
            and isinstance(value.args[1], ast.Constant)
            and value.args[1].value == keyword.arg
        ):
            order.append(keyword.arg)
        elif not (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "self"
            and value.attr == keyword.arg
        ):
            return None
    return tuple(order)


def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal (no f-string), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def binds_first(method: FunctionNode, on_instance: bool = False) -> bool | None:
    """Whether calling a method binds its first parameter. Called on an instance: True,
    but False for a staticmethod. Called on its class: False for a staticmethod, True
    for a classmethod (the class), None for an instance method (it needs an instance)."""
    decorators = (
        set()
        if isinstance(method, cst.Lambda)
        else {".".join(dotted_parts(d.decorator) or []) for d in method.decorators}
    )
    if "staticmethod" in decorators:
        return False
    if on_instance or "classmethod" in decorators:
        return True
    return None


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


def spellings(names: frozenset[str], func: cst.BaseExpression) -> frozenset[str]:
    """A callee's qualified names plus its dotted spelling (for unresolved imports)."""
    parts = dotted_parts(func)
    return names | {".".join(parts)} if parts else names


def all_params(function: FunctionNode) -> list[cst.Param]:
    """Every named parameter of `function` (positional-only, regular, keyword-only)."""
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def read_names(node: cst.CSTNode, opaque: Callable[[str], bool] | None = None) -> list[cst.Name]:
    """Names read in an expression (not attribute names, keywords or nested functions);
    with `opaque`, not those read only through an attribute whose name it accepts."""
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, (cst.Lambda, cst.FunctionDef)):
        return []
    if isinstance(node, cst.Attribute):
        return (
            [] if opaque is not None and opaque(node.attr.value) else read_names(node.value, opaque)
        )
    if isinstance(node, cst.Arg):
        return read_names(node.value, opaque)
    return [name for child in node.children for name in read_names(child, opaque)]


def target_names(node: cst.BaseExpression | cst.BaseAssignTargetExpression) -> set[str]:
    """The names an assignment or loop target binds (`a`, `a, (b, *c)`; not `self.x`)."""
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, (cst.Tuple, cst.List)):
        return {n for element in node.elements for n in target_names(element.value)}
    if isinstance(node, cst.StarredElement):
        return target_names(node.value)
    return set()
