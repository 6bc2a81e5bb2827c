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
literals (`messages = []`, `messages = [system]`) is a history from the
point where it holds a turn: a message with a role other than system or
developer, or an existing history, in the literal (`[system, user_turn]`,
`[system, *history]`) or added by an earlier append in source order (a
script's `messages.append(user_turn)` before the notice it appends after
the reply). Until then its messages are the prefix, and a message appended
to it is still checked. Only messages count (a dict with a `role`, a message
class such as `SystemMessage(...)`, a class called with a role by value such
as `Entry("system", text)`, a `("system", ...)` tuple, or a name bound to
one): `tools + [extra_tool]` and `base_rules + [dated_rule]` stay part of
the prefix.

A function or method that appends one of its parameters to a history adds
to the log (`def record(self, entry): self.entries.append(entry)`): the
message a call of it passes there is the tail too. Calls are resolved as
`bindings` resolves them, and a method called on another object
(`self.log.record(msg)`) by its name, when every method of that name in the
module appends that parameter.
"""

from __future__ import annotations

from typing import TypeAlias

import libcst as cst

from ..catalog import SYSTEM_ROLES, TURN_ROLES, is_message_class, is_system_role
from .bindings import Env
from .module_index import role_spelling
from .shapes import ValueShapes
from .syntax import FunctionNode, string_value, walk

__all__ = ["history_tail"]

_APPENDERS = frozenset({"append", "extend"})
_MAX_DEPTH = 6
_ROLES = SYSTEM_ROLES | TURN_ROLES

_Append: TypeAlias = cst.BinaryOperation | cst.AugAssign | cst.List | cst.Call


def history_tail(module: cst.Module, analysis: ValueShapes) -> frozenset[int]:
    """Ids of every node inside a message added at the end of an existing history
    (`module`: the one `analysis.index` was built from, whose `appends` it reads)."""
    finder = _TailFinder(analysis)
    finder.find_turns()
    finder.mark_log_calls()
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
        self.order = {id(node): position for position, node in enumerate(analysis.index.appends)}
        # a local list (by its name's assignments) -> where it first holds a turn
        self.turns_from: dict[frozenset[int], int] = {}
        # what `x += [...]` adds is not a list `x` is assigned
        self.added = {id(n.value) for n in analysis.index.appends if isinstance(n, cst.AugAssign)}

    def find_turns(self) -> None:
        """Where each list the code builds itself first gets a turn added (source order)."""
        for node in self.analysis.index.appends:
            added = _added(node)
            key = self._list_key(added[0]) if added is not None else None
            if added is None or key is None or key in self.turns_from:
                continue
            _target, items, single = added
            listed = [items] if single else _elements(items)
            if listed is None:
                brings = self._is_history(items, 0)  # `x.extend(history)`, `x += history`
            else:
                brings = any(self._is_turn(item) for item in listed)
            if brings:
                self.turns_from[key] = self.order[id(node)]

    def mark_log_calls(self) -> None:
        """Mark the messages passed to a function or method that appends them to a history."""
        logged: dict[int, set[int]] = {}
        for node in self.analysis.index.appends:
            added = _added(node)
            if added is None or not self._is_log(added[0], node):
                continue
            items = [added[1]] if added[2] else _elements(added[1]) or []
            for item in items:
                param = self._parameter(item)
                if param is not None:
                    function = self.analysis.index.param_function[id(param)]
                    logged.setdefault(id(function), set()).add(id(param))
        if not logged:
            return
        for call, _function in self.analysis.index.calls:
            callees = self._callees(call)
            if not callees or any(id(function) not in logged for function, _ in callees):
                continue
            for function, method in callees:
                for key, value in self.analysis.arguments(function, call, method).items():
                    if key in logged[id(function)]:
                        self._mark_message(value, 0)

    def _callees(self, call: cst.Call) -> list[tuple[FunctionNode, bool]]:
        """The module's functions `call` may run; a method on another object by its name."""
        found = self.analysis.functions_called(call)
        if found or not isinstance(call.func, cst.Attribute):
            return found
        name = call.func.attr.value
        return [
            (methods[name], True)
            for methods in self.analysis.index.class_methods.values()
            if name in methods
        ]

    def _parameter(self, node: cst.BaseExpression) -> cst.Param | None:
        """The parameter `node` names, when a parameter is all it can be."""
        if not isinstance(node, cst.Name):
            return None
        targets = [getattr(a, "node", None) for a in self.analysis.assignments(node)]
        if (
            len(targets) == 1
            and isinstance(targets[0], cst.Param)
            and id(targets[0]) in self.analysis.index.param_function
        ):
            return targets[0]
        return None

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Add) and self._is_log(node.left, node):
            self._mark_items(node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign) and self._is_log(node.target, node):
            self._mark_items(node.value)

    def visit_List(self, node: cst.List) -> None:
        after_history = False
        for element in node.elements:
            if after_history and isinstance(element, cst.Element):
                self._mark_message(element.value, 0)
            if isinstance(element, cst.StarredElement) and self._is_log(element.value, node):
                after_history = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _APPENDERS):
            return
        if len(node.args) != 1 or not self._is_log(func.value, node):
            return
        if func.attr.value == "append":
            self._mark_message(node.args[0].value, 0)
        else:
            self._mark_items(node.args[0].value)

    def _is_log(self, node: cst.BaseExpression, at: _Append) -> bool:
        """Whether `node` is a history where `at` adds to it: one that exists before the
        code adds to it, or a list it builds that holds a turn by then."""
        if self._is_history(node, 0):
            return True
        if not isinstance(node, cst.Name):
            return False
        key = self._list_key(node)
        if key is None:
            return False
        start = self.turns_from.get(key)
        if start is not None and start < self.order.get(id(at), -1):
            return True
        literals = self._literals(node)
        return bool(literals) and all(self._starts_with_turn(literal) for literal in literals)

    def _list_key(self, node: cst.BaseExpression) -> frozenset[int] | None:
        """A name's assignments, the identity of the list it names (None: not a name)."""
        if not isinstance(node, cst.Name):
            return None
        assignments = self.analysis.assignments(node)
        return frozenset(id(assignment) for assignment in assignments) or None

    def _literals(self, node: cst.Name) -> list[cst.List]:
        """The list literals a name is assigned (every assignment must be one)."""
        found: list[cst.List] = []
        for assignment in self.analysis.assignments(node):
            target = getattr(assignment, "node", None)
            if not isinstance(target, cst.Name):
                return []
            for source in self.analysis.index.values.get(id(target), []):
                if id(source.value) in self.added:
                    continue
                if source.kind != "assign" or not isinstance(source.value, cst.List):
                    return []
                found.append(source.value)
        return found

    def _starts_with_turn(self, literal: cst.List) -> bool:
        """Whether a list literal holds a turn or an existing history."""
        for element in literal.elements:
            if isinstance(element, cst.StarredElement) and self._is_history(element.value, 0):
                return True
            if isinstance(element, cst.Element) and self._is_turn(element.value):
                return True
        return False

    def _is_turn(self, node: cst.BaseExpression) -> bool:
        """A message with a role other than system or developer (a turn of the conversation)."""
        role = _role(node, self.analysis)
        return role is not None and role in _ROLES and not is_system_role(role)

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


