"""Where cached segments are built: the parts of a request a provider caches.

Recognised (a value reaching one of these is part of the cached prefix):

- `system=`, `instructions=`, `tools=`, `system_prompt=`, `system_message=`
  and `system_msgs=` arguments of any call (provider clients, pydantic-ai,
  openai-agents, swarm, autogen, camel, MetaGPT, `prefixkit.sdk.Prompt`), plus
  configured keywords, the same keys of a request payload dict (one with
  `model`, `messages`, `max_tokens` or `input`, sent with `**params`) and
  `kwargs["system"] = ...` assignments; a function given there
  (`Agent(instructions=build)`) contributes its return value, a message
  factory (`BaseMessage.make_assistant_message(content=...)`) its arguments;
- the system-prompt arguments of framework agents, matched by qualified name
  (`catalog.PROMPT_ENTRY_POINTS`: Google ADK `instruction=`, agno
  `description=`, crewAI `backstory=`, LangGraph `prompt=`, camel
  `ChatAgent`'s first argument, ...), and the return values of Google ADK
  InstructionProviders (a `str` function of a `ReadonlyContext`);
  `datetime_flags` lists agno's `add_datetime_to_context=True`-like flags;
- the return values of functions decorated with `@agent.system_prompt` or
  `@agent.instructions` (pydantic-ai);
- the content of system and developer messages: dicts, `dict(role=...)`,
  typed params and message classes called with `role=` (`MessageRole.SYSTEM`
  too), LangChain `("system", ...)` tuples, `msg["content"] = ...` on a
  system message;
- `SystemMessage(...)`, `SystemMessagePromptTemplate(.from_template)(...)`,
  `ChatCompletionSystemMessageParam(...)` / `...DeveloperMessageParam(...)`,
  and the template text of `PromptTemplate(...)` / `.from_template(...)`
  (LangChain, LlamaIndex);
- a call rendering a LangChain chat template that holds a system message, or
  binding its values (`prompt.invoke(inputs)`, `.format_prompt(**inputs)`,
  `.partial(time=...)`): what it gives the placeholders reaches that message;
- the text of Haystack's `ChatMessage.from_system(...)` and Semantic Kernel's
  `add_system_message(...)`;
- values assigned to a `system_prompt` / `system_message` / `system_instruction`
  attribute of any object, or to a class field of that name;
- content blocks carrying `cache_control` or `prompt_cache_breakpoint` (dicts,
  typed params such as `TextBlockParam(...)`, or a block completed by
  `block["cache_control"] = ...`; not request payloads with a top-level
  `cache_control`), unless they sit in a user or assistant message (a
  breakpoint on the latest user turn is the recommended rolling pattern);
- prefixkit's `Segment.static(...)` and `Segment.versioned(...)`;
- arguments of configured cached callables;
- what the module's calls pass for a parameter of the function building a
  segment when that parameter flows into it, through any number of helpers
  (each call visited once);
- the other arguments of a call of a class (a project's own message type)
  given a system or developer role by value: a literal or an enum member
  named for it, positional or keyword, through variables and `self.<attr>`.

A message appended at the end of an existing history (`history + [msg]`,
`history.append(msg)`, `[*history, msg]`) is the tail, not a cached segment
(`history_tail`).

`request_blocks` lays out one provider request (tools -> system -> messages)
as blocks with their markers, for the breakpoint rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from ..catalog import (
    CACHE_MARKER_KEYS,
    CACHED_KEYWORDS,
    INSTRUCTION_PROVIDER_CONTEXTS,
    MESSAGE_FACTORY_METHODS,
    PROMPT_TEMPLATE_CLASSES,
    SEGMENT_CONSTRUCTORS,
    SYSTEM_MESSAGE_CLASSES,
    TEMPLATE_CONSTRUCTORS,
    TURN_ROLES,
    PromptEntryPoint,
    is_configuration_name,
    is_identity_name,
    is_message_class,
    is_system_role,
    prompt_entry_point,
)
from .bindings import Env
from .call_sites import CallSites
from .guards import Condition, conditions, excluded, passes_literals
from .module_index import ModuleIndex, SiteCandidate, enum_member, role_spelling
from .syntax import FunctionNode, dotted_parts, read_names, string_value
from .taint import TaintAnalysis, date_only_format

__all__ = [
    "Block",
    "CachedSegment",
    "DatetimeFlag",
    "ImportedCall",
    "ImportedSinks",
    "ParameterSinks",
    "cached_segments",
    "callee_names",
    "class_role",
    "datetime_flags",
    "in_user_turn",
    "one_shot",
    "parameter_sinks",
    "request_blocks",
]

_BLOCK_META_KEYS = CACHE_MARKER_KEYS | {"type"}
# How many calls up a parameter that reaches a cached segment is followed: each call's
# argument is visited once (cycles are cut there), so the cost stays linear in the module;
# the bound only guards against pathological chains.
_MAX_CALLER_DEPTH = 64
_FALSE_LITERALS = frozenset({"False", "None"})
_TOOLS_LABEL = "`tools=`"
_CHAT_LABEL = "the system message of the chat template rendered here"
# How many variables and attributes a role is followed through.
_MAX_ROLE_DEPTH = 4
# Roles of a turn that follows the cached part without being reused by a later request.
_USER_ROLES = frozenset({"user", "human"})
# Nodes between a value and the message or request holding it.
_WRAPPERS = (cst.Arg, cst.DictElement, cst.Element, cst.FormattedStringExpression)


@dataclass(frozen=True)
class CachedSegment:
    """A value that becomes part of a cached prefix, and where it is built.

    `elsewhere`: the value is passed to another module of the project, which puts it
    into the prompt; what follows it there is not laid out. `passed`: the value is what
    a call passes for a parameter that reaches a segment (`_through_callers`).
    """

    node: cst.BaseExpression
    label: str
    function: FunctionNode | None
    elsewhere: bool = False
    passed: bool = False


@dataclass(frozen=True)
class ImportedCall:
    """A call of a function or class defined in another module of the project.

    `segments`: the call's arguments that reach a cached position there, each with
    its label. `decides`: the callee takes every keyword it is given as a named
    parameter (no `**kwargs`, no framework base class), so its own code, not the
    keyword's spelling, says whether a `system=` given to it is a prompt.
    """

    segments: tuple[tuple[cst.BaseExpression, str], ...]
    decides: bool


class ImportedSinks(Protocol):
    """Calls of functions and classes imported from other modules of the project
    (`project_imports.ProjectImports` answers it)."""

    def call_sinks(self, analysis: TaintAnalysis, call: cst.Call) -> ImportedCall | None:
        """What `call` passes into a cached position of another project module; None
        when it runs nothing defined in the project's other modules."""
        ...


