"""Where a value comes from: volatile, per-request, or non-deterministically ordered.

`TaintAnalysis.taints(expr, env)` follows an expression through f-strings,
`.format`, `%`, `+`, `"".join`, templates rendered (only the values bound to
placeholders the template's text reads, where the text is known), containers, local and module-level
assignments (via libcst's `ScopeProvider`), `self.<attr>` assignments, the
functions and methods of the same module and, with `imports`, the functions,
static and class methods and constants imported from the project's other
modules (`project_imports`), and returns every `Taint` that
reaches it:

- `volatile`: a call from the volatile catalog (clock, uuid, random, pid...),
  matched against every qualified name the callee may have (aliases and
  conditional imports included; no single name is privileged). Its
  `period` says when the value changes: `"request"` (computed on each call),
  `"day"` (a date, or a clock formatted to the day) or `"process"`
  (evaluated once per process: in a module or class body or a default
  argument at import, in a function called at import, in a cached function
  without parameters; or a per-process value such as the pid or hostname);
- `identity`: a parameter, attribute or key named like a user, tenant or
  session id, name or email;
- `request`: an unbound parameter of `root`, the function that builds the
  cached segment (data that arrives with each request);
- `derived`: what a call the analysis cannot see into (an installed package, a
  method of an object it cannot resolve) returns when it is given such a
  parameter: `retriever.search(query)`, `builder.build_context(query=query)`.
  Request data too, kept apart because its shape is not known;
- `json`: `json.dumps` without `sort_keys=True`;
- `set`: iteration over a set or frozenset, or `str()` of one.

Calls between functions use one summary per function: the taints its
return values carry, with each parameter that flows into them kept as a
placeholder. A call site substitutes its arguments for the placeholders, so
every function is analysed once however often it is called, and every
expression's (context-free) taints are computed once: the cost stays linear
in the module. Recursion is cut where a function (or a value) reaches
itself; that back edge contributes nothing.

Calls into installed packages and modules outside the project are opaque (no
taint): the analysis prefers silence to guessing. From the project's other
modules only volatile taints are carried, each re-anchored on the call or
name of this module with a `Via` saying where it is computed. The analysis
is pure: it reads the modules and their metadata and never changes them.

`TaintAnalysis` extends the module's other analyses (`bindings`: what names
and calls refer to; `shapes`: what a value is built from; `sets`: whether a
value is a set; `template_inputs`: which values a template rendered reads), so one object per module answers every question the rules
ask, with one cache of qualified names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import libcst as cst
from libcst.metadata import BuiltinAssignment, ImportAssignment, Scope

from ..catalog import (
    STABLE_ROOTS,
    STRING_METHODS,
    TRANSPARENT_FUNCTIONS,
    UNSORTED_JSON_FUNCTIONS,
    is_configuration_name,
    is_identity_name,
    is_message_class,
    is_volatile_callable,
    volatile_period,
)
from .bindings import Env
from .module_index import ModuleIndex
from .sets import SET_BUILDERS, SetValues
from .syntax import (
    FunctionNode,
    all_params,
    children,
    dotted_parts,
    read_names,
    spellings,
    string_value,
    target_names,
)
from .template_inputs import TemplateInputs

__all__ = [
    "PERIODS",
    "ImportedTaints",
    "Taint",
    "TaintAnalysis",
    "Via",
    "date_only_format",
]

# When a volatile value changes, most frequent first.
PERIODS = ("request", "step", "process", "day")

_MAX_ACTIVE = 100  # values being followed at once: deeper chains are cut, not crashed on
# Random picks among options: over a few fixed options each variant caches on its own.
_RANDOM_PICKS = frozenset({"random.choice", "random.choices", "random.sample", "secrets.choice"})
_CONSTANTS = (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)
_ORDER_EXPOSING = frozenset({"builtins.list", "builtins.tuple", "builtins.enumerate"})
_STRINGIFY = frozenset({"builtins.str", "builtins.repr"})
# Fields of a datetime that change once a day at most, or never (time zone).
_CLOCK_FIELDS_PER_DAY = frozenset({"year", "month", "day", "weekday", "isoweekday"})
_CLOCK_FIELDS_STABLE = frozenset({"tzinfo", "tzname", "utcoffset"})
# Taints of a subscript's key that do not reach the value it selects.
_KEY_ONLY = frozenset({"identity", "volatile"})
# Dict views: iterating one exposes the dict's insertion order.
_DICT_VIEWS = frozenset({"keys", "values", "items"})
# Decorators that make reading a method as an attribute call it.
_PROPERTY_DECORATORS = frozenset({"property", "cached_property"})

# Placeholders in function summaries (never returned by `taints`): the value of
# a parameter; the same with its order hidden by `sorted`; iteration over a
# parameter (a `set` taint when the argument is a set).
_PARAM = "param"
_PARAM_SORTED = "param-sorted"
_PARAM_SET = "param-set"
# what an opaque call returns when given a parameter (`derived` where it is request data)
_PARAM_DERIVED = "param-derived"
_PLACEHOLDERS = frozenset({_PARAM, _PARAM_SORTED, _PARAM_SET, _PARAM_DERIVED})
_REQUEST_KINDS = frozenset({"request", "derived"})

# strftime directives that change more often than once a day.
_SUB_DAY_DIRECTIVES = frozenset("HIMSfpXcTRrksl")
_DIRECTIVE = re.compile(r"%[-_0^#]?([A-Za-z])")


@dataclass(frozen=True)
class Taint:
    """One reason an expression's value breaks caching.

    `origin` is the node to report (and, for `json` and `set`, the node a fix
    edits: the `json.dumps` call, or the set expression to wrap in `sorted`).
    `period` (volatile taints only) is one of `PERIODS`; a `"step"` value changes
    on every pass of `loop` (a counter or accumulator), which matters only to a
    prompt built inside that loop. `param` is set only
    on the placeholders of function summaries, which `taints` never returns.
    `unplaced`: the value is given to a template whose text (or the placeholder it
    fills) the module does not show, so where it lands in the text is unknown.
    `once`: what evaluates a value computed in a function body once per process (the
    call of that function made at import, or the cached function without parameters
    it is computed in); None otherwise.
    """

    kind: str
    origin: cst.CSTNode
    detail: str
    period: str | None = None
    param: cst.Param | None = None
    via: Via | None = None
    loop: cst.For | cst.While | None = None
    unplaced: bool = False
    once: cst.Call | cst.FunctionDef | None = None


@dataclass(frozen=True)
class Via:
    """Where a taint from another module of the tree is computed.

    The taint's `origin` is the call or name of the linted module it arrives
    through (`name`, as spelled there); `path` and `line` place the value in
    the other file; `at_import` says it is computed once, when that module is
    loaded; `cached` that it is computed once per process by a cached function
    without parameters there.
    """

    name: str
    path: str
    line: int
    at_import: bool
    cached: bool = False

    def describe(self, detail: str) -> str:
        """`get_today_str()` (utils.py:12) returns `datetime.datetime.now()`."""
        verb = "returns" if self.name.endswith("()") else "holds"
        return f"`{self.name}` ({self.path}:{self.line}) {verb} {detail}"


def date_only_format(text: str) -> bool:
    """Whether a strftime format shows the date and nothing that changes within a day."""
    directives = _DIRECTIVE.findall(text)
    return bool(directives) and not any(d in _SUB_DAY_DIRECTIVES for d in directives)


def _is_stable_root(parts: list[str]) -> bool:
    return parts[0] in STABLE_ROOTS or ".".join(parts[:2]) in STABLE_ROOTS


def _per_day(taints: Iterable[Taint]) -> set[Taint]:
    """A clock formatted to the day changes once a day, not per request."""
    return {
        replace(t, period="day") if t.kind == "volatile" and t.period == "request" else t
        for t in taints
    }


def _evaluated_at_import(taints: Iterable[Taint], call: cst.Call) -> set[Taint]:
    """A function called at import runs once per process: the clocks and ids it reads
    change per process start, not per request (a loop's counter still changes per pass)."""
    return {
        replace(t, period="process", once=call)
        if t.kind == "volatile" and t.period in ("request", "day")
        else t
        for t in taints
    }


def _unplaced(taints: Iterable[Taint]) -> set[Taint]:
    """Values given to a template whose text, or whose placeholder for them, is not known:
    where they land in the text is not known."""
    return {
        t
        if t.unplaced or t.kind in ("json", "set", _PARAM_SET)
        else replace(
            t,
            unplaced=True,
            detail=t.detail
            if t.kind in _PLACEHOLDERS
            else f"{t.detail} (given to a template rendered at run time: its place in the "
            "prompt is not known)",
        )
        for t in taints
    }


def _items_at(
    values: Sequence[cst.BaseExpression], position: int
) -> list[cst.BaseExpression] | None:
    """Item `position` of each of `values` when every one is a tuple or list written out
    with that item and no `*spread` (None otherwise, or when there are no values)."""
    items: list[cst.BaseExpression] = []
    for value in values:
        elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
        if (
            elements is None
            or position >= len(elements)
            or any(isinstance(element, cst.StarredElement) for element in elements)
        ):
            return None
        items.append(elements[position].value)
    return items or None


def _derived_from(taints: Iterable[Taint], origin: cst.CSTNode, detail: str) -> set[Taint]:
    """What an opaque call returns when given values with these (unresolved) taints,
    `origin` and `detail` describing it: a placeholder for each parameter a value comes
    from, which is request data where that parameter is; nothing else."""
    return {
        Taint(_PARAM_DERIVED, origin, detail, param=t.param)
        for t in taints
        if t.kind in (_PARAM, _PARAM_SORTED, _PARAM_DERIVED) and t.param is not None
    }


def _item_names(loop: cst.For) -> set[str]:
    """The loop's target names and the names its body binds from them (`inst =
    registry.create(name)`, `if inst := make(name):`): what holds the item."""
    names = target_names(loop.target)
    bindings: list[tuple[cst.BaseAssignTargetExpression | cst.BaseExpression, cst.CSTNode]] = []
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign):
            bindings += [(target.target, node.value) for target in node.targets]
        elif (
            isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr))
            and node.value is not None
        ):
            bindings.append((node.target, node.value))
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(children(node))
    grown = True
    while grown:
        grown = False
        for target, value in bindings:
            bound = target_names(target)
            if not bound <= names and names & {name.value for name in read_names(value)}:
                names |= bound
                grown = True
    return names