def _added(node: _Append) -> tuple[cst.BaseExpression, cst.BaseExpression, bool] | None:
    """What an append adds to what: (list, item, True) for `x.append(item)`, (list, items,
    False) for `x.extend(items)` and `x += items`; None for other shapes."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and len(node.args) == 1:
        return node.func.value, node.args[0].value, node.func.attr.value == "append"
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
        return node.target, node.value, False
    return None


def _elements(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The items of a list or tuple literal (None for anything else)."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    return [element.value for element in node.elements if isinstance(element, cst.Element)]


def _role(node: cst.BaseExpression, analysis: ValueShapes) -> str | None:
    """The role a message spells in place: a dict's `role`, a call's `role=` or first
    argument, a tuple's first item (None when not spelled there)."""
    if isinstance(node, cst.Dict):
        for element in node.elements:
            if isinstance(element, cst.DictElement) and string_value(element.key) == "role":
                return role_spelling(element.value)
        return None
    if isinstance(node, cst.Call):
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "role":
                return role_spelling(arg.value)
        first = node.args[0] if node.args else None
        if first is not None and first.keyword is None and not first.star:
            return role_spelling(first.value)
        return None
    if isinstance(node, cst.Tuple) and node.elements:
        first_item = node.elements[0]
        return role_spelling(first_item.value) if isinstance(first_item, cst.Element) else None
    return None


def _chat_role(value: cst.BaseExpression) -> bool:
    """Whether a dict's `role` may be a chat message's: a literal naming a message role (in
    any case), or a value not spelled in place. A `{"role": "reviewer", ...}` record is not
    a message."""
    text = string_value(value)
    return text is None or text.lower() in _ROLES


def _is_message(node: cst.BaseExpression, analysis: ValueShapes) -> bool:
    """A dict with a `role`, a message class call or `dict(role=...)`, a class called with
    a role by value (`Entry("system", text)`), a `(role, text)` tuple."""
    if isinstance(node, cst.Dict):
        return any(
            isinstance(element, cst.DictElement)
            and string_value(element.key) == "role"
            and _chat_role(element.value)
            for element in node.elements
        )
    if isinstance(node, cst.Call):
        names = analysis.qualified_names(node.func)
        if isinstance(node.func, cst.Name):
            names |= {node.func.value}
        elif isinstance(node.func, cst.Attribute):
            names |= {node.func.attr.value}
        keywords = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        if is_message_class(names) or ("builtins.dict" in names and "role" in keywords):
            return True
        return len(node.args) >= 2 and _role(node, analysis) in _ROLES
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
