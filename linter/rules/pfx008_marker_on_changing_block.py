"""PFX008 marker-on-changing-block."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.call_sites import CallSites
from ..analysis.taint import Taint
from ..catalog import is_system_role
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["MarkerOnChangingBlock"]

_MAX_CALLERS_DEPTH = 4


class MarkerOnChangingBlock(PythonRule):
    """A cache breakpoint sits on a system or tool block whose text is shown to change per request.

    Reported when the marked block is built from a value the module shows to
    change on every request: the clock read on each call (`datetime.now()`,
    `time.time()`), a fresh id (`uuid4()`), a per-user value (`user_id`,
    `customer.email`), or a parameter that a call in the same module fills
    with one of those. A bare parameter (`def ask(rules, question)` with the
    breakpoint on `rules`, or a helper `call_llm(system_prompt, user_msg)`)
    is not reported: the caller may well pass the same text every time, and
    the rule cannot tell. Values that change per day or per process start
    (a date, a constant formatted at import, a value computed by a call made
    at import or by a cached function without parameters) are PFX001's; a
    breakpoint on the latest user turn is the recommended rolling pattern and
    is not reported.

    ## Why it breaks caching
    A breakpoint asks the provider to write everything up to it into the
    cache. When that block differs on every request, each request pays the
    write premium (1.25x input on Anthropic) and no later request can read it.

    ## Example
    ```python
    def ask(client, user_id, question):
        return client.messages.create(
            system=[{"type": "text", "text": f"Account: {user_id}",
                     "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": question}],
        )
    ```

    ## Use instead
    Put the breakpoint on the last static block, and the changing text after it:
    ```python
    system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": f"Account: {user_id}"}]
    ```
    """

    code = "PFX008"
    name = "marker-on-changing-block"

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report marked system/tool blocks whose content is shown to change per request."""
        for request in context.requests:
            for block in request.blocks:
                if block.marker is None:
                    continue
                if block.part == "messages" and not is_system_role(block.role):
                    continue
                taints = [
                    taint
                    for value, env in block.content
                    for taint in context.analysis.taints(value, env)
                ]
                if not any(t.kind in ("identity", "volatile", "request") for t in taints):
                    continue
                reasons = [
                    (context.line_of(origin), detail)
                    for taint in taints
                    for origin, detail in [_per_request(taint, context, context.call_sites, 0)]
                    if origin is not None
                ]
                if reasons:
                    # the first in the source: taints come as a set, in no stable order
                    _, detail = min(reasons)
                    part = f"{block.role} message" if block.part == "messages" else block.part
                    yield context.finding(
                        self.code,
                        block.marker,
                        f"this breakpoint marks a {part} block built from {detail}, which "
                        "changes on every request: each request writes a new cache entry that "
                        "no later request reads; put the breakpoint on the last static block "
                        "instead",
                    )


def _per_request(
    taint: Taint, context: LintContext, sites: CallSites, depth: int
) -> tuple[cst.CSTNode | None, str]:
    """Where and why `taint` changes per request; (None, "") when not shown to."""
    if taint.kind == "identity" or (taint.kind == "volatile" and taint.period == "request"):
        return taint.origin, f"{taint.detail} (line {context.line_of(taint.origin)})"
    if taint.kind != "request" or depth >= _MAX_CALLERS_DEPTH:
        return None, ""
    if not isinstance(taint.origin, cst.Name):
        return None, ""
    param = sites.parameter(taint.origin)
    function = context.analysis.index.param_function.get(id(param)) if param else None
    if param is None or function is None:
        return None, ""
    for call, enclosing, method in sites.callers(function):
        argument = context.analysis.arguments(function, call, method).get(id(param))
        if argument is None:
            continue
        for fed in context.analysis.taints(argument, Env(enclosing)):
            origin, detail = _per_request(fed, context, sites, depth + 1)
            if origin is not None:
                return taint.origin, (
                    f"parameter `{param.name.value}` (line {context.line_of(taint.origin)}), "
                    f"filled by the call on line {context.line_of(call)} with {detail}"
                )
    return None, ""
