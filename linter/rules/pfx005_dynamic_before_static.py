"""PFX005 dynamic-before-static."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.cached_segments import callee_names
from ..analysis.syntax import FunctionNode
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["DynamicBeforeStatic"]

_DYNAMIC_KINDS = frozenset({"request", "identity", "volatile"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ORDERED_KEYWORDS = frozenset({"system", "context"})
_DYNAMIC_SEGMENTS = frozenset({"Segment.session", "Segment.dynamic"})
_STATIC_SEGMENTS = frozenset({"Segment.static", "Segment.versioned"})


class DynamicBeforeStatic(PythonRule):
    """Request data sits before a static system or context entry.

    Looks at lists of messages, `system=` block lists and prefixkit
    `Prompt(system=..., context=...)`: an entry built from request data (a
    parameter of the function, a per-user value, the clock, or
    `Segment.session` / `Segment.dynamic`) placed before a static system
    entry (a constant `system` / `developer` message, `SystemMessage`, or
    `Segment.static` / `Segment.versioned`).

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
