"""PFX003 unsorted-json-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.key_order import KeyOrder
from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import PythonRule

__all__ = ["UnsortedJsonInCachedSegment"]


class UnsortedJsonInCachedSegment(PythonRule):
    """`json.dumps` of a dict whose key order varies reaches a cached segment.

    Reported only where the module shows the order can change between runs or
    requests with equal data: the dict is built by iterating a set (string
    hashes change with `PYTHONHASHSEED`, so each process may order the keys
    differently) or a directory listing, filled in a loop over one, or merged
    from data each caller passes (`{**defaults, **overrides}`,
    `d.update(extra)`). A literal dict, a schema generated from a Pydantic
    model (`model_json_schema()`, `TypeAdapter(...).json_schema()`) and
    `model_dump()` keep their order on every run and are not reported: their
    order is often deliberate (a `reasoning` field first).

    A JSON schema or a tool definition keeps the order its authors wrote, as
    prefixkit's SDK sends schemas as written: the model reads a schema's
    `properties` in that order. One is recognised by what it is: a dict with
    `properties`, `"type": "object"`, `$schema`, `input_schema` or
    `parameters` (or a list or dict holding one), a value also sent as
    `tools=`, or what a schema API returns (`model_json_schema()`,
    `TypeAdapter(...).json_schema()`). Merging one with data a caller passes
    is not reported (its order is the callers' to write), and where its keys
    do come from a set or a directory listing the finding offers no
    `sort_keys=True`, which would reorder every property: build it in a fixed
    order instead.

    ## Why it breaks caching
    `json.dumps` writes keys in insertion order. When that order changes, the
    same data serialises to different bytes and the cached prefix stops
    matching: every process start (or every caller) writes a new cache entry.

    ## Example
    ```python
    TOOLS = {"search", "fetch", "summarise"}
    ARGS = {name: {"type": "string"} for name in TOOLS}
    SYSTEM = "Call tools with JSON arguments:\\n" + json.dumps(ARGS, indent=2)
    ```

    ## Use instead
    Build the dict in a fixed order (iterate `sorted(TOOLS)`), or pass
    `sort_keys=True`. The fix adds `sort_keys=True`; it is unsafe (applied
    only with `--unsafe-fixes`) because it reorders the keys, so what the
    program sends changes once, and any order the prompt relied on is lost.
    ```python
    SYSTEM = "Call tools with JSON arguments:\\n" + json.dumps(ARGS, indent=2, sort_keys=True)
    ```
    """

    code = "PFX003"
    name = "unsorted-json-in-cached-segment"
    fix_applicability = "unsafe"

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report unsorted `json.dumps` of a dict whose key order can vary; offer
        `sort_keys=True` unless it holds a schema or a tool definition."""
        key_order: KeyOrder | None = None
        for segment, taint in context.segment_taints:
            if taint.kind != "json" or not isinstance(taint.origin, cst.Call):
                continue
            dumped = _dumped(taint.origin)
            if dumped is None:
                continue
            key_order = key_order or KeyOrder(context.module, context.analysis, context.call_sites)
            env = Env(key_order.sites.enclosing(taint.origin))
            authored = key_order.authored(dumped, env)
            reason = key_order.unstable(dumped, env, merges=authored is None)
            if reason is None:
                continue
            found = (
                f"{taint.detail} reaches {segment.label} "
                f"(line {context.line_of(segment.node)}), and the dict's key order can change "
                f"between runs: {reason}"
            )
            if authored is not None:
                # sort_keys would reorder the schema's properties, whose order is meaning
                yield context.finding(
                    self.code,
                    taint.origin,
                    f"{found}; it holds {authored}, whose key order is meaning (properties are "
                    "read in the order written): build it in a fixed order (iterate over "
                    "`sorted(...)`) rather than sorting its keys",
                )
                continue
            yield context.finding(
                self.code,
                taint.origin,
                f"{found}; build it in a fixed order or pass `sort_keys=True`",
                _fix(context, taint.origin),
            )


def _dumped(call: cst.Call) -> cst.BaseExpression | None:
    """The object `json.dumps` serialises (first positional argument or `obj=`)."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "obj":
            return arg.value
    return None


def _fix(context: LintContext, call: cst.Call) -> Fix | None:
    """Add (or set) `sort_keys=True`: unsafe, since it changes the bytes sent."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "sort_keys":
            start, end = context.span(arg.value)
            return Fix(
                "Set `sort_keys=True`",
                (Edit(start, end, "True"),),
                applicability="unsafe",
            )
    if not call.args:
        return None
    _, end = context.span(call.args[-1].value)
    return Fix(
        "Add `sort_keys=True`",
        (Edit(end, end, ", sort_keys=True"),),
        applicability="unsafe",
    )
