"""PFX007 long-ttl-after-short-ttl."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["LongTtlAfterShortTtl"]


class LongTtlAfterShortTtl(PythonRule):
    """A 1-hour `cache_control` breakpoint comes after a 5-minute one.

    Breakpoints are taken in prefix order: tools, then system, then messages.
    A `cache_control` without `ttl` is a 5-minute breakpoint.

    ## Why it breaks caching
    Anthropic requires entries with a longer TTL to come before shorter ones;
    a 1h breakpoint after a 5m one is rejected, and the layout it suggests
    (a long-lived entry extending a short-lived one) cannot be served once
    the 5m entry expires.

    ## Example
    ```python
    system=[
        {"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": CATALOG, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    ```

    ## Use instead
    Put the long-lived (1h) breakpoint first, or give both the same TTL.
    """

    code = "PFX007"
    name = "long-ttl-after-short-ttl"

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each 1h breakpoint that follows a shorter one in the same request."""
        for request in context.requests:
            shorter_line: int | None = None
            for block in request.blocks:
                if block.marker is None or block.marker_kind != "cache_control":
                    continue
                if block.ttl == "1h" and shorter_line is not None:
                    yield context.finding(
                        self.code,
                        block.marker,
                        f"this 1h breakpoint follows a {'shorter'} breakpoint on line "
                        f"{shorter_line}: longer TTLs must come first in the prefix "
                        "(tools, system, messages); move it earlier or use the same TTL",
                    )
                elif block.ttl != "1h" and shorter_line is None:
                    shorter_line = context.line_of(block.marker)
