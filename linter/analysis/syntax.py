"""What a piece of syntax says on its own, without the module around it.

A string literal's value, a dotted name's parts, a function's parameters: pure
functions of one libcst node, shared by every analysis of the package.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["FunctionNode", "all_params", "dotted_parts", "spellings", "string_value"]

FunctionNode = cst.FunctionDef | cst.Lambda


def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal (no f-string), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
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