@dataclass(frozen=True)
class ParameterSinks:
    """What of a module's functions and classes reaches its cached segments.

    `parameters`: per function (`id` of its node), its parameters that reach a
    cached segment, each with the label of the segment. `fields`: per class, the
    attributes its methods read into a cached segment (`self.system`), by name,
    with the label: a class without an `__init__` of its own (a dataclass, a
    pydantic model) is built with them. `places`: per (function, parameter), where
    the function reads it into a segment; `excluded` reads there the tests on the
    function's other parameters under which it does (`if role == "system":`, `guards`).
    """

    parameters: Mapping[int, tuple[tuple[cst.Param, str], ...]]
    fields: Mapping[int, Mapping[str, str]]
    places: Mapping[tuple[int, int], tuple[tuple[FunctionNode, cst.CSTNode], ...]] = field(
        default_factory=dict
    )
    _conditions: dict[tuple[int, int], list[tuple[Condition, ...]]] = field(default_factory=dict)

    def excluded(
        self, function: FunctionNode, param: cst.Param, arguments: Mapping[int, cst.BaseExpression]
    ) -> bool:
        """Whether a call with `arguments` fails the tests at every place where `param` of
        `function` reaches a segment (the tests read once, on first use)."""
        key = (id(function), id(param))
        found = self._conditions.get(key)
        if found is None:
            places = self.places.get(key, ())
            found = self._conditions[key] = [conditions(owner, node) for owner, node in places]
        return bool(found) and all(excluded(tests, arguments) for tests in found)


def callee_names(call: cst.Call, analysis: TaintAnalysis) -> frozenset[str]:
    """Qualified names of the callee, plus its dotted spelling when it is unresolved."""
    names = analysis.qualified_names(call.func)
    if names:
        return names
    parts = dotted_parts(call.func)
    return frozenset({".".join(parts)}) if parts else frozenset()


def _call_segments(
    call: cst.Call, function: FunctionNode | None, analysis: TaintAnalysis, extra: frozenset[str]
) -> list[CachedSegment]:
    names = callee_names(call, analysis)
    if names & extra:
        label = f"`{min(names & extra)}(...)`"
        return [CachedSegment(arg.value, label, function) for arg in call.args]
    own = _own_class(call, analysis)
    if own is not None or all(name.startswith(".") for name in names):
        # the project's own class: a sink by what it holds, not by its name
        return _system_class_segments(call, own, function, analysis) if own is not None else []
    classes = set()
    for name in names:
        parts = name.split(".")
        classes.add(parts[-1])
        if len(parts) > 1 and parts[-1] in TEMPLATE_CONSTRUCTORS:
            classes.add(parts[-2])
    if classes & SYSTEM_MESSAGE_CLASSES:
        label = f"`{min(classes & SYSTEM_MESSAGE_CLASSES)}(...)`"
    elif classes & PROMPT_TEMPLATE_CLASSES:
        label = f"the text of a `{min(classes & PROMPT_TEMPLATE_CLASSES)}`"
    elif any(".".join(name.split(".")[-2:]) in SEGMENT_CONSTRUCTORS for name in names):
        label = "a static prefixkit `Segment`"
    else:
        return []
    content = [
        arg.value
        for position, arg in enumerate(call.args)
        if (arg.keyword is None and position == 0)
        or (arg.keyword is not None and arg.keyword.value in ("content", "template"))
    ]
    return [CachedSegment(value, label, function) for value in content]