def _sorted(taint: Taint) -> Taint:
    return replace(taint, kind=_PARAM_SORTED) if taint.kind == _PARAM else taint


def _without_order(taints: Iterable[Taint]) -> set[Taint]:
    """What `sorted(...)` (or a set built from the value) keeps: everything but order."""
    return {_sorted(t) for t in taints if t.kind not in ("set", _PARAM_SET)}


class ImportedTaints(Protocol):
    """What `TaintAnalysis` asks about names imported from the project's other modules
    (`project_imports.ProjectImports` answers it)."""

    def call_taints(
        self, analysis: TaintAnalysis, call: cst.Call, position: int | None = None
    ) -> set[Taint] | None:
        """Taints of `call` when it calls a function of another project module (of item
        `position` of the tuple it returns, when given), else None."""
        ...

    def value_taints(
        self, analysis: TaintAnalysis, node: cst.Name | cst.Attribute
    ) -> set[Taint] | None:
        """Taints of `node` when it reads a constant of another project module, else None."""
        ...

    def value_text(self, analysis: TaintAnalysis, node: cst.Name) -> str | None:
        """The text of the constant `node` imports from another project module, when known."""
        ...


class TaintAnalysis(SetValues, TemplateInputs):
    """Taint queries over one module (see the module docstring).

    `scopes` is the resolved `ScopeProvider` mapping of the same module
    object the index was built from. `extra_volatile` extends the volatile
    catalog. `imports` follows functions and constants imported from other
    modules of the tree (None: such imports are opaque).
    """

    def __init__(
        self,
        index: ModuleIndex,
        scopes: Mapping[cst.CSTNode, Scope | None],
        extra_volatile: frozenset[str] = frozenset(),
        imports: ImportedTaints | None = None,
    ) -> None:
        super().__init__(index, scopes)
        self.extra_volatile = extra_volatile
        self.imports = imports
        self._raw_cache: dict[int, frozenset[Taint]] = {}
        self._active: set[int] = set()
        self._item_names: dict[int, set[str]] = {}  # a `for` loop's id -> `_item_names`
        # (function, tuple item or None) -> its summary
        self._summaries: dict[tuple[int, int | None], frozenset[Taint]] = {}
        self._summarising: set[tuple[int, int | None]] = set()

    def module_path(self) -> Path | None:
        """The linted module's file, where the project's imports are followed (prompt files
        are read relative to it)."""
        path = getattr(self.imports, "path", None)
        return path if isinstance(path, Path) else None

    def imported_text(self, name: cst.Name) -> str | None:
        return self.imports.value_text(self, name) if self.imports is not None else None

    def taints(self, node: cst.CSTNode, env: Env) -> frozenset[Taint]:
        """Every taint reaching the value of `node` (an expression) in `env`."""
        if not isinstance(node, cst.BaseExpression):
            return frozenset()
        return frozenset(self._in_env(self._raw(node), env))

    def summary(self, function: FunctionNode, position: int | None = None) -> frozenset[Taint]:
        """The taints of `function`'s return values, its parameters as placeholders; with
        `position`, of item `position` of the tuple it returns, when every return statement
        writes a tuple with that item (`return data, outputs`; else of the whole values)."""
        key = (id(function), position)
        cached = self._summaries.get(key)
        if cached is not None:
            return cached
        if key in self._summarising:
            return frozenset()
        returned = self.index.returns.get(id(function), [])
        if position is not None:
            returned = _items_at(returned, position) or returned
        self._summarising.add(key)
        try:
            result = frozenset(self._union(returned))
        finally:
            self._summarising.discard(key)
        self._summaries[key] = result
        return result

    def carries(self, node: cst.BaseExpression, kinds: frozenset[str]) -> bool:
        """Whether a taint of one of `kinds` reaches `node` in any context (with "set",
        also whether `node` is a set: its order shows when a callee iterates over it)."""
        return any(t.kind in kinds for t in self._raw(node)) or (
            "set" in kinds and self.is_set(node, Env(None))
        )

    def _in_env(self, raw: Iterable[Taint], env: Env) -> set[Taint]:
        """Resolve placeholders: bound parameters to their arguments, `root`'s to request data,
        except a parameter named as settings or as the prompt's own text
        (`catalog.is_configuration_name`): configuration, whoever calls."""
        result: set[Taint] = set()
        for taint in raw:
            if taint.kind not in _PLACEHOLDERS or taint.param is None:
                result.add(taint)
                continue
            settings = is_configuration_name(taint.param.name.value)
            if settings and taint.kind == _PARAM_DERIVED:
                continue  # what `Settings.from_config(config)` returns is configuration too
            bound = env.bindings.get(id(taint.param))
            if bound is not None:
                argument, caller = bound
                if taint.kind == _PARAM_DERIVED:
                    if any(t.kind in _REQUEST_KINDS for t in self.taints(argument, caller)):
                        result.add(replace(taint, kind="derived", param=None))
                    continue
                if taint.kind == _PARAM_SET:
                    if self.is_set(argument, caller):
                        result.add(Taint("set", argument, taint.detail))
                    continue
                taints = self.taints(argument, caller)
                found = _without_order(taints) if taint.kind == _PARAM_SORTED else set(taints)
                result |= _unplaced(found) if taint.unplaced else found
            elif (
                taint.kind != _PARAM_SET
                and not settings  # `config`, `system_prompt`: not a request's data
                and env.root is not None
                and self.index.param_function.get(id(taint.param)) is env.root
            ):
                kind = "derived" if taint.kind == _PARAM_DERIVED else "request"
                result.add(Taint(kind, taint.origin, taint.detail))
        return result

    def _raw(self, node: cst.BaseExpression) -> frozenset[Taint]:
        key = id(node)
        cached = self._raw_cache.get(key)
        if cached is not None:
            return cached
        if key in self._active or len(self._active) > _MAX_ACTIVE:
            return frozenset()
        self._active.add(key)
        try:
            result = frozenset(self._compute(node))
        finally:
            self._active.discard(key)
        self._raw_cache[key] = result
        return result

    def _union(self, nodes: Iterable[cst.CSTNode]) -> set[Taint]:
        result: set[Taint] = set()
        for node in nodes:
            if isinstance(node, cst.BaseExpression):
                result |= self._raw(node)
        return result

    def _compute(self, node: cst.BaseExpression) -> set[Taint]:
        if isinstance(node, cst.Name):
            return self._name(node)
        if isinstance(node, cst.Attribute):
            return self._attribute(node)
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.FormattedString):
            return self._formatted(node)
        if isinstance(node, (cst.ConcatenatedString, cst.BinaryOperation, cst.BooleanOperation)):
            return self._union([node.left, node.right])
        if isinstance(node, cst.UnaryOperation):
            return set(self._raw(node.expression))
        if isinstance(node, cst.IfExp):
            return self._union([node.body, node.orelse])
        if isinstance(node, cst.Subscript):
            return self._subscript(node)
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            return self._union([e.value for e in node.elements])
        if isinstance(node, cst.Dict):
            values: list[cst.CSTNode] = []
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    values += [element.key, element.value]
                else:
                    values.append(element.value)
            return self._union(values)
        # Comprehension targets resolve (through the index) to their iterables,
        # so the element expressions carry the iteration's taints; the result's order
        # is the iteration's whatever the element makes of the item (`spec(name)`).
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return set(self._raw(node.elt)) | self._iteration_order(node, [node.elt])
        if isinstance(node, cst.DictComp):
            return self._union([node.key, node.value]) | self._iteration_order(
                node, [node.key, node.value]
            )
        if isinstance(node, cst.SetComp):
            return _without_order(self._raw(node.elt))
        if isinstance(node, (cst.Await, cst.NamedExpr)):
            inner = node.expression if isinstance(node, cst.Await) else node.value
            return set(self._raw(inner))
        return set()

    def _formatted(self, node: cst.FormattedString) -> set[Taint]:
        result: set[Taint] = set()
        for part in node.parts:
            if not isinstance(part, cst.FormattedStringExpression):
                continue
            found = self._raw(part.expression)
            spec = part.format_spec
            if spec and date_only_format(
                "".join(p.value for p in spec if isinstance(p, cst.FormattedStringText))
            ):
                found = frozenset(_per_day(found))
            result |= found
        return result

    def _name(self, node: cst.Name) -> set[Taint]:
        result: set[Taint] = set()
        for assignment in self.assignments(node):
            if isinstance(assignment, BuiltinAssignment):
                continue
            if isinstance(assignment, ImportAssignment):
                if self.imports is not None:
                    result |= self.imports.value_taints(self, node) or set()
                continue
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                result |= self._param(target, node)
            elif isinstance(target, cst.Name):
                loop = self.index.loop_counters.get(id(target))
                if loop is not None:
                    detail = f"`{node.value}`, which the loop changes on every pass,"
                    result.add(Taint("volatile", node, detail, "step", loop=loop))
                for source in self.index.values.get(id(target), []):
                    if source.value is None:
                        continue
                    found = (
                        self._unpacked(source.value, source.position)
                        if source.kind == "unpack"
                        else self._raw(source.value)
                    )
                    result |= found
                    if source.kind == "iter":
                        result |= self._ordered(source.value, "iterates over a set")
                    if (
                        is_identity_name([node.value])
                        and any(t.kind == _PARAM for t in found)
                        and not any(t.kind == "identity" for t in found)
                    ):
                        # `customer_name = db.lookup(ctx.deps.customer_id)`: named like
                        # identity and computed from the function's parameters
                        result.add(Taint("identity", node, f"`{node.value}`"))
                for access in getattr(assignment, "references", ()):
                    for mutation in self.index.mutations.get(id(access.node), []):
                        appended = [arg.value for arg in mutation.call.args]
                        result |= self._union(appended) | self._appended_order(appended)
                    for _key, value, _key_node in self.index.item_writes.get(id(access.node), []):
                        result |= self._raw(value)
        return result

    def _unpacked(self, value: cst.BaseExpression, position: int | None) -> frozenset[Taint]:
        """Item `position` of `value` unpacked into names: that item when the value is a
        tuple or list the module shows, else the value's taints but no one item's identity."""
        found: set[Taint] = set()
        for resolved, _env in self.resolve(value, Env(None)):
            items = _items_at([resolved], position) if position is not None else None
            returned = (
                self._returned_item(resolved, position)
                if isinstance(resolved, cst.Call) and position is not None
                else None
            )
            if items is not None:
                found |= self._raw(items[0])
            elif returned is not None:
                found |= returned
            else:
                found |= {t for t in self._raw(resolved) if t.kind != "identity"}
        return frozenset(found)

    def _returned_item(self, call: cst.Call, position: int) -> set[Taint] | None:
        """Item `position` of the tuple a function of the project returns (`data, outputs =
        prepare(task, outputs)`): what the call gives that item, not the other items
        (None: not such a call, or a function not every `return` of which writes out
        that item)."""
        functions = self.functions_called(call)
        if functions:
            if not all(self.returns_item(function, position) for function, _ in functions):
                return None
            return self._local_call(call, functions, position)
        if self.imports is None:
            return None
        return self.imports.call_taints(self, call, position)

    def _param(self, param: cst.Param, use: cst.Name) -> set[Taint]:
        name = param.name.value
        if name in ("self", "cls"):
            return set()
        result = {Taint(_PARAM, use, f"parameter `{name}`", param=param)}
        if is_identity_name([name]):
            result.add(Taint("identity", use, f"parameter `{name}`"))
        return result

    def _iteration_order(
        self, node: cst.ListComp | cst.GeneratorExp | cst.DictComp, items: list[cst.CSTNode]
    ) -> set[Taint]:
        """The set order a comprehension's result takes from each `for` clause whose
        item `items` (its element, or key and value) use: `[spec(n) for n in names]`
        is in `names`' order; `[0 for _ in names]` in none."""
        used = {name.value for item in items for name in read_names(item)}
        result: set[Taint] = set()
        clause: cst.CompFor | None = node.for_in
        while clause is not None:
            if used & target_names(clause.target):
                result |= self._ordered(clause.iter, "iterates over a set")
            clause = clause.inner_for_in
        return result

    def _appended_order(self, values: list[cst.BaseExpression]) -> set[Taint]:
        """The set order a list takes from the loops its items are appended in: a loop
        over a set whose item the appended value uses (`for n in set(names):
        tools.append(registry.create(n))`), whatever the value makes of it."""
        result: set[Taint] = set()
        for value in values:
            loops = self.index.appended_in.get(id(value), ())
            if not loops:
                continue
            used = {name.value for name in read_names(value)}
            for loop in loops:
                names = self._item_names.get(id(loop))
                if names is None:
                    names = self._item_names[id(loop)] = _item_names(loop)
                if used & names:
                    result |= self._ordered(loop.iter, "iterates over a set")
        return result

    def _ordered(self, node: cst.BaseExpression, detail: str) -> set[Taint]:
        """A `set` taint when iterating `node` exposes set order (or a placeholder)."""
        if self.is_set(node, Env(None)):
            return {Taint("set", node, detail)}
        if isinstance(node, cst.Name):
            for assignment in self.assignments(node):
                target = getattr(assignment, "node", None)
                if isinstance(target, cst.Param) and target.name.value not in ("self", "cls"):
                    return {Taint(_PARAM_SET, node, detail, param=target)}
        return set()

    def _attribute(self, node: cst.Attribute) -> set[Taint]:
        parts = dotted_parts(node)
        if parts is not None and _is_stable_root(parts):
            return set()
        owner = self._owner_class(node.value)
        if owner is not None:
            return self._class_attribute(owner, node)
        named = self.named_class(node.value)
        if named is not None:
            # `Config.STARTED`: what the class body assigns (evaluated at import), not
            # what a method stores on an instance
            entries = self.index.class_attrs.get(id(named), {}).get(node.attr.value, [])
            return self._union([value for value, function in entries if function is None])
        imported = self.imports.value_taints(self, node) if self.imports is not None else None
        if imported is not None:
            return imported
        if is_configuration_name(node.attr.value):
            # `req.system_prompt`, `agent.instructions`, `job.config`: the prompt's own text
            # or settings the object holds, not the request the object came with
            return set()
        result = set(self._raw(node.value))
        if node.attr.value in _CLOCK_FIELDS_PER_DAY:
            result = _per_day(result)
        elif node.attr.value in _CLOCK_FIELDS_STABLE:
            result = {t for t in result if t.kind != "volatile"}
        if parts is not None and is_identity_name(parts):
            # one finding for `user.email`, not another for `user`
            result = {t for t in result if t.kind != "identity"}
            result.add(Taint("identity", node, f"`{'.'.join(parts)}`"))
        return result

    def _class_attribute(self, owner: cst.ClassDef, node: cst.Attribute) -> set[Taint]:
        name = node.attr.value
        entries = self.index.class_attrs.get(id(owner), {}).get(name, [])
        method = self.index.class_methods.get(id(owner), {}).get(name)
        if method is not None and not entries:
            if not _is_property(method):
                # `tools=[self.search]`: the bound method itself (its name, docstring and
                # signature), not what it returns when the model calls it
                return set()
            # a property: its return value, its own parameters unknown
            return {t for t in self.summary(method) if not self._param_of(t, method)}
        values = [value for value, _ in entries]
        result = self._union(values) | self._appended_order(values)
        counter = self.index.counted_attrs.get(id(owner), {}).get(name)
        if counter is not None:
            detail = f"`self.{name}`, which `{counter.name.value}` counts on every call,"
            result.add(Taint("volatile", node, detail, "request"))
        literal_only = bool(entries) and all(
            isinstance(value, (cst.SimpleString, cst.Integer, cst.Float)) for value, _ in entries
        )
        if is_identity_name([name]) and not literal_only:
            # reported where it enters the prompt, not where __init__ stored it
            result = {t for t in result if t.kind != "identity"}
            result.add(Taint("identity", node, f"`self.{name}`"))
        return result

    def _param_of(self, taint: Taint, function: FunctionNode) -> bool:
        return (
            taint.kind in _PLACEHOLDERS
            and taint.param is not None
            and self.index.param_function.get(id(taint.param)) is function
        )

    def _subscript(self, node: cst.Subscript) -> set[Taint]:
        parts = dotted_parts(node.value)
        if parts is not None and _is_stable_root(parts):
            return set()
        result = set(self._raw(node.value))
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                # the key selects one of the values the container holds: a user id or a
                # clock used as a key is not in the value (`profiles[user_id]`,
                # `cache[session_key]`); what the container holds carries its own taints
                result |= {t for t in self._raw(element.slice.value) if t.kind not in _KEY_ONLY}
                key = string_value(element.slice.value)
                if key is not None and is_identity_name([*(parts or []), key]):
                    result.add(Taint("identity", node, f"key {key!r}"))
        return result

    def _call(self, node: cst.Call) -> set[Taint]:
        names = self.qualified_names(node.func)
        args = [arg.value for arg in node.args]
        first = args[0] if args else None
        if names & _RANDOM_PICKS and first is not None and self._fixed_options(first):
            return set()
        for name in sorted(names):
            if is_volatile_callable(name, self.extra_volatile):
                cached = self.cached_once(node)
                period = "process" if cached is not None else self._period(name, first, node)
                return {Taint("volatile", node, f"`{name}()`", period, once=cached)}
        if names & UNSORTED_JSON_FUNCTIONS:
            result = self._union(args)
            if not _sorts_keys(node):
                result.add(Taint("json", node, "`json.dumps` without `sort_keys=True`"))
            return result
        if "builtins.sorted" in names or names & SET_BUILDERS:
            return _without_order(self._union(args))
        if names & (_STRINGIFY | _ORDER_EXPOSING) and first is not None:
            return self._union(args) | self._ordered(
                first, "turns a set into ordered text or a sequence"
            )
        functions = self.functions_called(node)
        if functions:
            return self._local_call(node, functions)
        imported = self.imports.call_taints(self, node) if self.imports is not None else None
        if imported is not None:
            return imported
        func = node.func
        if isinstance(func, cst.Attribute):
            return self._method(node, func, args, first)
        if names & TRANSPARENT_FUNCTIONS or is_message_class(spellings(names, func)):
            return self._union(args)
        if "builtins.len" in names and first is not None:
            return self._grown_count(node, first)
        if any(name.startswith("builtins.") for name in names):
            return set()  # `range(n)`, `len(text)`: a count, not the request's content
        return self._opaque(node, args)

    def _grown_count(self, call: cst.Call, counted: cst.BaseExpression) -> set[Taint]:
        """`len(self.steps)` where a method appends to `self.steps` on every call: a count
        of those calls, changing on every request that method sends; any other `len` is a
        count, not the request's content."""
        owner = (
            self._owner_class(counted.value)
            if isinstance(counted, cst.Attribute) and isinstance(counted.value, cst.Name)
            else None
        )
        if owner is None or not isinstance(counted, cst.Attribute):
            return set()
        method = self.index.grown_attrs.get(id(owner), {}).get(counted.attr.value)
        if method is None:
            return set()
        detail = (
            f"`len(self.{counted.attr.value})`, which `{method.name.value}` grows on every call,"
        )
        return {Taint("volatile", call, detail, "request")}

    def _opaque(self, call: cst.Call, args: list[cst.BaseExpression]) -> set[Taint]:
        """A call the analysis does not see into: what it returns is derived from the
        request when an argument is (`derived`); a clock in a dict given by keyword (a
        prompt store's `get_prompt(name, inputs={"date": today})`) is given to a text it
        renders, at a place not known; nothing else of the arguments is known to reach
        it (a clock given by keyword itself is an object's metadata,
        `Message(created_at=now)`; a user's id is a lookup's key,
        `db.customer_name(id=user_id)` returns the name, not the id; what a model is
        asked, `llm.invoke({"now": ...})`, is not in its answer)."""
        callee = dotted_parts(call.func)
        name = ".".join(callee) if callee else "a call"
        inputs = [
            arg.value
            for arg in call.args
            if arg.keyword is not None and isinstance(arg.value, cst.Dict)
        ]
        given = {t for t in self._union(inputs) if t.kind == "volatile"}
        derived = _derived_from(self._union(args), call, f"what `{name}(...)` returns")
        return derived | _unplaced(given)

    def _fixed_options(self, node: cst.BaseExpression) -> bool:
        """Whether `node` is a few fixed options: a literal list or tuple of constants
        (or a name bound only to one, never mutated), or `range(len(x))`, an index
        into one collection."""
        if isinstance(node, cst.Call) and "builtins.list" in self.qualified_names(node.func):
            return len(node.args) == 1 and self._fixed_options(node.args[0].value)
        if isinstance(node, cst.Call) and "builtins.range" in self.qualified_names(node.func):
            inner = node.args[0].value if len(node.args) == 1 else None
            return isinstance(inner, cst.Call) and "builtins.len" in self.qualified_names(
                inner.func
            )
        if isinstance(node, cst.Name):
            for assignment in self.assignments(node):
                for access in getattr(assignment, "references", ()):
                    if self.index.mutations.get(id(access.node)):
                        return False
            values = [value for value, _env in self.resolve(node, Env(None))]
            return bool(values) and all(
                value is not node and self._fixed_options(value) for value in values
            )
        return isinstance(node, (cst.List, cst.Tuple)) and all(
            isinstance(item, cst.Element) and isinstance(item.value, _CONSTANTS)
            for item in node.elements
        )

    def _method(
        self,
        call: cst.Call,
        func: cst.Attribute,
        args: list[cst.BaseExpression],
        first: cst.BaseExpression | None,
    ) -> set[Taint]:
        method = func.attr.value
        result = set(self._raw(func.value))
        key = string_value(first) if method == "get" else None
        receiver = dotted_parts(func.value) or []
        if (
            key is not None
            and not (receiver and _is_stable_root(receiver))
            and is_identity_name([*receiver, key])
        ):
            result.add(Taint("identity", func, f"key {key!r}"))
        rendered = self.rendered_values(call, Env(None))
        if rendered is not None:
            # a template rendered: the values its placeholders read (all, where unknown)
            values, placed = rendered
            found = self._union(values)
            result |= found if placed else _unplaced(found)
        elif method in STRING_METHODS:
            result |= self._union(args)
            if method == "join" and first is not None:
                result |= self._ordered(first, "joins a set")
        elif method in _DICT_VIEWS and self._set_keyed(func.value):
            result.add(Taint("set", func.value, "iterates over a dict whose keys come from a set"))
        elif method != "get":  # a lookup selects what the mapping holds, whatever its key
            result |= self._opaque(call, args)
        if method == "date" or (
            method == "strftime"
            and isinstance(first, cst.BaseExpression)
            and date_only_format(string_value(first) or "%H")
        ):
            result = _per_day(result)
        return result

    def _set_keyed(self, node: cst.BaseExpression) -> bool:
        """Whether `node` is a dict built with its keys in a set's order."""
        for value, _ in self.resolve(node, Env(None)):
            if isinstance(value, cst.DictComp):
                if self.is_set(value.for_in.iter, Env(None)):
                    return True
            elif (
                isinstance(value, cst.Call)
                and "builtins.dict.fromkeys" in self.qualified_names(value.func)
                and value.args
                and self.is_set(value.args[0].value, Env(None))
            ):
                return True
        return False

    def _local_call(
        self,
        call: cst.Call,
        functions: list[tuple[FunctionNode, bool]],
        position: int | None = None,
    ) -> set[Taint]:
        """The taints of a call to the module's functions (of item `position` of the tuple
        they return, when given): their summaries, arguments substituted."""
        result: set[Taint] = set()
        for function, method in functions:
            passed, own = self.through(self, function, call, method, position)
            result |= passed | own
        once = self.at_import(call) and id(call) not in self.index.looped_at_import
        return _evaluated_at_import(result, call) if once else result

    def returns_item(self, function: FunctionNode, position: int) -> bool:
        """Whether every `return` of `function` writes out a tuple with item `position`."""
        return _items_at(self.index.returns.get(id(function), []), position) is not None

    def through(
        self,
        owner: TaintAnalysis,
        function: FunctionNode,
        call: cst.Call,
        method: bool,
        position: int | None = None,
    ) -> tuple[set[Taint], set[Taint]]:
        """A call in this module to `function` of `owner`'s module (this one or another):
        the taints of the arguments that flow to its return values (to item `position` of
        the tuple it returns, when given), and the other taints of its summary (in
        `owner`'s module)."""
        arguments = self.arguments(function, call, method)
        gathered = _gathered(function, call, method)
        result: set[Taint] = set()
        own: set[Taint] = set()
        for taint in owner.summary(function, position):
            if not owner._param_of(taint, function) or taint.param is None:
                own.add(taint)
                continue
            argument = arguments.get(id(taint.param))
            if argument is None:
                # `*args` / `**inputs`: what the call gives them (`format_prompt(**inputs)`)
                extra = gathered.get(id(taint.param), [])
                if taint.kind != _PARAM_SET:
                    found = self._union(extra)
                    found = _without_order(found) if taint.kind == _PARAM_SORTED else found
                    result |= _unplaced(found) if taint.unplaced else found
                continue
            if taint.kind == _PARAM_SET:
                result |= self._ordered(argument, taint.detail)
            elif taint.kind == _PARAM_DERIVED:
                result |= _derived_from(self._raw(argument), taint.origin, taint.detail)
            else:
                found = (
                    _without_order(self._raw(argument))
                    if taint.kind == _PARAM_SORTED
                    else set(self._raw(argument))
                )
                result |= _unplaced(found) if taint.unplaced else found
        return result, own

    def _period(self, name: str, first: cst.BaseExpression | None, call: cst.Call) -> str:
        if self.at_import(call):
            return "process"
        period = volatile_period(name)
        if name.endswith(".strftime") and date_only_format(string_value(first) or "%H"):
            return "day"
        return period


