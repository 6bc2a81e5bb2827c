"""PFX004 set-order-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import PythonRule

__all__ = ["SetOrderInCachedSegment"]


class SetOrderInCachedSegment(PythonRule):
    """Iteration order of a `set` or `frozenset` reaches a cached segment.

    Covers loops and comprehensions over a set (including tool lists built
    from a set of names), `"".join(a_set)`, `list(a_set)`, `list(set(...))`,
    `str()` / `repr()` of a set, the keys, values or items of a dict built
    from a set, and a set passed to a helper that iterates over its
    parameter. Tool classes (smolagents `Tool`, `BaseTool`) count as tools:
    their `description` and `inputs`. Sets of ints, bools and `None` are not
    reported: their hashes, and so their order, are the same in every
    process. `sorted(...)` makes the order deterministic; the fix is safe
    when the elements are known to be strings, and unsafe otherwise
    (`sorted` raises on elements that do not compare).

    ## Why it breaks caching
    String hashing is randomised per process (`PYTHONHASHSEED`), so a set of
    strings iterates in a different order in every worker and after every
    restart. Tool lists and prompt text built from it differ between
    processes, and each process writes its own cache entry. Safe fix: wrap
    the set in `sorted(...)`.

    ## Example
    ```python
    ENABLED = {"search", "calculator", "weather"}
    TOOLS = [TOOL_SPECS[name] for name in ENABLED]
    ```

    ## Use instead
    ```python
    TOOLS = [TOOL_SPECS[name] for name in sorted(ENABLED)]
    ```
    """

    code = "PFX004"
    name = "set-order-in-cached-segment"
    fix_applicability = "safe"

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each set whose order leaks; offer to wrap it in `sorted(...)`."""
        for segment, taint in context.segment_taints:
            if taint.kind != "set" or not isinstance(taint.origin, cst.BaseExpression):
                continue
            elements = context.analysis.set_elements(taint.origin, Env(segment.function))
            if elements == "stable":
                continue  # ints and None hash alike in every process: the order is fixed
            start, end = context.span(taint.origin)
            fix = Fix(
                "Wrap the set in `sorted(...)`",
                (Edit(start, start, "sorted("), Edit(end, end, ")")),
                # sorted() raises on elements that do not compare (objects, mixed types)
                "safe" if elements == "str" else "unsafe",
            )
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} and reaches {segment.label} "
                f"(line {context.line_of(segment.node)}): set order changes between processes; "
                "iterate over `sorted(...)` instead",
                fix,
            )
