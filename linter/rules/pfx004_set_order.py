"""PFX004 set-order-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import Invalid, PythonRule, Valid

__all__ = ["SetOrderInCachedSegment"]


class SetOrderInCachedSegment(PythonRule):
    """Iteration order of a `set` or `frozenset` reaches a cached segment.

    Covers loops and comprehensions over a set (including tool lists built
    from a set of names), `"".join(a_set)`, `list(a_set)` and `str()` /
    `repr()` of a set. `sorted(...)` makes the order deterministic.

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
    VALID = (
        Valid(
            "ENABLED = {'search', 'calculator'}\n"
            "SPECS = {'search': {'name': 'search'}, 'calculator': {'name': 'calculator'}}\n"
            "TOOLS = [SPECS[name] for name in sorted(ENABLED)]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=TOOLS, messages=[q])\n"
        ),
        # sets used for membership tests, and in the user turn
        Valid(
            "BANNED = frozenset({'rm', 'drop'})\n"
            "SYSTEM = 'You run safe commands only.'\n"
            "def ask(client, q, tags: set[str]):\n"
            "    if q in BANNED:\n"
            "        raise ValueError(q)\n"
            "    return client.messages.create(system=SYSTEM,\n"
            "        messages=[{'role': 'user', 'content': ', '.join(tags) + q}])\n"
        ),
        # a list (ordered) of tool names
        Valid(
            "NAMES = ['search', 'fetch']\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=[{'name': n} for n in NAMES], messages=[q])\n"
        ),
    )
    INVALID = (
        Invalid(
            "ENABLED = {'search', 'calculator', 'weather'}\n"
            "SPECS = {'search': {'name': 'search'}}\n"
            "TOOLS = [SPECS[name] for name in ENABLED]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=TOOLS, messages=[q])\n",
            line=3,
            expected_fix=(
                "ENABLED = {'search', 'calculator', 'weather'}\n"
                "SPECS = {'search': {'name': 'search'}}\n"
                "TOOLS = [SPECS[name] for name in sorted(ENABLED)]\n"
                "def ask(client, q):\n"
                "    return client.messages.create(tools=TOOLS, messages=[q])\n"
            ),
        ),
        Invalid(
            "def system_text(topics: frozenset[str]):\n"
            "    return 'Topics: ' + ', '.join(topics)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system_text(frozenset({'a', 'b'})), messages=[q])\n",
            line=2,
            expected_fix=(
                "def system_text(topics: frozenset[str]):\n"
                "    return 'Topics: ' + ', '.join(sorted(topics))\n"
                "def ask(client, q):\n"
                "    return client.messages.create(system=system_text(frozenset({'a', 'b'})), messages=[q])\n"
            ),
        ),
        # tools appended in a loop over a set, inside a class
        Invalid(
            "class Toolbox:\n"
            "    def __init__(self, names):\n"
            "        self.names = set(names)\n"
            "    def tools(self):\n"
            "        out = []\n"
            "        for name in self.names:\n"
            "            out.append({'name': name, 'input_schema': {'type': 'object'}})\n"
            "        return out\n"
            "    def ask(self, client, q):\n"
            "        return client.messages.create(tools=self.tools(), messages=[q])\n",
            line=6,
            expected_fix=(
                "class Toolbox:\n"
                "    def __init__(self, names):\n"
                "        self.names = set(names)\n"
                "    def tools(self):\n"
                "        out = []\n"
                "        for name in sorted(self.names):\n"
                "            out.append({'name': name, 'input_schema': {'type': 'object'}})\n"
                "        return out\n"
                "    def ask(self, client, q):\n"
                "        return client.messages.create(tools=self.tools(), messages=[q])\n"
            ),
        ),
        Invalid(
            "LANGS = {'en', 'de'} | {'fr'}\n"
            "SYSTEM = f'Supported languages: {str(LANGS)}'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n",
            line=2,
            expected_fix=(
                "LANGS = {'en', 'de'} | {'fr'}\n"
                "SYSTEM = f'Supported languages: {str(sorted(LANGS))}'\n"
                "def ask(client, q):\n"
                "    return client.messages.create(system=SYSTEM, messages=[q])\n"
            ),
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each set whose order leaks; offer to wrap it in `sorted(...)`."""
        for segment, taint in context.segment_taints:
            if taint.kind != "set":
                continue
            start, end = context.span(taint.origin)
            fix = Fix(
                "Wrap the set in `sorted(...)`",
                (Edit(start, start, "sorted("), Edit(end, end, ")")),
            )
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} and reaches {segment.label} "
                f"(line {context.line_of(segment.node)}): set order changes between processes; "
                "iterate over `sorted(...)` instead",
                fix,
            )
