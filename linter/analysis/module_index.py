"""One pass over a parsed module that records what the rules look up later.

The index needs no metadata: it maps assignment targets to the values assigned,
parameters to their functions, functions to their `return` values, classes to
their methods and `self.<attr>` assignments, list mutations (`x.append(v)`) to
their receivers, and it collects candidate cached-segment sites (see
`cached_segments`) together with the function that encloses each. Keys are
`id(node)`: libcst nodes compare by identity and the module outlives the index.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from ..catalog import (
    CACHE_MARKER_KEYS,
    CONSTRUCTOR_METHODS,
    INSTRUCTION_PROVIDER_CONTEXTS,
    PROMPT_DECORATORS,
    PROMPT_ENTRY_POINTS,
    SYSTEM_MESSAGE_METHODS,
    SYSTEM_PROMPT_ATTRIBUTES,
    TOOL_BASE_CLASSES,
    TOOL_FIELDS,
    is_system_role,
    is_turn_role,
)
from .syntax import FunctionNode, dotted_parts, string_value, walk

__all__ = ["ModuleIndex", "Mutation", "SiteCandidate", "ValueSource", "role_spelling"]

_APPENDERS = frozenset({"append", "extend"})
_MUTATORS = frozenset({"append", "extend", "insert", "add", "update"})
_ORDERED_ADDERS = frozenset({"append", "extend", "insert"})  # a list's order is theirs
# Keys that make a dict a request payload (not a content block).
_PAYLOAD_KEYS = frozenset({"model", "messages", "max_tokens", "input"})
# Calls with one of these keywords are provider requests (or prefixkit prompts).
_REQUEST_KEYWORDS = frozenset({"messages", "system", "tools"})
# Last names of framework entry points (their qualified names are checked later).
_ENTRY_TAILS = frozenset(name for entry in PROMPT_ENTRY_POINTS for name in entry.names)
_ENTRY_KEYWORDS = frozenset(
    word for entry in PROMPT_ENTRY_POINTS for word in entry.keywords | entry.datetime_flags
)
_PROVIDER_CONTEXTS = frozenset(name for _, _, name in INSTRUCTION_PROVIDER_CONTEXTS)
# Keywords that carry a message's text.
_CONTENT_KEYWORDS = ("content", "text")


@dataclass(frozen=True)
class ValueSource:
    """A value bound to a name.

    `kind` is "assign", "iter" (loop target), "unpack" (item `position` of a
    value unpacked into several names, `a, b = f()`) or "unknown".
    """

    kind: str
    value: cst.BaseExpression | None
    annotation: cst.BaseExpression | None = None
    position: int | None = None


@dataclass(frozen=True)
class SiteCandidate:
    """A syntactic place where a cached segment may be built.

    `kind`: "keyword" (a `system=`-like argument, or `kwargs["system"] = ...`),
    "role" (content of a system/developer message: a dict, a `("system", ...)`
    tuple, a call with `role=`), "marker" (a dict, or a call with keywords,
    carrying a cache marker), "call" (arguments of a call that may be
    `SystemMessage(...)`, `Segment.static(...)`, a prompt template or a
    configured cached callable), "returns" (the return values of a function
    decorated with `@agent.system_prompt` / `@agent.instructions`), "entry"
    (a call that may be a framework entry point, `PROMPT_ENTRY_POINTS`),
    "provider" (a function returning `str` that takes an instruction provider's
    context, such as Google ADK's `ReadonlyContext`), "marker-write" (`receiver["cache_control"] = ...`: the receiver's other
    entries are cached), "content-write" (`receiver["content"] = node`: cached
    when the receiver is a system message) and "constructor" (a class called with
    an argument that may be a role, resolved by value later). A "keyword" site of
    a call keeps the call as `receiver`.
    """

    kind: str
    node: cst.CSTNode
    label: str
    function: FunctionNode | None
    receiver: cst.BaseExpression | None = None


@dataclass(frozen=True)
class Mutation:
    """`receiver.method(...)` with `method` one of append/extend/insert/add/update."""

    method: str
    call: cst.Call


@dataclass
class ModuleIndex:
    """Lookup tables for one module (build with `ModuleIndex.build`)."""

    values: dict[int, list[ValueSource]] = field(default_factory=dict)
    param_function: dict[int, FunctionNode] = field(default_factory=dict)
    returns: dict[int, list[cst.BaseExpression]] = field(default_factory=dict)
    function_class: dict[int, cst.ClassDef] = field(default_factory=dict)
    enclosing_function: dict[int, FunctionNode | None] = field(default_factory=dict)
    class_methods: dict[int, dict[str, cst.FunctionDef]] = field(default_factory=dict)
    class_attrs: dict[int, dict[str, list[tuple[cst.BaseExpression, FunctionNode | None]]]] = field(
        default_factory=dict
    )
    mutations: dict[int, list[Mutation]] = field(default_factory=dict)
    # a value appended to a list (`append`, `extend`, `insert`) -> the `for` loops of
    # its function around that call, innermost last
    appended_in: dict[int, tuple[cst.For, ...]] = field(default_factory=dict)
    item_writes: dict[int, list[tuple[str, cst.BaseExpression, cst.CSTNode]]] = field(
        default_factory=dict
    )
    sites: list[SiteCandidate] = field(default_factory=list)
    # names used inside a user or assistant message (a block placed in the latest turn)
    user_turn_names: set[int] = field(default_factory=set)
    # dicts and calls assigned to a single name: `block = {...}`
    assigned_to: dict[int, cst.Name] = field(default_factory=dict)
    # names a loop changes on every pass (`for i in range(...)`, the index of
    # `enumerate(...)`, `step += 1` in a loop body): the loop
    loop_counters: dict[int, cst.For | cst.While] = field(default_factory=dict)
    # attributes a method counts on every call (`self.step += 1` outside the constructor),
    # per class: the method
    counted_attrs: dict[int, dict[str, cst.FunctionDef]] = field(default_factory=dict)
    # list attributes a method grows on every call (`self.steps.append(x)` outside the
    # constructor), per class: the method (`len(self.steps)` counts its calls)
    grown_attrs: dict[int, dict[str, cst.FunctionDef]] = field(default_factory=dict)
    # calls of the module or class body made on each pass of a loop there (not once)
    looped_at_import: set[int] = field(default_factory=set)
    # a text built over statements (`system = RULES`, then `system += f"..."`,
    # `req.system_prompt += ...` in the same function): each of its values -> all of them
    # in source order, from the last plain assignment on
    text_chains: dict[int, list[cst.BaseExpression]] = field(default_factory=dict)
    # names and attributes bound to a system or developer role, by their last name: in the
    # module (`lead = "system"`, an enum's `SYS = "system"`) and in the project modules
    # it imports from (`ProjectImports.imported_roles`)
    bound_roles: dict[str, str] = field(default_factory=dict)

    @property
    def has_candidates(self) -> bool:
        """Whether anything in the module may build a cached segment or a request.

        Lists alone do not count: a static system entry that an ordering
        problem needs is itself a site (role dict, SystemMessage, Segment).
        """
        return bool(self.sites or self.requests)

    requests: list[tuple[cst.Call, FunctionNode | None]] = field(default_factory=list)
    lists: list[tuple[cst.List | cst.Tuple, FunctionNode | None]] = field(default_factory=list)
    # what the names bound by an import anywhere in the module stand for (`.llm.ask` for
    # `from .llm import ask`, `d.e` for `import d.e as f`, `a` for `import a.b`)
    imported: dict[str, list[str]] = field(default_factory=dict)
    # the dotted names called with arguments (`ask(...)`, `llm.ask(...)`), as parts, once
    # each in source order
    dotted_calls: dict[tuple[str, ...], None] = field(default_factory=dict)
    # every call, in source order, with the function (or lambda) whose body holds it
    calls: list[tuple[cst.Call, FunctionNode | None]] = field(default_factory=list)
    # in source order, what may add to the end of a history (`history_tail` reads them):
    # `a + b`, `a += b`, a list with a starred element, `x.append(m)` / `x.extend(ms)`
    appends: list[cst.BinaryOperation | cst.AugAssign | cst.List | cst.Call] = field(
        default_factory=list
    )

    @classmethod
    def build(
        cls,
        module: cst.Module,
        cached_keywords: frozenset[str],
        call_tails: frozenset[str],
        imported_roles: Mapping[str, str] | None = None,
    ) -> ModuleIndex:
        """Index `module` in one traversal.

        `cached_keywords` are argument names whose values are cached segments;
        `call_tails` are last names of callables that may build one
        (`SystemMessage`, `static`, ...): their qualified names are checked later;
        `imported_roles` are names the project modules it imports from bind to a system
        or developer role (`SYS` of `class Role(Enum): SYS = "system"`).
        """
        index = cls()
        indexer = _Indexer(index, cached_keywords, call_tails)
        indexer.role_names.update(imported_roles or {})
        walk(module, indexer)
        index.bound_roles = indexer.role_names
        # calls of the module's own classes whose fields give them a system role
        for call, function in indexer.class_calls:
            if isinstance(call.func, cst.Name) and call.func.value in indexer.role_classes:
                index.sites.append(SiteCandidate("call", call, "", function))
        # constructor calls given a name or attribute the module assigns a system role
        for call, function in indexer.role_calls:
            if _may_take_a_role("C", call, indexer.role_names):
                index.sites.append(SiteCandidate("constructor", call, "", function))
        return index


def _dict_key(element: cst.BaseDictElement) -> str | None:
    if isinstance(element, cst.DictElement):
        return string_value(element.key)
    return None


def _annotation_tail(annotation: cst.Annotation | None) -> str | None:
    """The last name of an annotation (`ReadonlyContext` for `adk.ReadonlyContext`)."""
    node = annotation.annotation if annotation is not None else None
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else None


def _is_provider(function: cst.FunctionDef) -> bool:
    """A function of an instruction provider's context returning `str` (or unannotated,
    taking the context first: not a method such as a toolset's `get_tools(self, ctx)`)."""
    params = [*function.params.posonly_params, *function.params.params]
    contexts = [_annotation_tail(param.annotation) in _PROVIDER_CONTEXTS for param in params]
    if function.returns is None:
        return bool(contexts) and contexts[0]
    return _annotation_tail(function.returns) == "str" and any(contexts)


