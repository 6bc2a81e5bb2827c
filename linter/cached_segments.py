"""Where cached segments are built: the parts of a request a provider caches.

Recognised (a value reaching one of these is part of the cached prefix):

- `system=`, `instructions=`, `tools=`, `system_prompt=` and `system_message=`
  arguments of any call (provider clients, pydantic-ai, openai-agents, swarm,
  autogen, `prefixkit.sdk.Prompt`), plus configured keywords, the same keys of
  a request payload dict (one with `model`, `messages`, `max_tokens` or
  `input`, sent with `**params`) and `kwargs["system"] = ...` assignments; a
  function given there (`Agent(instructions=build)`) contributes its return
  value;
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
- content blocks carrying `cache_control` or `prompt_cache_breakpoint` (dicts,
  typed params such as `TextBlockParam(...)`, or a block completed by
  `block["cache_control"] = ...`; not request payloads with a top-level
  `cache_control`), unless they sit in a user or assistant message (a
  breakpoint on the latest user turn is the recommended rolling pattern);
- prefixkit's `Segment.static(...)` and `Segment.versioned(...)`;
- arguments of configured cached callables.

`request_blocks` lays out one provider request (tools -> system -> messages)
as blocks with their markers, for the breakpoint rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .catalog import (
    CACHE_MARKER_KEYS,
    PROMPT_TEMPLATE_CLASSES,
    SEGMENT_CONSTRUCTORS,
    SYSTEM_MESSAGE_CLASSES,
    TEMPLATE_CONSTRUCTORS,
    is_system_role,
)
from .module_index import FunctionNode, ModuleIndex, SiteCandidate, string_value
from .taint import Env, TaintAnalysis, dotted_parts

__all__ = [
    "Block",
    "CachedSegment",
    "cached_segments",
    "callee_names",
    "in_user_turn",
    "request_blocks",
]

_BLOCK_META_KEYS = CACHE_MARKER_KEYS | {"type"}


@dataclass(frozen=True)
class CachedSegment:
    """A value that becomes part of a cached prefix, and where it is built."""

    node: cst.BaseExpression
    label: str
    function: FunctionNode | None


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
    if isinstance(node, cst.Name):
        functions = analysis.functions_named(node)
        if functions:
            label = f"the return value of `{node.value}`, given to {candidate.label}"
            return [s for f in functions for s in _returned(f, label, index)]
    return [CachedSegment(node, candidate.label, candidate.function)]


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
        if role is None or not is_system_role(string_value(role[0])):
            return []
        return [CachedSegment(node, candidate.label, candidate.function)]
    if "role" in entries and not is_system_role(string_value(entries["role"][0])):
        return []  # a rolling breakpoint on a user or assistant turn
    return [
        CachedSegment(value, candidate.label, candidate.function)
        for key, (value, _env, _key) in entries.items()
        if key not in _BLOCK_META_KEYS
    ]


def cached_segments(
    index: ModuleIndex, analysis: TaintAnalysis, extra_callables: frozenset[str]
) -> list[CachedSegment]:
    """Every cached segment the module builds, in source order of discovery."""
    found: list[CachedSegment] = []
    for candidate in index.sites:
        node = candidate.node
        if candidate.kind == "call" and isinstance(node, cst.Call):
            found += _call_segments(node, candidate.function, analysis, extra_callables)
        elif candidate.kind == "returns" and isinstance(node, cst.FunctionDef):
            found += _returned(node, candidate.label, index)
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
            found += _keyword_segments(candidate, node, index, analysis)
        elif isinstance(node, cst.BaseExpression):
            found.append(CachedSegment(node, candidate.label, candidate.function))
    return found


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
