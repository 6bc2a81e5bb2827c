"""PFX004 set-order-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import Invalid, PythonRule, Valid

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
        # sorted before the description; ints hash alike in every process
        Valid(
            "BUILTINS = ['math', 'json', 're']\n"
            "IDS = {8, 1, 3}\n"
            "def tool(extra):\n"
            "    allowed = sorted(set(BUILTINS) | set(extra))\n"
            "    return {'name': 'python', 'description': f'Imports allowed: {allowed}; ids {list(IDS)}'}\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=[tool(['os'])], messages=[q])\n"
        ),
        # a dict built from a sorted set, and a tool class with a sorted list
        Valid(
            "from smolagents import Tool\n"
            "ENABLED = {'search', 'fetch'}\n"
            "SPECS = {name: {'name': name} for name in sorted(ENABLED)}\n"
            "class PythonTool(Tool):\n"
            "    def __init__(self, modules):\n"
            "        self.authorized = sorted(set(modules))\n"
            "        self.description = f'Allowed: {self.authorized}'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=list(SPECS.values()), messages=[q])\n"
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
        # list(set(...)) in a tool's description (smolagents' PythonInterpreterTool)
        Invalid(
            "from smolagents import Tool\n"
            "BASE_MODULES = ['math', 'json', 're']\n"
            "class PythonInterpreterTool(Tool):\n"
            "    name = 'python_interpreter'\n"
            "    def __init__(self, authorized_imports=None):\n"
            "        self.authorized_imports = list(set(BASE_MODULES) | set(authorized_imports or []))\n"
            "        self.inputs = {'code': {'type': 'string',\n"
            "            'description': f'You may import: {self.authorized_imports}.'}}\n",
            line=6,
        ),
        # the values of a dict whose keys were taken from a set, sent as tools
        Invalid(
            "ENABLED = {'search', 'fetch', 'translate'}\n"
            "SPECS = {name: {'name': name, 'input_schema': {}} for name in ENABLED}\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=list(SPECS.values()), messages=[q])\n",
            line=2,
        ),
        # a helper iterates over its parameter; the call passes a set
        Invalid(
            "def describe(names):\n"
            "    return 'Tools: ' + ', '.join(names)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=describe({'search', 'fetch'}), messages=[q])\n",
            line=4,
        ),
    )

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