def enum_member(node: cst.BaseExpression) -> cst.BaseExpression:
    """The enum member whose value `node` reads (`Role.SYSTEM` for `Role.SYSTEM.value`), else
    `node` itself: a member's value is what the member stands for."""
    if (
        isinstance(node, cst.Attribute)
        and node.attr.value == "value"
        and isinstance(node.value, cst.Attribute)
    ):
        return node.value
    return node


def role_spelling(node: cst.BaseExpression) -> str | None:
    """A role spelled in place: `"system"`, or an enum member named for it (`Kind.SYSTEM`,
    `Kind.SYSTEM.value`)."""
    node = enum_member(node)
    if isinstance(node, cst.Attribute):
        return node.attr.value.lower()
    text = string_value(node)
    return text.lower() if text is not None else None


def _may_take_a_role(tail: str | None, call: cst.Call, role_names: Collection[str]) -> bool:
    """A constructor call (a capitalised callee) with an argument that may be a role: a
    system or developer role spelled in place, or a name or attribute that the module
    assigns such a role (`lead = "system"`; resolved by value later)."""
    if tail is None or not tail[:1].isupper() or len(call.args) < 2:
        return False
    for arg in call.args:
        if arg.star:
            continue
        value = enum_member(arg.value)
        if is_system_role(role_spelling(value)):
            return True
        name = value.value if isinstance(value, cst.Name) else None
        if isinstance(value, cst.Attribute):
            name = value.attr.value
        if name in role_names:
            return True
    return False
    for arg in call.args:
        if arg.star:
            continue
        if is_system_role(role_spelling(arg.value)):
            return True
        if (
            isinstance(arg.value, (cst.Name, cst.Attribute))
            and "role"
            in (
                arg.value.value if isinstance(arg.value, cst.Name) else arg.value.attr.value
            ).lower()
        ):
            return True
    return False


