"""PFX006 too-many-cache-markers."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..catalog import MAX_CACHE_MARKERS
from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

__all__ = ["TooManyCacheMarkers"]


class TooManyCacheMarkers(PythonRule):
    """One request carries more than 4 cache breakpoints.

    Counts `cache_control` / `prompt_cache_breakpoint` blocks in `tools=`,
    `system=` and `messages=` (following variables and helpers), plus a
    top-level `cache_control=` (automatic mode uses one breakpoint). Blocks
    the module does not show are not counted, so the count is a lower bound.

    ## Why it breaks caching
    Anthropic rejects the request with HTTP 400 ("A maximum of 4 blocks with
    cache_control may be provided"); OpenAI caps explicit writes at 4 per
    request as well. Frameworks that inject markers often push the count over.

    ## Example
    ```python
    system = [{"type": "text", "text": part, "cache_control": EPHEMERAL} for part in PARTS]
    ```

    ## Use instead
    Keep at most four breakpoints: the last tool, the end of the system
    prompt, and the latest user turn (a rolling breakpoint).
    """

    code = "PFX006"
    name = "too-many-cache-markers"
    _FOUR = (
        "CC = {'type': 'ephemeral'}\n"
        "def ask(client, history, q):\n"
        "    return client.messages.create(\n"
        "        tools=[{'name': 'a', 'input_schema': {}, 'cache_control': CC}],\n"
        "        system=[{'type': 'text', 'text': 'A', 'cache_control': CC},\n"
        "                {'type': 'text', 'text': 'B', 'cache_control': {'type': 'ephemeral', 'ttl': '1h'}}],\n"
        "        messages=[*history, {'role': 'user', 'content': [\n"
        "            {'type': 'text', 'text': q, 'cache_control': CC}]}],\n"
        "    )\n"
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report requests with more markers than the provider accepts."""
        for request in context.requests:
            markers = [block for block in request.blocks if block.marker is not None]
            automatic = any(
                arg.keyword is not None
                and arg.keyword.value == "cache_control"
                and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
                for arg in request.call.args
            )
            count = len(markers) + int(automatic)
            if count <= MAX_CACHE_MARKERS:
                continue
            lines = sorted({context.line_of(block.marker) for block in markers if block.marker})
            where = ", ".join(str(line) for line in lines)
            auto = " plus automatic caching (top-level cache_control)" if automatic else ""
            yield context.finding(
                self.code,
                request.call.func,
                f"this request carries {count} cache breakpoints (lines {where}{auto}); "
                f"providers accept at most {MAX_CACHE_MARKERS} (Anthropic answers HTTP 400): "
                "keep the last tool, the end of the system prompt and the latest user turn",
            )
