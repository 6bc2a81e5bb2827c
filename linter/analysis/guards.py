"""The conditions under which a function puts one of its parameters into a prompt.

`def add(self, role, text): if role == "system": self.system = text` puts `text` into
the system prompt only when `role` is `"system"`: a call `add("user", stamp)` puts
nothing there. `conditions(function, node)` reads, for a node inside `function`, every
enclosing `if` (or conditional expression) of the function whose test compares one of
its parameters with string literals (`==`, `!=`, `in`, `not in`; the `else` branch
negated); `excluded(conditions, arguments)` says whether the string literals a call
passes for those parameters rule the node out. Anything else (a test on another value,
an argument that is not a literal) leaves the node in.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from .syntax import FunctionNode, all_params, children, string_value

__all__ = ["Condition", "conditions", "excluded", "passes_literals"]

_POSITIVE = (cst.Equal, cst.In)
_NEGATIVE = (cst.NotEqual, cst.NotIn)


@dataclass(frozen=True)
class Condition:
    """`param` is one of `values` (`holds`), or none of them (not `holds`)."""

    param: cst.Param
    values: frozenset[str]
    holds: bool


def conditions(function: FunctionNode, node: cst.CSTNode) -> tuple[Condition, ...]:
    """The tests on `function`'s parameters that hold wherever `node` runs."""
    path = _path(function, node)
    if not path:
        return ()
    params = {param.name.value: param for param in all_params(function)}
    found: list[Condition] = []
    for parent, child in itertools.pairwise(path):
        if not isinstance(parent, (cst.If, cst.IfExp)) or child is parent.test:
            continue
        test = _comparison(parent.test, params)
        if test is not None:
            param, values, positive = test
            found.append(Condition(param, values, positive == (child is parent.body)))
    return tuple(found)


def excluded(found: Sequence[Condition], arguments: Mapping[int, cst.BaseExpression]) -> bool:
    """Whether a call whose arguments (by `id` of the parameter) are `arguments` fails one
    of `found`: it passes a string literal the test rules out."""
    for condition in found:
        argument = arguments.get(id(condition.param))
        text = string_value(argument) if argument is not None else None
        if text is not None and (text in condition.values) != condition.holds:
            return True
    return False


def passes_literals(arguments: Mapping[int, cst.BaseExpression], param: cst.Param) -> bool:
    """Whether a call passes a string literal for a parameter other than `param` (else no
    test on the parameters can rule it out: the tests need not be read)."""
    return any(
        key != id(param) and string_value(argument) is not None
        for key, argument in arguments.items()
    )


def _path(root: cst.CSTNode, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from `root` down to `node` (empty when `node` is not inside `root`)."""
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        current, depth = stack.pop()
        del path[depth:]
        path.append(current)
        if current is node:
            return path
        stack += [(child, depth + 1) for child in reversed(children(current))]
    return []


def _comparison(
    test: cst.BaseExpression, params: Mapping[str, cst.Param]
) -> tuple[cst.Param, frozenset[str], bool] | None:
    """`role == "system"`, `"system" == role`, `kind in ("system", "developer")` and their
    negations, on a parameter: (the parameter, the literals, whether the test is positive)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator = target.operator
    if not isinstance(operator, (*_POSITIVE, *_NEGATIVE)):
        return None
    positive = isinstance(operator, _POSITIVE)
    left, right = test.left, target.comparator
    if isinstance(right, cst.Name) and isinstance(operator, (cst.Equal, cst.NotEqual)):
        left, right = right, left  # `"system" == role`
    if not isinstance(left, cst.Name) or left.value not in params:
        return None
    values = _literals(right)
    return (params[left.value], values, positive) if values is not None else None


def _literals(node: cst.BaseExpression) -> frozenset[str] | None:
    """A string literal, or a tuple, list or set of them."""
    text = string_value(node)
    if text is not None:
        return frozenset({text})
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)) and node.elements:
        texts = [string_value(element.value) for element in node.elements]
        if all(t is not None for t in texts):
            return frozenset(t for t in texts if t is not None)
    return None