def _resolved_role(
    node: cst.BaseExpression, env: Env, analysis: TaintAnalysis, depth: int = 0
) -> str | None:
    """The system or developer role `node` holds, by value: a literal or an enum member
    named for it, in place or through variables and `self.<attr>` with a constant value,
    or an attribute the module or a project module it imports binds to one (an enum's
    member, or its `.value`: `Role.SYS` with `SYS = "system"` in `class Role`)."""
    node = enum_member(node)
    spelled = role_spelling(node)
    if is_system_role(spelled) and not isinstance(node, cst.Name):
        return spelled
    if isinstance(node, cst.Attribute) and node.attr.value in analysis.index.bound_roles:
        return analysis.index.bound_roles[node.attr.value]
    if depth >= _MAX_ROLE_DEPTH:
        return None
    values: list[tuple[cst.BaseExpression, Env]] = []
    if isinstance(node, cst.Attribute):
        values = [(value, Env(None)) for value in analysis.attribute_values(node)]
    elif isinstance(node, cst.Name):
        values = [(v, e) for v, e in analysis.resolve(node, env) if v is not node]
    roles = {_resolved_role(value, value_env, analysis, depth + 1) for value, value_env in values}
    return roles.pop() if len(roles) == 1 else None


def _constructor_segments(
    call: cst.Call, function: FunctionNode | None, analysis: TaintAnalysis
) -> list[CachedSegment]:
    """A message built by a project's own class with a system or developer role: its other
    arguments are the message's content."""
    env = Env(function)
    for position, arg in enumerate(call.args):
        if arg.star:
            continue
        role = _resolved_role(arg.value, env, analysis)
        if role is None:
            continue
        name = ".".join(dotted_parts(call.func) or ["?"])
        label = f"a `{role}` message (`{name}(...)`)"
        return [
            CachedSegment(other.value, label, function)
            for index, other in enumerate(call.args)
            if index != position and not other.star and _text_argument(other, env, analysis)
        ]
    return []


_TEXT_METHODS = frozenset({"format", "join", "strip", "replace"})


def _text_argument(arg: cst.Arg, env: Env, analysis: TaintAnalysis) -> bool:
    """Whether an argument is the message's text, by its value: text built in place or
    through names (a string, f-string, `+`, `.format`, `.join`), or a parameter given
    by position; not a timestamp, an id or other metadata computed by a call."""
    node = arg.value
    values: list[cst.BaseExpression]
    if isinstance(node, cst.Attribute):
        values = analysis.attribute_values(node)
    else:
        values = [value for value, _env in analysis.resolve(node, env)]
    for value in values:
        if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        if isinstance(value, cst.BinaryOperation) and isinstance(
            value.operator, (cst.Add, cst.Modulo)
        ):
            return True
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _TEXT_METHODS
        ):
            return True
        if isinstance(value, cst.Name) and arg.keyword is None:
            return True
    return False


def _own_class(call: cst.Call, analysis: TaintAnalysis) -> cst.ClassDef | None:
    """The class of this module that `call` instantiates, if it is one."""
    if not isinstance(call.func, cst.Name):
        return None
    for assignment in analysis.assignments(call.func):
        target = getattr(assignment, "node", None)
        if isinstance(target, cst.ClassDef):
            return target
    return None


def _system_class_segments(
    call: cst.Call, owner: cst.ClassDef, function: FunctionNode | None, analysis: TaintAnalysis
) -> list[CachedSegment]:
    """A class of the module whose own fields give it a system or developer role
    (`role = "system"`, `kind: Kind = Kind.SYSTEM`): what it is built with is the
    message's content."""
    role = class_role(owner, analysis)
    if role is None:
        return []
    label = f"a `{role}` message (`{owner.name.value}(...)`)"
    return [CachedSegment(arg.value, label, function) for arg in call.args if not arg.star]


def class_role(owner: cst.ClassDef, analysis: TaintAnalysis) -> str | None:
    """The system or developer role a class's own field holds (`role: str = "system"`),
    when no field spells a turn's role: a class whose fields spell several roles (`class
    Role(Enum)` with `SYSTEM = "system"` and `USER = "user"`) names the roles; calling it
    makes a role, not a message."""
    fields = analysis.index.class_attrs.get(id(owner), {})
    values = [value for entries in fields.values() for value, method in entries if method is None]
    if any(role_spelling(value) in TURN_ROLES for value in values):
        return None
    roles = {_resolved_role(value, Env(None), analysis) for value in values}
    return next((r for r in sorted(roles, key=str) if r is not None), None)


def _returned(function: FunctionNode, label: str, index: ModuleIndex) -> list[CachedSegment]:
    """The return values of a function whose result is a prompt (its parameters: request data)."""
    return [CachedSegment(value, label, function) for value in index.returns.get(id(function), [])]


def _keyword_segments(
    candidate: SiteCandidate, node: cst.BaseExpression, index: ModuleIndex, analysis: TaintAnalysis
) -> list[CachedSegment]:
    """A keyword's value; a function passed there (`instructions=build`) gives its returns."""
    if isinstance(node, cst.Lambda):
        return _returned(
            node, f"the return value of the function given to {candidate.label}", index
        )
    if isinstance(node, (cst.Name, cst.Attribute)) and candidate.label != _TOOLS_LABEL:
        # a function given as instructions contributes what it returns; a function given
        # as a tool contributes its definition (name, docstring, signature), not its results
        functions = analysis.functions_named(node)
        if functions:
            spelled = ".".join(dotted_parts(node) or ["?"])
            label = f"the return value of `{spelled}`, given to {candidate.label}"
            return [s for f in functions for s in _returned(f, label, index)]
    # `system_message=BaseMessage.make_assistant_message(content=...)`, given directly or
    # through a variable: the message's text
    messages = [
        value
        for value, _env in analysis.resolve(node, Env(candidate.function))
        if isinstance(value, cst.Call) and _builds_message(value, analysis)
    ]
    return [CachedSegment(node, candidate.label, candidate.function)] + [
        CachedSegment(arg.value, candidate.label, candidate.function)
        for message in messages
        for arg in message.args
    ]


