"""PFX008 marker-on-changing-block."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Finding
from ..rule import Invalid, PythonRule, Valid

__all__ = ["MarkerOnChangingBlock"]

_CHANGING = frozenset({"request", "identity", "volatile"})
_CACHED_ROLES = frozenset({"system", "developer"})


class MarkerOnChangingBlock(PythonRule):
    """A cache breakpoint sits on a system or tool block whose text changes per request.

    The block's text comes from the request (a parameter of the function
    that builds the request, followed through helpers), a per-user value or
    the clock. Breakpoints on the latest user turn are the recommended rolling
    pattern and are not reported.

    ## Why it breaks caching
    A breakpoint asks the provider to write everything up to it into the
    cache. When that block differs on every request, each request pays the
    write premium (1.25x input on Anthropic) and no later request can read it.

    ## Example
    ```python
    def ask(client, summary, question):
        return client.messages.create(
            system=[{"type": "text", "text": f"Summary: {summary}",
                     "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": question}],
        )
    ```

    ## Use instead
    Put the breakpoint on the last static block, and the changing text after it:
    ```python
    system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": f"Summary: {summary}"}]
    ```
    """

    code = "PFX008"
    name = "marker-on-changing-block"
    VALID = (
        Valid(
            "RULES = 'Rules.'\n"
            "def ask(client, summary, question):\n"
            "    return client.messages.create(\n"
            "        system=[{'type': 'text', 'text': RULES, 'cache_control': {'type': 'ephemeral'}},\n"
            "                {'type': 'text', 'text': f'Summary: {summary}'}],\n"
            "        messages=[{'role': 'user', 'content': [\n"
            "            {'type': 'text', 'text': question, 'cache_control': {'type': 'ephemeral'}}]}])\n"
        ),
        # a helper that builds marked blocks, called with constants
        Valid(
            "def cached(text):\n"
            "    return {'type': 'text', 'text': text, 'cache_control': {'type': 'ephemeral'}}\n"
            "RULES = 'Rules.'\n"
            "def ask(client, question):\n"
            "    return client.messages.create(system=[cached(RULES)],\n"
            "        messages=[{'role': 'user', 'content': question}])\n"
        ),
    )
    INVALID = (
        Invalid(
            "def ask(client, summary, question):\n"
            "    return client.messages.create(\n"
            "        system=[{'type': 'text', 'text': f'Summary: {summary}',\n"
            "                 'cache_control': {'type': 'ephemeral'}}],\n"
            "        messages=[{'role': 'user', 'content': question}],\n"
            "    )\n",
            line=4,
        ),
        Invalid(
            "def cached(text):\n"
            "    return {'type': 'text', 'text': text, 'cache_control': {'type': 'ephemeral'}}\n"
            "def ask(client, notes, question):\n"
            "    return client.messages.create(system=[cached('Rules.'), cached(notes)],\n"
            "        messages=[{'role': 'user', 'content': question}])\n",
            line=2,
        ),
        Invalid(
            "def ask(client, retrieved, q):\n"
            "    return client.chat.completions.create(model='m', messages=[\n"
            "        {'role': 'developer', 'content': [{'type': 'text', 'text': retrieved,\n"
            "          'prompt_cache_breakpoint': {'mode': 'explicit'}}]},\n"
            "        {'role': 'user', 'content': q}])\n",
            line=4,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report marked system/tool blocks whose content depends on the request."""
        for request in context.requests:
            for block in request.blocks:
                if block.marker is None:
                    continue
                if block.part == "messages" and block.role not in _CACHED_ROLES:
                    continue
                reasons = [
                    taint
                    for value, env in block.content
                    for taint in context.analysis.taints(value, env)
                    if taint.kind in _CHANGING
                ]
                if reasons:
                    # the first in the source: taints come as a set, in no stable order
                    first = min(reasons, key=lambda t: (context.line_of(t.origin), t.detail))
                    yield context.finding(
                        self.code,
                        block.marker,
                        f"this breakpoint marks a {block.part} block built from "
                        f"{first.detail} (line {context.line_of(first.origin)}), which "
                        "changes per request: every request writes a new cache entry; put the "
                        "breakpoint on the last static block instead",
                    )