def _gathered(function: FunctionNode, call: cst.Call, method: bool) -> dict[int, list[cst.CSTNode]]:
    """`id(Param)` of `function`'s `*args` and `**kwargs` to what `call` gives them: the
    positional arguments past the named ones and `*spread`s, the keywords no named
    parameter takes and `**mapping`s."""
    params = function.params
    named = {param.name.value for param in all_params(function)}
    positional = len(params.posonly_params) + len(params.params) - (1 if method else 0)
    found: dict[int, list[cst.CSTNode]] = {}
    if isinstance(params.star_kwarg, cst.Param):
        found[id(params.star_kwarg)] = [
            arg.value
            for arg in call.args
            if arg.star == "**" or (arg.keyword is not None and arg.keyword.value not in named)
        ]
    if isinstance(params.star_arg, cst.Param):
        plain = [arg for arg in call.args if arg.keyword is None and arg.star != "**"]
        found[id(params.star_arg)] = [
            arg.value for index, arg in enumerate(plain) if arg.star == "*" or index >= positional
        ]
    return found


def _is_property(function: cst.FunctionDef) -> bool:
    """Whether reading the method as an attribute runs it (`@property`, `@cached_property`)."""
    for decorator in function.decorators:
        parts = dotted_parts(decorator.decorator) or []
        if parts and parts[-1] in _PROPERTY_DECORATORS:
            return True
    return False


def _sorts_keys(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.star == "**":
            return True
        if arg.keyword is not None and arg.keyword.value == "sort_keys":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return False