def _own_function_decides(candidate: SiteCandidate, analysis: TaintAnalysis) -> bool:
    """Whether a `system=`-like argument goes to a function of the module that takes it as
    a named parameter: that function's body decides whether the parameter reaches a
    prompt (a caller's argument becomes a cached segment through it, `_through_callers`),
    so a project's `search(query, tools=[...])` filter is not a prompt by its spelling."""
    call = candidate.receiver
    if not isinstance(call, cst.Call):
        return False
    keyword = next(
        (
            arg.keyword.value
            for arg in call.args
            if arg.keyword is not None and arg.value is candidate.node
        ),
        None,
    )
    functions = analysis.functions_called(call)
    return (
        bool(functions)
        and keyword is not None
        and all(
            isinstance(function, cst.FunctionDef)
            and function.params.star_kwarg is None
            and any(
                param.name.value == keyword
                for param in (*function.params.params, *function.params.kwonly_params)
            )
            for function, _method in functions
        )
    )


def _builds_message(call: cst.Call, analysis: TaintAnalysis) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in MESSAGE_FACTORY_METHODS:
        return True
    return is_message_class(callee_names(call, analysis))


def _entry_point(call: cst.Call, analysis: TaintAnalysis) -> PromptEntryPoint | None:
    return prompt_entry_point(analysis.qualified_names(call.func))


def _entry_segments(
    call: cst.Call, function: FunctionNode | None, index: ModuleIndex, analysis: TaintAnalysis
) -> list[CachedSegment]:
    """The system-prompt arguments of a framework entry point (`Agent(instruction=...)`)."""
    entry = _entry_point(call, analysis)
    if entry is None:
        return []
    name = ".".join(dotted_parts(call.func) or ["?"])
    found: list[CachedSegment] = []
    for position, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value in CACHED_KEYWORDS:
            continue  # a cached keyword on any callee
        if arg.keyword is not None and arg.keyword.value in entry.keywords:
            label = f"`{arg.keyword.value}=` of {entry.framework}'s `{name}` ({entry.part})"
        elif arg.keyword is None and not arg.star and position == entry.positional:
            ordinal = ("first", "second", "third")[position] if position < 3 else f"#{position + 1}"
            label = f"the system message of {entry.framework}'s `{name}` ({ordinal} argument)"
        else:
            continue
        candidate = SiteCandidate("keyword", arg.value, label, function)
        found += _keyword_segments(candidate, arg.value, index, analysis)
    return found


def _provider_segments(
    function: cst.FunctionDef, index: ModuleIndex, analysis: TaintAnalysis
) -> list[CachedSegment]:
    """The returns of an instruction provider (a `str` function of ADK's `ReadonlyContext`)."""
    for param in (*function.params.posonly_params, *function.params.params):
        annotation = param.annotation
        if annotation is None:
            continue
        names = analysis.qualified_names(annotation.annotation)
        for framework, packages, context_name in INSTRUCTION_PROVIDER_CONTEXTS:
            if any(
                name.rpartition(".")[2] == context_name
                and any(name.startswith(f"{package}.") for package in packages)
                for name in names
            ):
                label = (
                    f"the return value of {framework} InstructionProvider `{function.name.value}`"
                )
                return _returned(function, label, index)
    return []


@dataclass(frozen=True)
class DatetimeFlag:
    """A framework flag that writes the current date and time into the system prompt,
    with what the call makes the framework write after the time (`following`: the
    content and the parameter that turns it on)."""

    node: cst.Arg
    entry: PromptEntryPoint
    call: cst.Call
    following: tuple[tuple[str, str], ...]

    @property
    def daily(self) -> bool:
        """Whether the call sets a `datetime_format` that shows the date only."""
        return any(
            arg.keyword is not None
            and arg.keyword.value == "datetime_format"
            and date_only_format(string_value(arg.value) or "%H")
            for arg in self.call.args
        )


def datetime_flags(index: ModuleIndex, analysis: TaintAnalysis) -> list[DatetimeFlag]:
    """`add_datetime_to_context=True`-like arguments of framework entry points (agno) whose
    call puts reusable content after the time; a time nothing reusable follows is not a
    loss, and one the framework never writes (its own `system_message=`) is no time."""
    found: list[DatetimeFlag] = []
    for candidate in index.sites:
        call = candidate.node
        if candidate.kind != "entry" or not isinstance(call, cst.Call):
            continue
        entry = _entry_point(call, analysis)
        if entry is None or not entry.datetime_flags:
            continue
        given = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        flags = [
            arg
            for arg in call.args
            if arg.keyword is not None
            and arg.keyword.value in entry.datetime_flags
            and _may_be_on(arg.value)
        ]
        if not flags or _own_prompt(entry, given):
            continue
        after = entry.after_time(_callee_tail(call))
        following: dict[str, str] = {}
        for param, value in given.items():
            if param in after and _turns_on(param, value, analysis):
                following.setdefault(after[param], param)
        if any(arg.star == "**" for arg in call.args):
            following.setdefault("whatever `**kwargs` turns on", "**")
        if following:
            found += [DatetimeFlag(arg, entry, call, tuple(following.items())) for arg in flags]
    return found


