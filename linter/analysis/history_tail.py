"""Messages added at the end of an existing conversation: the tail of a prompt, not its prefix.

A message appended after a history the function did not start itself is the
new last turn, like the latest user message: what it holds changes nothing
before it, so nothing cached. The shapes:

- `history + [msg]`, `state["messages"] + [msg]`, `[SYSTEM] + history + [msg]`;
- `[*history, msg]`;
- `history.append(msg)`, `history.extend([msg])`, `history += [msg]`.

A history is a list that exists before the function adds to it: a parameter,
an attribute (`self.messages`), an item (`state["messages"]`), a call's
result, or a name bound to one of those. A list the code builds itself from
literals (`messages = []`, `messages = [system]`) is not: its first messages
are the prefix, so a message appended to it is still checked. Only messages
count (a dict with a `role`, a message class such as `SystemMessage(...)`, a
`("system", ...)` tuple, or a name bound to one): `tools + [extra_tool]` and
`base_rules + [dated_rule]` stay part of the prefix.
"""

from __future__ import annotations

import libcst as cst

from ..catalog import is_message_class
from .bindings import Env
from .shapes import ValueShapes
from .syntax import string_value, walk

__all__ = ["history_tail"]

_APPENDERS = frozenset({"append", "extend"})
_MAX_DEPTH = 6


def history_tail(module: cst.Module, analysis: ValueShapes) -> frozenset[int]:
    """Ids of every node inside a message added at the end of an existing history
    (`module`: the one `analysis.index` was built from, whose `appends` it reads)."""
    finder = _TailFinder(analysis)
    for node in analysis.index.appends:
        if isinstance(node, cst.BinaryOperation):
            finder.visit_BinaryOperation(node)
        elif isinstance(node, cst.AugAssign):
            finder.visit_AugAssign(node)
        elif isinstance(node, cst.List):
            finder.visit_List(node)
        else:
            finder.visit_Call(node)
    return frozenset(finder.tail)


class _TailFinder:
    def __init__(self, analysis: ValueShapes) -> None:
        self.analysis = analysis
        self.tail: set[int] = set()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Add) and self._is_history(node.left, 0):
            self._mark_items(node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign) and self._is_history(node.target, 0):
            self._mark_items(node.value)

    def visit_List(self, node: cst.List) -> None:
        after_history = False
        for element in node.elements:
            if after_history and isinstance(element, cst.Element):
                self._mark_message(element.value, 0)
            if isinstance(element, cst.StarredElement) and self._is_history(element.value, 0):
                after_history = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _APPENDERS):
            return
        if len(node.args) != 1 or not self._is_history(func.value, 0):
            return
        if func.attr.value == "append":
            self._mark_message(node.args[0].value, 0)
        else:
            self._mark_items(node.args[0].value)

    def _mark_items(self, node: cst.BaseExpression) -> None:
        if isinstance(node, (cst.List, cst.Tuple)):
            for element in node.elements:
                if isinstance(element, cst.Element):
                    self._mark_message(element.value, 0)

    def _mark_message(self, node: cst.BaseExpression, depth: int) -> None:
        """Mark `node` when it is a message (or a name bound only to messages)."""
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, cst.Name):
            values = [value for value, _env in self.analysis.resolve(node, Env(None))]
            if values and all(
                value is not node and _is_message(value, self.analysis) for value in values
            ):
                for value in values:
                    self._mark_message(value, depth + 1)
            return
        if _is_message(node, self.analysis):
            walk(node, _Marker(self.tail))

    def _is_history(self, node: cst.BaseExpression, depth: int) -> bool:
        """Whether `node` is a list that exists before this code adds to it."""
        if depth > _MAX_DEPTH or isinstance(node, (cst.List, cst.ListComp, cst.Tuple)):
            return False
        if isinstance(node, cst.BinaryOperation):
            return self._is_history(node.left, depth + 1) or self._is_history(node.right, depth + 1)
        if not isinstance(node, cst.Name):
            return isinstance(node, (cst.Attribute, cst.Subscript, cst.Call))
        values = []
        for assignment in self.analysis.assignments(node):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                return True
            if isinstance(target, cst.Name):
                for source in self.analysis.index.values.get(id(target), []):
                    if source.kind != "assign" or source.value is None:
                        return True
                    values.append(source.value)
        return bool(values) and any(self._is_history(value, depth + 1) for value in values)


def _is_message(node: cst.BaseExpression, analysis: ValueShapes) -> bool:
    """A dict with a `role`, a message class call or `dict(role=...)`, a `(role, text)` tuple."""
    if isinstance(node, cst.Dict):
        return any(
            isinstance(element, cst.DictElement) and string_value(element.key) == "role"
            for element in node.elements
        )
    if isinstance(node, cst.Call):
        names = analysis.qualified_names(node.func)
        if isinstance(node.func, cst.Name):
            names |= {node.func.value}
        elif isinstance(node.func, cst.Attribute):
            names |= {node.func.attr.value}
        keywords = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        return is_message_class(names) or ("builtins.dict" in names and "role" in keywords)
    if isinstance(node, cst.Tuple) and len(node.elements) == 2:
        first = node.elements[0]
        return isinstance(first, cst.Element) and string_value(first.value) in (
            "system",
            "developer",
            "user",
            "assistant",
            "human",
            "ai",
        )
    return False


class _Marker(cst.CSTVisitor):
    def __init__(self, tail: set[int]) -> None:
        self.tail = tail

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.tail.add(id(node))
        return True