def _counter(node: cst.For) -> cst.Name | None:
    """The name a `for` loop counts with: `i` of `for i in range(...)` or of
    `for i, item in enumerate(...)`."""
    call = node.iter
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    target = node.target
    if call.func.value == "range" and isinstance(target, cst.Name):
        return target
    if (
        call.func.value == "enumerate"
        and isinstance(target, cst.Tuple)
        and target.elements
        and isinstance(target.elements[0].value, cst.Name)
    ):
        return target.elements[0].value
    return None


class _Indexer(cst.CSTVisitor):
    def __init__(
        self, index: ModuleIndex, cached_keywords: frozenset[str], call_tails: frozenset[str]
    ) -> None:
        super().__init__()
        self.index = index
        self.cached_keywords = cached_keywords
        self.call_tails = call_tails
        self.functions: list[FunctionNode] = []
        self.classes: list[cst.ClassDef | None] = [None]
        # the roles of the messages being visited, innermost last, and how many of them
        # are conversation turns (checked on every name: kept as a count)
        self.roles: list[str | None] = []
        self.turns = 0
        self.tool_classes: set[int] = set()
        # classes with a field holding a system or developer role, and calls of a
        # capitalised name (those classes may be defined after the call)
        self.role_classes: set[str] = set()
        self.class_calls: list[tuple[cst.Call, FunctionNode | None]] = []
        # names and attributes assigned a system or developer role literal, and
        # constructor calls that may take one of them
        # names and attributes the module binds to a system or developer role, and the role
        self.role_names: dict[str, str] = {}
        self.role_calls: list[tuple[cst.Call, FunctionNode | None]] = []
        # enclosing loops; None marks a function boundary (its loops are its own)
        self.loops: list[cst.For | cst.While | None] = []
        # (function, dotted target) -> the values of the text being built there
        self.chains: dict[tuple[int, tuple[str, ...]], list[cst.BaseExpression]] = {}

    @property
    def function(self) -> FunctionNode | None:
        return self.functions[-1] if self.functions else None

    def _bind(self, target: cst.BaseExpression, source: ValueSource) -> None:
        if isinstance(target, cst.Name):
            self.index.values.setdefault(id(target), []).append(source)
        elif isinstance(target, (cst.Tuple, cst.List)):
            value = source.value
            items: Sequence[cst.BaseElement] | None = None
            if (
                source.kind == "assign"
                and isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(target.elements)
            ):
                items = value.elements
            for position, element in enumerate(target.elements):
                if items is not None and not isinstance(items[position], cst.StarredElement):
                    part = ValueSource("assign", items[position].value)
                elif source.kind == "assign" and not any(
                    isinstance(e, cst.StarredElement) for e in target.elements
                ):
                    part = ValueSource("unpack", source.value, position=position)
                else:
                    part = ValueSource(source.kind, source.value)
                self._bind(element.value, part)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, source)
        elif isinstance(target, cst.Attribute):
            self._bind_attribute(target, source)

    def _bind_attribute(self, target: cst.Attribute, source: ValueSource) -> None:
        owner = self.index.function_class.get(id(self.function)) if self.function else None
        if (
            owner is None
            or source.value is None
            or not isinstance(target.value, cst.Name)
            or target.value.value not in ("self", "cls")
        ):
            return
        attrs = self.index.class_attrs.setdefault(id(owner), {})
        attrs.setdefault(target.attr.value, []).append((source.value, self.function))
        self._tool_field(owner, target.attr.value, source.value)

    def _tool_field(self, owner: cst.ClassDef, name: str, value: cst.BaseExpression) -> None:
        """`description` / `inputs` of a tool class (smolagents, LangChain, crewAI) are tools."""
        if name in TOOL_FIELDS and id(owner) in self.tool_classes:
            label = f"the `{name}` of tool class `{owner.name.value}`"
            self.index.sites.append(SiteCandidate("keyword", value, label, self.function))

    # scopes -----------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            value = base.value
            tail = value.attr.value if isinstance(value, cst.Attribute) else None
            if isinstance(value, cst.Name):
                tail = value.value
            if tail in TOOL_BASE_CLASSES:
                self.tool_classes.add(id(node))
        self.classes.append(node)
        self.index.class_methods[id(node)] = {}
        self.index.class_attrs[id(node)] = {}

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            expression = decorator.decorator
            if isinstance(expression, cst.Call):
                expression = expression.func
            if isinstance(expression, cst.Attribute) and expression.attr.value in PROMPT_DECORATORS:
                label = f"the return value of an `@{expression.attr.value}` function"
                self.index.sites.append(SiteCandidate("returns", node, label, node))
        if _is_provider(node):
            self.index.sites.append(SiteCandidate("provider", node, "", node))
        owner = self.classes[-1]
        if owner is not None and not self.functions:
            self.index.class_methods[id(owner)][node.name.value] = node
            self.index.function_class[id(node)] = owner
        elif self.functions and id(self.functions[-1]) in self.index.function_class:
            self.index.function_class[id(node)] = self.index.function_class[id(self.functions[-1])]
        self._enter_function(node, node.params)
        self.classes.append(None)
        self.loops.append(None)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.classes.pop()
        self.loops.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._enter_function(node, node.params)
        self.index.returns[id(node)] = [node.body]

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.functions.pop()

    def _enter_function(self, node: FunctionNode, params: cst.Parameters) -> None:
        self.index.enclosing_function[id(node)] = self.function
        self.index.returns.setdefault(id(node), [])
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self.index.param_function[id(param)] = node
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.index.param_function[id(star)] = node
        self.functions.append(node)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None and self.function is not None:
            self.index.returns[id(self.function)].append(node.value)

    # bindings ---------------------------------------------------------------
    def visit_Name(self, node: cst.Name) -> None:
        if self.turns:
            self.index.user_turn_names.add(id(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.index.assigned_to[id(node.value)] = node.targets[0].target
        role = string_value(node.value)
        for target in node.targets:
            self._bind(target.target, ValueSource("assign", node.value))
            if role is not None and is_system_role(role):
                self._role_name(target.target, role)
            if isinstance(target.target, cst.Subscript):
                self._item_write(target.target, node.value)
            self._prompt_attribute(target.target, node.value)
        self._class_attr(node.targets[0].target if len(node.targets) == 1 else None, node.value)
        if len(node.targets) == 1:
            self._chain(node.targets[0].target, node.value, started=True)

    def _chain(self, target: cst.BaseExpression, value: cst.BaseExpression, started: bool) -> None:
        """Follow a text built over statements (`ModuleIndex.text_chains`): a plain
        assignment to a name or attribute starts one, `+=` adds to it."""
        parts = dotted_parts(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if parts is None:
            return
        key = (id(self.function), tuple(parts))
        chain = self.chains.get(key)
        if started or chain is None:
            chain = self.chains[key] = []
        chain.append(value)
        self.index.text_chains[id(value)] = chain

    def _role_name(self, target: cst.BaseExpression, role: str) -> None:
        if isinstance(target, cst.Name):
            self.role_names[target.value] = role.lower()
        elif isinstance(target, cst.Attribute):
            self.role_names[target.attr.value] = role.lower()

    def _role(self, value: cst.BaseExpression) -> str | None:
        """A message's role by value: a literal in any case, an enum member named for it
        (`Role.SYSTEM`, or its `.value`), or a name or attribute the module binds to a system
        role."""
        value = enum_member(value)
        bound = None
        if isinstance(value, cst.Name):
            bound = self.role_names.get(value.value)
        elif isinstance(value, cst.Attribute):
            bound = self.role_names.get(value.attr.value)
        return bound if bound is not None else role_spelling(value)

    def _enter(self, role: str | None) -> None:
        self.roles.append(role)
        self.turns += is_turn_role(role)

    def _leave(self) -> None:
        self.turns -= is_turn_role(self.roles.pop())

    def _dict_role(self, node: cst.Dict) -> str | None:
        for element in node.elements:
            if _dict_key(element) == "role" and isinstance(element, cst.DictElement):
                return self._role(element.value)
        return None

    def _prompt_attribute(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """`x.system_prompt = value`, or a class body's `system_prompt = value`."""
        if isinstance(target, cst.Attribute) and target.attr.value in SYSTEM_PROMPT_ATTRIBUTES:
            label = f"`.{target.attr.value}`"
        elif (
            isinstance(target, cst.Name)
            and target.value in SYSTEM_PROMPT_ATTRIBUTES
            and self.classes[-1] is not None
        ):
            label = f"the `{target.value}` field of `{self.classes[-1].name.value}`"
        else:
            return
        self.index.sites.append(SiteCandidate("keyword", value, label, self.function))

    def _item_write(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        """`receiver["key"] = value`: completes a dict built elsewhere."""
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            return
        key_node = target.slice[0].slice.value
        key = string_value(key_node)
        receiver = target.value
        if key is None or not isinstance(receiver, cst.Name):
            return
        self.index.item_writes.setdefault(id(receiver), []).append((key, value, key_node))
        if key in self.cached_keywords:
            label = f"`{receiver.value}[{key!r}]`"
            self.index.sites.append(SiteCandidate("keyword", value, label, self.function))
        elif key in CACHE_MARKER_KEYS:
            label = "a block with a cache marker"
            self.index.sites.append(
                SiteCandidate("marker-write", target, label, self.function, receiver)
            )
        elif key == "content":
            label = "a `system` message"
            self.index.sites.append(
                SiteCandidate("content-write", value, label, self.function, receiver)
            )

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        annotation = node.annotation.annotation
        self._bind(node.target, ValueSource("assign", node.value, annotation))
        if node.value is not None:
            self._class_attr(node.target, node.value)
            self._prompt_attribute(node.target, node.value)
            role = string_value(node.value)
            if role is not None and is_system_role(role):
                self._role_name(node.target, role)

    def _class_attr(self, target: cst.BaseExpression | None, value: cst.BaseExpression) -> None:
        owner = self.classes[-1]
        if owner is not None and isinstance(target, cst.Name):
            if is_system_role(role_spelling(value)):
                self.role_classes.add(owner.name.value)
            attrs = self.index.class_attrs[id(owner)]
            attrs.setdefault(target.value, []).append((value, None))
            self._tool_field(owner, target.value, value)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Add):
            self.index.appends.append(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign):
            self.index.appends.append(node)
            self._prompt_attribute(node.target, node.value)
            self._chain(node.target, node.value, started=False)
        self._bind(node.target, ValueSource("assign", node.value))
        if self.loops and self.loops[-1] is not None and isinstance(node.target, cst.Name):
            self.index.loop_counters[id(node.target)] = self.loops[-1]
        self._count(node)

    def _grown(self, target: cst.BaseExpression) -> None:
        """`self.steps.append(x)` in a method other than the constructor: a list that grows
        on every call of that method."""
        written = self._written_per_call(target)
        if written is not None:
            owner, name, method = written
            self.index.grown_attrs.setdefault(owner, {})[name] = method

    def _count(self, node: cst.AugAssign) -> None:
        """`self.step += 1` in a method other than the constructor: a counter of its calls."""
        written = self._written_per_call(node.target)
        if (
            written is not None
            and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign))
            and isinstance(node.value, (cst.Integer, cst.Float))
        ):
            owner, name, method = written
            self.index.counted_attrs.setdefault(owner, {})[name] = method

    def _written_per_call(
        self, target: cst.BaseExpression
    ) -> tuple[int, str, cst.FunctionDef] | None:
        """For `self.<attr>` written in a method other than the constructor (on every call
        of it): its class's id, the attribute's name and the method."""
        method = self.function
        owner = self.index.function_class.get(id(method)) if method is not None else None
        if (
            isinstance(method, cst.FunctionDef)
            and owner is not None
            and method.name.value not in CONSTRUCTOR_METHODS
            and isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            return id(owner), target.attr.value, method
        return None

    def _enclosing_for_loops(self) -> tuple[cst.For, ...]:
        """The `for` loops around the current node in its own function, outermost first."""
        loops: list[cst.For] = []
        for loop in reversed(self.loops):
            if loop is None:
                break
            if isinstance(loop, cst.For):
                loops.append(loop)
        return tuple(reversed(loops))

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)

    def leave_While(self, original_node: cst.While) -> None:
        self.loops.pop()

    def leave_For(self, original_node: cst.For) -> None:
        self.loops.pop()

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, ValueSource("assign", node.value))

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, ValueSource("iter", node.iter))
        self.loops.append(node)
        counter = _counter(node)
        if counter is not None:
            self.index.loop_counters[id(counter)] = node

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target, ValueSource("iter", node.iter))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name, ValueSource("unknown", None))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            parts = dotted_parts(alias.name)
            if not parts:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._import(alias.asname.name.value, ".".join(parts))
            elif alias.asname is None:
                self._import(parts[0], parts[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = dotted_parts(node.module) if node.module is not None else []
        prefix = "." * len(node.relative) + ".".join(module or [])
        for alias in node.names:
            parts = dotted_parts(alias.name)
            if not parts:
                continue
            name = ".".join(parts)
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name):
                dotted = f"{prefix}.{name}" if module else f"{prefix}{name}"
                self._import(bound.value, dotted)

    def _import(self, bound: str, dotted: str) -> None:
        names = self.index.imported.setdefault(bound, [])
        if dotted not in names:
            names.append(dotted)

    # sites ------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        self.index.calls.append((node, self.function))
        if self.loops and None not in self.loops:
            self.index.looped_at_import.add(id(node))
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _APPENDERS
            and len(node.args) == 1
        ):
            self.index.appends.append(node)
            self._grown(func.value)
        if isinstance(func, cst.Attribute) and func.attr.value in _ORDERED_ADDERS:
            loops = self._enclosing_for_loops()
            if loops:
                for arg in node.args:
                    self.index.appended_in[id(arg.value)] = loops
        if node.args:
            dotted = dotted_parts(func)
            if dotted is not None:
                self.index.dotted_calls[tuple(dotted)] = None
        tail = func.attr.value if isinstance(func, cst.Attribute) else None
        if isinstance(func, cst.Name):
            tail = func.value
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.attr.value in _MUTATORS
        ):
            mutation = Mutation(func.attr.value, node)
            self.index.mutations.setdefault(id(func.value), []).append(mutation)
        elif isinstance(func, cst.Attribute) and func.attr.value in _MUTATORS:
            # `self._tools.append(tool)`: what the attribute holds, in the order added
            receiver = func.value
            if isinstance(receiver, cst.Attribute):
                for arg in node.args:
                    if not arg.star:
                        self._bind_attribute(receiver, ValueSource("assign", arg.value))
        keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        role = self._role(keywords["role"]) if "role" in keywords else None
        self._enter(role)
        if keywords.keys() & _REQUEST_KEYWORDS:
            self.index.requests.append((node, self.function))
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in self.cached_keywords:
                label = f"`{arg.keyword.value}=`"
                self.index.sites.append(
                    SiteCandidate("keyword", arg.value, label, self.function, receiver=node)
                )
        if node.args and tail in self.call_tails:
            self.index.sites.append(SiteCandidate("call", node, "", self.function))
        if (tail in _ENTRY_TAILS and node.args) or keywords.keys() & _ENTRY_KEYWORDS:
            self.index.sites.append(SiteCandidate("entry", node, "", self.function))
        if tail in SYSTEM_MESSAGE_METHODS:
            text = next((keywords[k] for k in _CONTENT_KEYWORDS if k in keywords), None)
            if text is None and node.args and node.args[0].keyword is None:
                text = node.args[0].value
            if text is not None:
                label = f"a system message (`.{tail}(...)`)"
                self.index.sites.append(SiteCandidate("role", text, label, self.function))
        if isinstance(func, cst.Name) and func.value[:1].isupper() and node.args:
            self.class_calls.append((node, self.function))
        content = None
        if is_system_role(role):
            content = keywords.get("content")
            if content is None and node.args and node.args[0].keyword is None:
                content = node.args[0].value
        if content is not None:
            label = f"a `{role}` message"
            self.index.sites.append(SiteCandidate("role", content, label, self.function))
        elif _may_take_a_role(tail, node, set()):
            # a project's own message class: `Message("system", text)`,
            # `ChatMessage(message=text, message_type=MessageType.SYSTEM)`; the role is
            # resolved by value later (`cached_segments`)
            self.index.sites.append(SiteCandidate("constructor", node, "", self.function))
        elif tail is not None and tail[:1].isupper() and len(node.args) > 1:
            self.role_calls.append((node, self.function))
        if (
            keywords.keys() & CACHE_MARKER_KEYS
            and not keywords.keys() & (_REQUEST_KEYWORDS | _PAYLOAD_KEYS)
            and not self.turns
        ):
            self.index.sites.append(
                SiteCandidate("marker", node, "a block with a cache marker", self.function)
            )

    def leave_Call(self, original_node: cst.Call) -> None:
        self._leave()

    def visit_Dict(self, node: cst.Dict) -> None:
        role = self._dict_role(node)
        self._enter(role)
        keys = {_dict_key(element) for element in node.elements}
        if is_system_role(role):
            for element in node.elements:
                if _dict_key(element) == "content" and isinstance(element, cst.DictElement):
                    label = f"a `{role}` message"
                    self.index.sites.append(
                        SiteCandidate("role", element.value, label, self.function)
                    )
        payload = bool(keys & _PAYLOAD_KEYS)
        if payload:
            # a request payload built as a dict and sent with **params
            for element in node.elements:
                key = _dict_key(element)
                if key in self.cached_keywords and isinstance(element, cst.DictElement):
                    label = f"`{key}` of a request payload"
                    self.index.sites.append(
                        SiteCandidate("keyword", element.value, label, self.function)
                    )
        elif keys & CACHE_MARKER_KEYS and not self.turns:
            self.index.sites.append(
                SiteCandidate("marker", node, "a block with a cache marker", self.function)
            )

    def leave_Dict(self, original_node: cst.Dict) -> None:
        self._leave()

    def visit_List(self, node: cst.List) -> None:
        if any(isinstance(element, cst.StarredElement) for element in node.elements):
            self.index.appends.append(node)
        self._ordered(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._ordered(node)
        # LangChain's ("system", "...") message tuples
        if len(node.elements) == 2 and is_system_role(string_value(node.elements[0].value)):
            label = "a `system` message"
            self.index.sites.append(
                SiteCandidate("role", node.elements[1].value, label, self.function)
            )

    def _ordered(self, node: cst.List | cst.Tuple) -> None:
        # Only lists that can hold a static system entry matter for ordering:
        # message dicts with a role, calls (SystemMessage, Segment.*) and
        # names (constants, variables holding messages).
        if len(node.elements) > 1 and any(
            isinstance(e.value, (cst.Dict, cst.Call, cst.Name, cst.Attribute))
            for e in node.elements
        ):
            self.index.lists.append((node, self.function))
