"""PFX005 dynamic-before-static."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.cached_segments import CachedSegment, callee_names
from ..analysis.position import Following
from ..analysis.syntax import FunctionNode
from ..analysis.taint import Taint
from ..catalog import CONSTRUCTOR_METHODS
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["DynamicBeforeStatic"]

_DYNAMIC_KINDS = frozenset({"request", "identity", "volatile"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ORDERED_KEYWORDS = frozenset({"system", "context"})
# request data in a text: a parameter, or what an opaque call returns for one (`taint`)
_REQUEST_KINDS = frozenset({"request", "derived"})
_REPORTED_ELSEWHERE = frozenset({"identity", "volatile"})  # PFX002, PFX001
# fixed text after request data worth caching: about 100 tokens of English prose
_REUSABLE_CHARS = 400
_DYNAMIC_SEGMENTS = frozenset({"Segment.session", "Segment.dynamic"})
_STATIC_SEGMENTS = frozenset({"Segment.static", "Segment.versioned"})


class DynamicBeforeStatic(PythonRule):
    """Request data sits before a static system or context entry, or before the fixed text of its own prompt.

    Looks at lists of messages, `system=` block lists and prefixkit
    `Prompt(system=..., context=...)`: an entry built from request data (a
    parameter of the function, a per-user value, the clock, or
    `Segment.session` / `Segment.dynamic`) placed before a static system
    entry (a constant `system` / `developer` message, `SystemMessage`, or
    `Segment.static` / `Segment.versioned`).

    Inside one cached text (a system prompt, a template rendered into it):
    the first request data (a parameter of the function that sends the prompt,
    or what a call it cannot see into returns for one, such as retrieved
    context) placed before at least about 100 tokens of fixed text. A text
    built in `__init__`, or given to an agent its function builds and returns,
    is the object's configuration and not counted; identity and the clock are
    PFX002's and PFX001's.

    ## Why it breaks caching
    A cached prefix ends at the first byte that differs. With a conversation
    summary or the user's history ahead of the static instructions, the
    instructions come after a changing entry and are never reused.

    ## Example
    ```python
    messages = [
        {"role": "system", "content": f"Conversation so far: {summary}"},
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]
    ```

    ## Use instead
    ```python
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "system", "content": f"Conversation so far: {summary}"},
        {"role": "user", "content": question},
    ]
    ```
    """

    code = "PFX005"
    name = "dynamic-before-static"

    def check(self, context: LintContext) -> Iterator[Finding]:
        yield from self._entries(context)
        yield from self._within_text(context)

    def _within_text(self, context: LintContext) -> Iterator[Finding]:
        """Report the first request data that fixed text follows inside a cached segment
        (once per segment: from that value on, the text changes)."""
        reported_elsewhere = {
            id(taint.origin)
            for _, taint in context.segment_taints
            if taint.kind in _REPORTED_ELSEWHERE
        }
        broken = _broken_from(context)
        first: dict[int, tuple[CachedSegment, Taint, Following]] = {}
        for segment, taint in context.segment_taints:
            if taint.kind not in _REQUEST_KINDS or id(taint.origin) in reported_elsewhere:
                continue
            function = segment.function
            if isinstance(function, cst.FunctionDef) and function.name.value in CONSTRUCTOR_METHODS:
                continue  # fixed when the object is built, for every request it serves
            if context.built_for_later(segment):
                continue  # an agent built with it and handed back: its configuration
            following = context.following(segment, taint)
            if following is None or following.chars < _REUSABLE_CHARS:
                continue
            earlier = broken.get(id(segment.node))
            if earlier is not None and (following.values, following.chars) <= earlier:
                continue  # a clock or a user's id before it already changes the text
            known = first.get(id(segment.node))
            if known is None or _sooner((following, taint), (known[2], known[1])):
                first[id(segment.node)] = (segment, taint, following)
        for segment, taint, following in first.values():
            # where the value is put into the text: the fix reorders the text there
            yield context.finding(
                self.code,
                following.piece or taint.origin,
                f"{taint.detail} is request data in {segment.label} (line "
                f"{context.line_of(segment.node)}) and {following.describe()}: from this "
                "value on the text changes with every request and is never served from "
                "cache; put the fixed text first and the request data after it (or in the "
                "user turn)",
            )

    def _entries(self, context: LintContext) -> Iterator[Finding]:
        """Report each dynamic entry that precedes a static system entry in the same list."""
        ordered = {
            id(arg.value)
            for call, _ in context.index.requests
            for arg in call.args
            if arg.keyword is not None and arg.keyword.value in _ORDERED_KEYWORDS
        }
        for node, function in context.index.lists:
            all_system = id(node) in ordered
            kinds = [self._kind(context, e, function, all_system) for e in node.elements]
            if "static" not in kinds:
                continue
            last_static = max(i for i, kind in enumerate(kinds) if kind == "static")
            static_line = context.line_of(node.elements[last_static])
            for position, kind in enumerate(kinds[:last_static]):
                if kind == "dynamic":
                    yield context.finding(
                        self.code,
                        node.elements[position],
                        "this entry changes per request but comes before the static system "
                        f"entry on line {static_line}, which therefore is never served from "
                        "cache: move the static entries first",
                    )

    def _kind(
        self,
        context: LintContext,
        element: cst.BaseElement,
        function: FunctionNode | None,
        all_system: bool,
    ) -> str | None:
        analysis = context.analysis
        env = Env(function)
        value = element.value
        taints = {t.kind for t in analysis.taints(value, env)}
        dynamic = bool(taints & _DYNAMIC_KINDS)
        if isinstance(value, cst.Call):
            names = {".".join(n.split(".")[-2:]) for n in callee_names(value, analysis)}
            if names & _DYNAMIC_SEGMENTS:
                return "dynamic"
            if names & _STATIC_SEGMENTS or any(n.endswith("SystemMessage") for n in names):
                return "dynamic" if dynamic else "static"
        if isinstance(element, cst.StarredElement):
            return "dynamic" if dynamic else None
        entries = analysis.entries(value, env)
        role = entries.get("role")
        is_system = all_system or (
            role is not None
            and isinstance(role[0], cst.SimpleString)
            and role[0].evaluated_value in _SYSTEM_ROLES
        )
        if dynamic:
            return "dynamic"
        return "static" if is_system else None


def _sooner(one: tuple[Following, Taint], other: tuple[Following, Taint]) -> bool:
    """Whether one value sits earlier in the same text than the other (at the same place,
    what a call returns names the value better than the parameter it is called on)."""

    def place(value: tuple[Following, Taint]) -> tuple[int, int, bool]:
        following, taint = value
        return following.values, following.chars, taint.kind == "derived"

    return place(one) > place(other)


def _broken_from(context: LintContext) -> dict[int, tuple[int, int]]:
    """Per segment, where the first value PFX001 or PFX002 reports sits in its text (what
    follows it: other values, fixed characters)."""
    broken: dict[int, tuple[int, int]] = {}
    for segment, taint in context.segment_taints:
        if taint.kind not in _REPORTED_ELSEWHERE:
            continue
        following = context.following(segment, taint)
        if following is not None:
            place = (following.values, following.chars)
            broken[id(segment.node)] = max(broken.get(id(segment.node), place), place)
    return broken