def _callee_tail(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _may_be_on(value: cst.BaseExpression) -> bool:
    """Whether an argument may turn a feature on: anything but `False`, `None`, `0` or an
    empty literal (a value the linter cannot know counts as on: it may be)."""
    if isinstance(value, cst.Name):
        return value.value not in _FALSE_LITERALS
    if isinstance(value, cst.Integer):
        return value.evaluated_value != 0
    if isinstance(value, (cst.List, cst.Tuple, cst.Dict, cst.Set)):
        return bool(value.elements)
    text = string_value(value)
    return text is None or bool(text.strip())


def _own_prompt(entry: PromptEntryPoint, given: Mapping[str, cst.BaseExpression]) -> bool:
    """Whether the call replaces the framework's system prompt (`system_message=`) or turns
    it off (`build_context=False`): the framework then writes no time."""
    return any(param in given and _may_be_on(given[param]) for param in entry.own_prompt) or any(
        param in given and not _may_be_on(given[param]) for param in entry.builds_prompt
    )


def _turns_on(param: str, value: cst.BaseExpression, analysis: TaintAnalysis) -> bool:
    """Whether `param=value` makes the framework write its content. A tool list of the
    module's own functions adds no instructions (unless a decorator gives them some); a
    toolkit or anything else may (its class is not read)."""
    if not _may_be_on(value):
        return False
    if param == "tools" and isinstance(value, (cst.List, cst.Tuple)):
        return not all(_plain_function(element.value, analysis) for element in value.elements)
    return True


def _plain_function(node: cst.BaseExpression, analysis: TaintAnalysis) -> bool:
    if not isinstance(node, cst.Name):
        return False
    functions = analysis.functions_named(node)
    return bool(functions) and all(
        isinstance(function, cst.FunctionDef)
        and not any(_instructed(decorator.decorator) for decorator in function.decorators)
        for function in functions
    )


def _instructed(decorator: cst.BaseExpression) -> bool:
    return isinstance(decorator, cst.Call) and any(
        arg.keyword is not None and "instructions" in arg.keyword.value for arg in decorator.args
    )


def _parameters(
    segment: CachedSegment, analysis: TaintAnalysis, sites: CallSites
) -> list[cst.Param]:
    """Parameters of the segment's own function whose value flows into it.

    A parameter named like identity (`user_name`) is left out: it is reported
    where it enters the segment, and its callers would only repeat that.
    """
    function = segment.function
    if function is None:
        return []
    found: dict[int, cst.Param] = {}
    env = Env(function)
    values = [segment.node, *(value for value, _ in analysis.resolve(segment.node, env))]
    for value in values:
        for name in _read_names(value, analysis, env):
            param = sites.parameter(name)
            if (
                param is not None
                and analysis.index.param_function.get(id(param)) is function
                and not is_identity_name([param.name.value])
            ):
                found[id(param)] = param
    return list(found.values())


def _read_names(value: cst.BaseExpression, analysis: TaintAnalysis, env: Env) -> list[cst.Name]:
    """Names a value reads into its text: of a template rendered where its placeholders are
    known, only the values they read (an input no placeholder reads is not rendered)."""
    if isinstance(value, cst.Call):
        rendered = analysis.rendered_values(value, env)
        if rendered is not None and rendered[1]:
            return [
                name for read in rendered[0] for name in read_names(read, is_configuration_name)
            ]
    # `req.system_prompt` puts the prompt's text so far into the segment, not `req`
    return read_names(value, is_configuration_name)


def _through_callers(
    segments: list[CachedSegment], analysis: TaintAnalysis, sites: CallSites
) -> list[CachedSegment]:
    """What the module's calls pass for the parameters that reach a cached segment.

    `def _call_model(self, model, system_prompt): client.responses.create(
    instructions=system_prompt)` makes the argument each local call passes for
    `system_prompt` a cached segment too, evaluated where the call is; so does
    `def set_system(self, text): self.system = text` when a method of the class reads
    `self.system` into a cached segment.
    """
    found: list[CachedSegment] = []
    seen: set[int] = set()
    frontier = [(segment, 0) for segment in segments]
    while frontier:
        segment, depth = frontier.pop()
        if depth >= _MAX_CALLER_DEPTH or segment.function is None:
            continue
        for param, function, node in _reaching_parameters(segment, analysis, sites):
            tests: tuple[Condition, ...] | None = None  # read for the first literal argument
            for call, enclosing, method in sites.callers(function):
                arguments = analysis.arguments(function, call, method)
                argument = arguments.get(id(param))
                if argument is None or argument is param.default or id(argument) in seen:
                    continue
                if passes_literals(arguments, param):
                    tests = conditions(function, node) if tests is None else tests
                    if excluded(tests, arguments):
                        continue  # `add("user", text)` of `if role == "system": self.system = text`
                seen.add(id(argument))
                name = function.name.value if isinstance(function, cst.FunctionDef) else "lambda"
                label = f"{segment.label}, through parameter `{param.name.value}` of `{name}`"
                passed = CachedSegment(argument, label, enclosing, segment.elsewhere, passed=True)
                found.append(passed)
                frontier.append((passed, depth + 1))
    return found


def in_user_turn(name: cst.Name | None, index: ModuleIndex, analysis: TaintAnalysis) -> bool:
    """Whether the variable `name` is placed in a user or assistant message (a rolling breakpoint)."""
    if name is None:
        return False
    return any(
        id(access.node) in index.user_turn_names
        for assignment in analysis.assignments(name)
        for access in getattr(assignment, "references", ())
    )


def _written_segments(
    candidate: SiteCandidate, index: ModuleIndex, analysis: TaintAnalysis
) -> list[CachedSegment]:
    receiver = candidate.receiver
    node = candidate.node
    if not isinstance(receiver, cst.Name) or not isinstance(node, cst.BaseExpression):
        return []
    if in_user_turn(receiver, index, analysis):
        return []
    entries = analysis.entries(receiver, Env(candidate.function))
    if candidate.kind == "content-write":
        role = entries.get("role")
        if role is None or not is_system_role(role_spelling(role[0])):
            return []
        return [CachedSegment(node, candidate.label, candidate.function)]
    if "role" in entries and not is_system_role(role_spelling(entries["role"][0])):
        return []  # a rolling breakpoint on a user or assistant turn
    return [
        CachedSegment(value, candidate.label, candidate.function)
        for key, (value, _env, _key) in entries.items()
        if key not in _BLOCK_META_KEYS
    ]


def cached_segments(
    index: ModuleIndex,
    analysis: TaintAnalysis,
    sites: CallSites,
    extra_callables: frozenset[str],
    tail: frozenset[int] = frozenset(),
    imports: ImportedSinks | None = None,
) -> list[CachedSegment]:
    """Every cached segment the module builds, in source order of discovery; none
    inside the nodes of `tail` (messages appended after a history, `history_tail`).

    With `imports`, a call of a function or class of another project module passes
    the arguments its summary there says reach a cached position (`ImportedSinks`),
    and such a callee is a sink by what it does, not by its name or keywords."""
    imported = _imported_calls(analysis, sites, imports)
    found: list[CachedSegment] = []
    for candidate in index.sites:
        node = candidate.node
        if candidate.kind == "call" and isinstance(node, cst.Call):
            if id(node) in imported:
                continue  # a class of the project: by what it does, not by its name
            found += _call_segments(node, candidate.function, analysis, extra_callables)
        elif candidate.kind == "returns" and isinstance(node, cst.FunctionDef):
            found += _returned(node, candidate.label, index)
        elif candidate.kind == "entry" and isinstance(node, cst.Call):
            found += _entry_segments(node, candidate.function, index, analysis)
        elif candidate.kind == "constructor" and isinstance(node, cst.Call):
            found += _constructor_segments(node, candidate.function, analysis)
        elif candidate.kind == "provider" and isinstance(node, cst.FunctionDef):
            found += _provider_segments(node, index, analysis)
        elif candidate.kind in ("marker-write", "content-write"):
            found += _written_segments(candidate, index, analysis)
        elif candidate.kind == "marker" and in_user_turn(
            index.assigned_to.get(id(node)), index, analysis
        ):
            continue
        elif candidate.kind == "marker" and isinstance(node, cst.Dict):
            for element in node.elements:
                if (
                    isinstance(element, cst.DictElement)
                    and string_value(element.key) not in _BLOCK_META_KEYS
                ):
                    found.append(CachedSegment(element.value, candidate.label, candidate.function))
        elif candidate.kind == "marker" and isinstance(node, cst.Call):
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value not in _BLOCK_META_KEYS:
                    found.append(CachedSegment(arg.value, candidate.label, candidate.function))
        elif candidate.kind == "keyword" and isinstance(node, cst.BaseExpression):
            if _own_function_decides(candidate, analysis) or _imported_decides(candidate, imported):
                continue
            found += _keyword_segments(candidate, node, index, analysis)
        elif isinstance(node, cst.BaseExpression):
            found.append(CachedSegment(node, candidate.label, candidate.function))
    found += [
        CachedSegment(argument, label, sites.enclosing(call), elsewhere=True)
        for call, result in imported.values()
        for argument, label in result.segments
    ]
    found += _chat_renders(index, analysis)
    found = [segment for segment in found if id(segment.node) not in tail]
    return found + _through_callers(found, analysis, sites)


def _chat_renders(index: ModuleIndex, analysis: TaintAnalysis) -> list[CachedSegment]:
    """Calls rendering a chat template that holds a system message, or binding its values
    (`prompt.invoke(inputs)`, `.format_prompt(**inputs)`, `(prompt | llm).invoke(...)`,
    `.partial(time=...)`): what they give its placeholders is put into that message."""
    if not any(
        parts[-1] == "from_messages"
        or parts[-1].endswith("ChatPromptTemplate")
        or any(part.startswith("SystemMessagePromptTemplate") for part in parts)
        for parts in index.dotted_calls
    ):
        return []
    return [
        CachedSegment(call, _CHAT_LABEL, function)
        for call, function in index.calls
        if analysis.renders_chat(call, Env(function))
    ]


def _imported_calls(
    analysis: TaintAnalysis, sites: CallSites, imports: ImportedSinks | None
) -> dict[int, tuple[cst.Call, ImportedCall]]:
    """The module's calls of functions and classes of the project's other modules."""
    if imports is None:
        return {}
    found: dict[int, tuple[cst.Call, ImportedCall]] = {}
    for call in sites.calls():
        result = imports.call_sinks(analysis, call)
        if result is not None:
            found[id(call)] = (call, result)
    return found


def _imported_decides(
    candidate: SiteCandidate, imported: Mapping[int, tuple[cst.Call, ImportedCall]]
) -> bool:
    """Whether a `system=`-like argument goes to a function or class of another project
    module whose own code decides whether it reaches a prompt."""
    call = candidate.receiver
    entry = imported.get(id(call)) if isinstance(call, cst.Call) else None
    return entry is not None and entry[1].decides


def parameter_sinks(
    segments: list[CachedSegment], analysis: TaintAnalysis, sites: CallSites
) -> ParameterSinks:
    """Which parameters of the module's functions reach one of `segments` (the module's
    cached segments, callers followed): a parameter flowing into a segment of its own
    function, a parameter of a method (the constructor, a setter) stored on `self` and
    read into a segment by a method of its class, and the fields such a method reads.
    The summary another module's calls are checked against."""
    found: dict[int, dict[int, tuple[cst.Param, str]]] = {}
    fields: dict[int, dict[str, str]] = {}
    places: dict[tuple[int, int], tuple[tuple[FunctionNode, cst.CSTNode], ...]] = {}
    for segment in segments:
        if segment.function is None:
            continue
        for param, function, node in _reaching_parameters(segment, analysis, sites):
            found.setdefault(id(function), {}).setdefault(id(param), (param, segment.label))
            key = (id(function), id(param))
            places[key] = (*places.get(key, ()), (function, node))
        owner = analysis.index.function_class.get(id(segment.function))
        if owner is not None:
            for attribute in _read_attributes(segment, analysis):
                fields.setdefault(id(owner), {}).setdefault(attribute.attr.value, segment.label)
    parameters = {key: tuple(params.values()) for key, params in found.items()}
    return ParameterSinks(parameters, fields, places)


def _read_attributes(segment: CachedSegment, analysis: TaintAnalysis) -> list[cst.Attribute]:
    """The `self.<attr>` reads whose values flow into the segment."""
    function = segment.function
    values = [segment.node, *(value for value, _ in analysis.resolve(segment.node, Env(function)))]
    return [
        attribute
        for value in values
        for attribute in _self_attributes(value)
        if not is_identity_name([attribute.attr.value])
    ]


def _reaching_parameters(
    segment: CachedSegment, analysis: TaintAnalysis, sites: CallSites
) -> list[tuple[cst.Param, FunctionNode, cst.CSTNode]]:
    """The parameters whose values reach the segment, each with its function and where
    that function reads it: the segment's own function's (`_parameters`), and those the
    class's methods store on `self` for it (`_stored_parameters`)."""
    if segment.function is None:
        return []
    own = [(p, segment.function, segment.node) for p in _parameters(segment, analysis, sites)]
    return [*own, *_stored_parameters(segment, analysis, sites)]


def _stored_parameters(
    segment: CachedSegment, analysis: TaintAnalysis, sites: CallSites
) -> list[tuple[cst.Param, FunctionNode, cst.CSTNode]]:
    """Parameters of the class's methods stored on `self` and read into the segment as
    `self.<attr>`: the constructor's, and a setter's (`def set_system(self, text):
    self.system = text`) where the segment is the prompt itself, not an argument passed
    on for one (a list of messages stored by one method and indexed by another is not
    followed item by item). Each with where the method reads it."""
    found: list[tuple[cst.Param, FunctionNode, cst.CSTNode]] = []
    for attribute in _read_attributes(segment, analysis):
        for stored in analysis.attribute_values(attribute):
            for name in read_names(stored):
                param = sites.parameter(name)
                method = analysis.index.param_function.get(id(param)) if param else None
                if (
                    param is not None
                    and isinstance(method, cst.FunctionDef)
                    and (method.name.value == "__init__" or not segment.passed)
                    and not is_identity_name([param.name.value])
                ):
                    found.append((param, method, name))
    return found


def _self_attributes(node: cst.CSTNode) -> list[cst.Attribute]:
    """`self.<attr>` / `cls.<attr>` reads in an expression (not in nested functions)."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value in ("self", "cls")
    ):
        return [node]
    if isinstance(node, (cst.Lambda, cst.FunctionDef)):
        return []
    return [found for child in node.children for found in _self_attributes(child)]


@dataclass(frozen=True)
class Block:
    """One block of a request: a tool definition, a system block or a message part.

    `marker` is the key node of its `cache_control` / `prompt_cache_breakpoint`
    (None when unmarked), `ttl` the marker's TTL ("5m" when not given),
    `content` the values the block carries (text, schema, ...). `repeated`
    marks a block produced by a comprehension (it may occur many times).
    """

    part: str
    role: str | None
    node: cst.BaseExpression
    env: Env
    marker: cst.CSTNode | None
    marker_kind: str | None
    ttl: str | None
    content: tuple[tuple[cst.BaseExpression, Env], ...]
    repeated: bool


def _block(
    part: str,
    role: str | None,
    node: cst.BaseExpression,
    env: Env,
    repeated: bool,
    analysis: TaintAnalysis,
) -> Block:
    entries = analysis.entries(node, env)
    marker: cst.CSTNode | None = None
    marker_kind: str | None = None
    ttl: str | None = None
    for key in sorted(CACHE_MARKER_KEYS):
        if key in entries:
            value, value_env, key_node = entries[key]
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            marker, marker_kind = key_node, key
            ttl_entry = analysis.entries(value, value_env).get("ttl")
            ttl = string_value(ttl_entry[0]) if ttl_entry else "5m"
    content = tuple(
        (value, value_env)
        for key, (value, value_env, _) in entries.items()
        if key not in _BLOCK_META_KEYS
    )
    if not entries:
        content = ((node, env),)
    return Block(part, role, node, env, marker, marker_kind, ttl, content, repeated)


def request_blocks(
    call: cst.Call, function: FunctionNode | None, analysis: TaintAnalysis
) -> list[Block]:
    """The blocks of a provider request call in prefix order: tools, system, messages."""
    arguments = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    env = Env(function)
    blocks: list[Block] = []
    for part in ("tools", "system"):
        if part in arguments:
            for node, node_env, repeated in analysis.elements(arguments[part], env):
                role = "system" if part == "system" else None
                blocks.append(_block(part, role, node, node_env, repeated, analysis))
    if "messages" in arguments:
        for message, message_env, repeated in analysis.elements(arguments["messages"], env):
            entries = analysis.entries(message, message_env)
            role = string_value(entries["role"][0]) if "role" in entries else None
            if "content" not in entries:
                continue
            content, content_env, _ = entries["content"]
            for node, node_env, inner_repeated in analysis.elements(content, content_env):
                blocks.append(
                    _block("messages", role, node, node_env, repeated or inner_repeated, analysis)
                )
    return blocks


def _user_turn(node: cst.BaseExpression, analysis: TaintAnalysis) -> bool:
    """Whether `node` (a list element) is a user message spelled in place: a dict or call
    with a user role (by value, in any argument), a `("user", ...)` tuple, or a
    `HumanMessage(...)` / `UserMessage(...)` of a known framework."""
    if isinstance(node, cst.Dict):
        return any(
            isinstance(element, cst.DictElement)
            and string_value(element.key) == "role"
            and role_spelling(element.value) in _USER_ROLES
            for element in node.elements
        )
    if isinstance(node, cst.Tuple):
        return bool(node.elements) and role_spelling(node.elements[0].value) in _USER_ROLES
    if isinstance(node, cst.Call):
        tails = {name.rsplit(".", 1)[-1] for name in callee_names(node, analysis)}
        if tails & {"HumanMessage", "UserMessage"}:
            return True
        return any(
            not arg.star
            and isinstance(arg.value, (cst.SimpleString, cst.Attribute))
            and role_spelling(arg.value) in _USER_ROLES
            for arg in node.args
        )
    return False


def _only_user_turns_after(
    node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], analysis: TaintAnalysis
) -> bool:
    """Whether `node`, an element of a list literal, is followed there only by user
    turns, and the list is sent as it is (not named, so never appended to)."""
    element = parents.get(node)
    listing = parents.get(element) if element is not None else None
    if not isinstance(element, cst.Element) or not isinstance(listing, cst.List):
        return False
    after = list(listing.elements)[list(listing.elements).index(element) + 1 :]
    if not all(isinstance(e, cst.Element) and _user_turn(e.value, analysis) for e in after):
        return False
    outer = parents.get(listing)
    if isinstance(outer, cst.BinaryOperation) and outer.left is listing:
        right = outer.right
        return isinstance(right, cst.List) and all(
            isinstance(e, cst.Element) and _user_turn(e.value, analysis) for e in right.elements
        )
    return isinstance(outer, cst.Arg)


def one_shot(
    segment: CachedSegment,
    parents: Mapping[cst.CSTNode, cst.CSTNode],
    analysis: TaintAnalysis,
) -> bool:
    """Whether the segment's message is sent with nothing reusable after it: the last
    system message of a list literal followed only by the user turn (`[SystemMessage(
    content=prompt), HumanMessage(...)]`), or the `system=` of a request whose
    `messages=` is a list literal of user turns only. Such a prompt is written once per
    request whatever it holds at its end."""
    node: cst.CSTNode = segment.node
    while isinstance(parents.get(node), (*_WRAPPERS, cst.Dict, cst.Tuple)):
        parent = parents[node]
        if isinstance(parent, cst.Element) and isinstance(parents.get(parent), cst.List):
            break
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if parent.keyword is not None and parent.keyword.value in ("system", "instructions"):
                messages = next(
                    (
                        arg.value
                        for arg in call.args
                        if arg.keyword is not None and arg.keyword.value in ("messages", "input")
                    ),
                    None,
                )
                return isinstance(messages, cst.List) and all(
                    isinstance(e, cst.Element) and _user_turn(e.value, analysis)
                    for e in messages.elements
                )
            node = call
            continue
        node = parent
    return _only_user_turns_after(node, parents, analysis)
