"""PFX001 volatile-value-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.cached_segments import CachedSegment, DatetimeFlag, datetime_flags
from ..analysis.position import Following, sent_once_at_end
from ..analysis.syntax import FunctionNode, dotted_parts, string_value
from ..analysis.taint import Taint
from ..catalog import CONSTRUCTOR_METHODS, DAILY_CALLABLES, SYSTEM_PROMPT_ATTRIBUTES
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["VolatileValueInCachedSegment"]

# arguments holding a whole system prompt (or a system message's text)
_SYSTEM_PROMPT_KEYWORDS = SYSTEM_PROMPT_ATTRIBUTES | {"system", "instructions", "content"}


class VolatileValueInCachedSegment(PythonRule):
    """A clock, date, uuid, random number, pid or hostname reaches a cached segment.

    Cached segments are what the provider caches: `system=`, `instructions=`,
    `tools=`, `system_prompt=`, `system_message=`, `system_msgs=` and
    `system_instruction=` arguments (provider clients of every kind, Gemini,
    pydantic-ai, openai-agents, swarm, smolagents, autogen, camel, MetaGPT),
    the framework agents' own system-prompt arguments (Google ADK
    `instruction=` and its InstructionProviders, agno `description=` /
    `instructions=` / `additional_context=`, crewAI `role=` / `goal=` /
    `backstory=`, LangGraph `create_react_agent(prompt=...)`, camel
    `ChatAgent`'s first argument, openai-agents `handoff_description=`),
    `x.system_prompt = ...` attributes and `system_prompt` class fields, the
    return value of `@agent.system_prompt` / `@agent.instructions` functions
    and of functions given as `instructions=`, system and developer messages
    (dicts, `dict(role=...)`, the SDKs' typed params, LangChain `("system",
    ...)` tuples, `SystemMessage`, LlamaIndex `ChatMessage(role=MessageRole.SYSTEM)`,
    Haystack `ChatMessage.from_system`, Semantic Kernel `add_system_message`;
    the role read by value in any case: `"SYSTEM"`, `Role.SYSTEM`, a constant
    holding `"system"`; a user, assistant, tool or function message is a turn,
    not the prefix), prompt templates' text, blocks carrying `cache_control` or
    `prompt_cache_breakpoint`, and prefixkit's `Segment.static` /
    `Segment.versioned` (see "How the linter works" in the linter guide).
    agno's `add_datetime_to_context=True` is reported too when the agent or
    team puts reusable content after the time agno writes into its system
    message (tool instructions, expected output, additional context,
    memories, knowledge, the history; a value the linter cannot know counts);
    a one-shot agent with nothing after the time is not. A random pick among
    a few fixed options (`random.choice` / `choices` / `sample` over a literal
    list or tuple of constants, a name bound only to one, or `range(len(x))`,
    an index into one collection) is not reported: each variant caches on its
    own.
    Neither is a message appended at the end of a conversation log, whatever
    its role (`state["messages"] + [SystemMessage(...)]`, `history.append(msg)`,
    `[*history, msg]`, `self.log.record(msg)` where `record` appends its
    parameter to a log, a notice appended to a list the code built once it
    holds a user or assistant turn): it is the log's tail, after everything
    cached, and stays as it is in later requests. A system message that
    starts a list before any turn, is inserted at 0 or is put before the
    history is the prefix and is reported.
    Values are followed through f-strings, `.format`, `%`, `+`, `"".join`,
    message factories, variables, back from a parameter to what the module's
    calls pass for it, the functions and methods of the same module, and the
    functions, static and class methods and module constants imported from
    the project's other modules (never from installed packages); imports are
    resolved under aliases. A value computed in another module is reported on
    the call or name that brings it in, naming the file and line where it is
    computed.

    The project's own message classes count by what they are given, not by
    their names: a class called with a system or developer role by value
    (`Message("system", text)`, `ChatMessageSimple(message=text,
    message_type=MessageType.SYSTEM)`, a role held by `self.<attr>`) is a
    system message; a class of the project named `SystemMessage` that no model
    reads is not. A tool given as a function (`tools=[self.search]`) brings its
    definition into the prompt, not what it returns when called.

    The message says when the value changes: on every request (a clock or
    uuid computed per call, an attribute a method counts on every call,
    `self.turn += 1`), on every pass of the loop that sends the requests
    (a counter or accumulator, `f"cycle {step} of {n}"`, in a prompt built in
    that loop), once a day (`date.today()`, or a clock formatted to the day),
    or on every process start, and how much fixed text follows the value (in
    tokens). When it changes follows where the value is evaluated, not names:
    once per process in a module or class body or a default argument (at
    import, or when a notebook cell runs), in a function called there
    (`SYSTEM = build()`, not in a loop), or in a cached function without
    parameters (`@functools.cache` / `@lru_cache`, each later call returns
    the first result); a pid or hostname too. The same clock in a function
    called per request, a lambda called per request, or a default of `None`
    replaced in the body (`now = now or datetime.now()`) changes per request.
    A value that ends the cached text is reported with what it still costs
    (the messages after it), and not at all when the prompt is sent once with
    only the user turn after it (`[SystemMessage(content=f"...{today}"),
    HumanMessage(...)]`): nothing reusable follows it. Nor is a value fixed
    for the whole conversation (computed once per process, in `__init__`
    when the object holding the conversation is built, or before the loop
    that sends the conversation's requests in the function that writes its
    messages, not given a history) that ends the system
    prompt (`system=`, `instructions=`, a system message's content): only that
    conversation's own messages follow it. A volatile value in the
    latest user message is not reported: that is where it belongs.

    ## Why it breaks caching
    A provider reuses a cached prefix only when it is byte-identical. A
    timestamp or uuid in the system prompt makes every request's prefix new:
    every call pays a cache write (1.25x input price on Anthropic) and never
    reads one, and nothing reports the miss.

    ## Example
    ```python
    from datetime import datetime as dt

    SYSTEM = f"You are a support agent. Today is {dt.now():%Y-%m-%d}."
    client.messages.create(model=MODEL, system=SYSTEM, messages=messages)
    ```

    ## Use instead
    ```python
    SYSTEM = "You are a support agent."
    today = f"Today is {dt.now():%Y-%m-%d}."
    client.messages.create(
        model=MODEL,
        system=SYSTEM,
        messages=[*history, {"role": "user", "content": f"{today}\\n{question}"}],
    )
    ```
    """

    code = "PFX001"
    name = "volatile-value-in-cached-segment"

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each volatile origin once, where it is produced, saying when it changes."""
        for segment, taint in context.segment_taints:
            if taint.kind != "volatile":
                continue
            if taint.period == "step" and not _inside(context, segment, taint.loop):
                continue  # a counter of a loop that builds the text, not one that sends it
            following = context.following(segment, taint)
            if taint.period != "process" and sent_once_at_end(
                following, segment, context.parents(segment.function), context.analysis
            ):
                continue  # it ends a prompt sent once, with only the user turn after it
            if (
                following is not None
                and following.at_end
                and _fixed_for_the_conversation(context, segment, taint)
                and _opens_the_conversation(context, segment)
            ):
                continue  # it ends the system prompt: only the conversation's messages follow
            message = _message(context, segment, taint, following)
            yield context.finding(self.code, taint.origin, message)
        for flag in datetime_flags(context.index, context.analysis):
            yield context.finding(self.code, flag.node, _flag_message(flag))


def _fixed_for_the_conversation(context: LintContext, segment: CachedSegment, taint: Taint) -> bool:
    """Whether the value stays the same for a whole conversation: computed once per process,
    when the object holding the conversation is built (in `__init__`), or, in the function
    that runs the conversation, before the loop that sends its requests."""
    if taint.period == "process":
        return True
    origin = taint.origin
    built_in = context.call_sites.enclosing(origin) if isinstance(origin, cst.Call) else None
    if isinstance(built_in, cst.FunctionDef) and built_in.name.value in CONSTRUCTOR_METHODS:
        return True
    return (
        built_in is not None
        and built_in is segment.function
        and _before_the_loop(context, segment.function, origin)
        and _starts_the_conversation(context, segment)
    )


def _starts_the_conversation(context: LintContext, segment: CachedSegment) -> bool:
    """Whether the messages after the segment are built in its function (not a history
    it was given, which earlier calls sent after another value): the segment's message
    list, or the `messages=` / `input=` of the request it is the system prompt of, holds
    only messages written there (dicts, constructor calls)."""
    parents = context.parents(segment.function)
    node: cst.CSTNode = segment.node
    parent = parents.get(node)
    while parent is not None and parent is not segment.function:
        if isinstance(parent, cst.List):
            # a message after it, each written out here
            return parent.elements[-1] is not node and _written_here([parent])
        if isinstance(parent, cst.Call):
            given = [
                arg.value
                for arg in parent.args
                if arg.keyword is not None and arg.keyword.value in ("messages", "input")
            ]
            if given:  # the request (a message's own constructor has no messages)
                env = Env(segment.function)
                lists = [
                    v for given_node in given for v, _ in context.analysis.resolve(given_node, env)
                ]
                return _written_here(lists)
        node, parent = parent, parents.get(parent)
    return False


def _written_here(lists: list[cst.BaseExpression]) -> bool:
    """Whether each of `lists` is a list literal of messages written out (no `*history`,
    no message passed in)."""
    return all(
        isinstance(value, cst.List)
        and all(
            isinstance(element, cst.Element) and isinstance(element.value, (cst.Dict, cst.Call))
            for element in value.elements
        )
        for value in lists
    )


def _before_the_loop(context: LintContext, function: FunctionNode, origin: cst.CSTNode) -> bool:
    """Whether `function` sends requests in a loop that `origin` is outside of."""
    parents = context.parents(function)
    for call, sender in context.index.requests:
        if sender is not function or not _sends(call):
            continue
        node: cst.CSTNode | None = parents.get(call)
        while node is not None and node is not function:
            if isinstance(node, (cst.For, cst.While)) and not _within(parents, origin, node):
                return True
            node = parents.get(node)
    return False


def _opens_the_conversation(context: LintContext, segment: CachedSegment) -> bool:
    """Whether the segment is a whole system prompt, which only the conversation's messages
    follow: a `system=`-like argument or a message's `content` (not a tool's description,
    a cache-marked block or a part of a prompt that other parts follow)."""
    parent = context.parents(segment.function).get(segment.node)
    if isinstance(parent, cst.Arg):
        return parent.keyword is not None and parent.keyword.value in _SYSTEM_PROMPT_KEYWORDS
    if isinstance(parent, cst.DictElement):
        return string_value(parent.key) == "content"
    return False


def _flag_message(flag: DatetimeFlag) -> str:
    keyword = flag.node.keyword.value if flag.node.keyword is not None else "?"
    when = (
        "once a day (its `datetime_format` shows the date only)" if flag.daily else "on every run"
    )
    following = ", ".join(
        what if param == "**" else f"{what} (`{param}=`)" for what, param in flag.following
    )
    return (
        f"`{keyword}=` (true) puts the current time into {flag.entry.framework}'s system prompt: "
        f"{flag.entry.datetime_note}; after it come {following}, so that prompt changes {when} "
        f"and its cached prefix stops matching from the time on; drop the flag and put the "
        f"date in the message you run the agent with (the latest user message)"
    )


def _message(
    context: LintContext, segment: CachedSegment, taint: Taint, following: Following | None
) -> str:
    where = f"{segment.label} (line {context.line_of(segment.node)})"
    if following is not None and not following.at_end:
        where += f"; {following.describe()}"
    daily = ""
    if taint.period == "day" and _callable(taint) not in DAILY_CALLABLES:
        daily = " formatted to the day"
    detail = _subject(taint, daily)
    if taint.via is not None:
        daily = ""  # said in the subject
    if taint.period == "process":
        return _per_process(context, taint, detail, where)
    tail = following is not None and following.at_end
    if taint.period == "step" and taint.loop is not None:
        loop = f"the loop at line {context.line_of(taint.loop)}"
        if tail:
            return (
                f"{detail} ends {where}: {loop} sends a request on every pass, so the messages "
                "after it are never cached; keep the prompt fixed and put the step's state in "
                "the latest user message"
            )
        return (
            f"{detail} reaches {where}: {loop} sends a request on every pass, so each pass "
            "writes a new cache entry from there on; keep the prompt fixed and put the "
            "step's state in the latest user message"
        )
    if taint.period == "day":
        if tail:
            return (
                f"{detail}{daily} changes once a day and ends {where}: the text before it "
                "stays cached, but once a day the messages after it are written to the cache "
                "again; acceptable for most apps, or move it into the latest user message"
            )
        return (
            f"{detail}{daily} changes once a day and reaches {where}: the prefix from "
            "there on is written to the cache again each day (and differs between servers in "
            "other time zones); put it at the end of the cached text if a daily rewrite is "
            "acceptable, or move it into the latest user message"
        )
    if tail:
        return (
            f"{detail} changes on every request and ends {where}: the text before it can "
            "still be cached, but the messages after it never are; move it into the latest "
            "user message"
        )
    return (
        f"{detail} changes on every request and reaches {where}, so the cached prefix "
        "never matches: move it after the cached part (e.g. into the latest user message)"
    )


def _per_process(context: LintContext, taint: Taint, detail: str, where: str) -> str:
    """The message of a value evaluated once per process: where it is evaluated."""
    stale = ", and the date or time in it goes stale" if _is_date(taint) else ""
    changes = (
        "it changes on every process start (deploy, restart, each worker), so each process "
        f"writes its own cache entry{stale}; use a fixed value, or put it in the latest user "
        "message"
    )
    via = taint.via
    if via is not None and (via.at_import or via.cached):
        when = (
            f"computed once when {via.path} is loaded"
            if via.at_import
            else "computed once per process by a cached function there"
        )
        return f"{via.describe(taint.detail)}, {when}, and reaches {where}: {changes}"
    if context.analysis.at_import(taint.origin):
        return (
            f"{detail} is computed once, when the module is loaded (at import, or when a "
            f"notebook cell runs), and reaches {where}: {changes}"
        )
    if isinstance(taint.once, cst.Call):
        callee = ".".join(dotted_parts(taint.once.func) or ["the function"])
        line = context.line_of(taint.once)
        return (
            f"{detail} is computed once, when `{callee}()` is called at import (line {line}), "
            f"and reaches {where}: {changes}"
        )
    if isinstance(taint.once, cst.FunctionDef):
        line = context.line_of(taint.once)
        return (
            f"{detail} is computed once per process, on the first call of "
            f"`{taint.once.name.value}()` (line {line}), whose result is cached, and reaches "
            f"{where}: {changes}"
        )
    return (
        f"{detail} differs between processes and hosts and reaches {where}: each "
        "worker writes its own cache entry; use a fixed value, or put it in the latest "
        "user message"
    )


def _subject(taint: Taint, daily: str) -> str:
    """What the message starts with: the value, or (from another module) where it comes from."""
    if taint.via is None:
        return taint.detail
    return f"{taint.via.describe(taint.detail + daily)}, which"


def _callable(taint: Taint) -> str:
    return taint.detail.strip("`").removesuffix("()")


def _is_date(taint: Taint) -> bool:
    return _callable(taint).split(".")[0] in ("datetime", "time", "pendulum", "arrow")


def _inside(context: LintContext, segment: CachedSegment, loop: cst.CSTNode | None) -> bool:
    """Whether the segment is in the body of `loop` (the prompt is rebuilt on every pass)
    and the loop sends the requests."""
    parents = context.parents(segment.function)
    if loop is None or not _within(parents, segment.node, loop):
        return False
    # the loop sends the requests: a provider request call is in its body
    return any(
        function is segment.function and _sends(call) and _within(parents, call, loop)
        for call, function in context.index.requests
    )


def _sends(call: cst.Call) -> bool:
    """A request sent (`client.messages.create(...)`), not an object built (`Agent(tools=...)`)."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else None
    if isinstance(func, cst.Name):
        name = func.value
    return name is not None and not name[:1].isupper()


def _within(
    parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode, outer: cst.CSTNode
) -> bool:
    current: cst.CSTNode | None = node
    while current is not None:
        if current is outer:
            return True
        current = parents.get(current)
    return False
