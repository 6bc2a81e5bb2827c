"""PFX003 unsorted-json-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import Invalid, PythonRule, Valid

__all__ = ["UnsortedJsonInCachedSegment"]


class UnsortedJsonInCachedSegment(PythonRule):
    """`json.dumps` without `sort_keys=True` reaches a cached segment.

    ## Why it breaks caching
    `json.dumps` writes keys in insertion order. Dicts built from API
    responses, merged settings or different code paths list the same keys in
    different orders, so the same schema serialises to different bytes and
    the cached prefix stops matching. Safe fix: add `sort_keys=True`.

    ## Example
    ```python
    SYSTEM = "Answer with JSON matching:\\n" + json.dumps(schema, indent=2)
    ```

    ## Use instead
    ```python
    SYSTEM = "Answer with JSON matching:\\n" + json.dumps(schema, indent=2, sort_keys=True)
    ```
    """

    code = "PFX003"
    name = "unsorted-json-in-cached-segment"
    VALID = (
        Valid(
            "import json\n"
            "SCHEMA = {'type': 'object', 'properties': {'a': {'type': 'string'}}}\n"
            "SYSTEM = 'Reply as JSON: ' + json.dumps(SCHEMA, sort_keys=True)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
        # unsorted JSON in the user turn or a log line does not matter
        Valid(
            "import json, logging\n"
            "def ask(client, payload):\n"
            "    logging.info('payload %s', json.dumps(payload))\n"
            "    return client.messages.create(system='Be exact.',\n"
            "        messages=[{'role': 'user', 'content': json.dumps(payload)}])\n"
        ),
        # keyword arguments forwarded with ** may carry sort_keys
        Valid(
            "import json\n"
            "DUMP_OPTIONS = {'sort_keys': True, 'indent': 2}\n"
            "SYSTEM = json.dumps({'b': 1, 'a': 2}, **DUMP_OPTIONS)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
    )
    INVALID = (
        Invalid(
            "import json\n"
            "SCHEMA = {'type': 'object'}\n"
            "SYSTEM = 'Answer with JSON matching:\\n' + json.dumps(SCHEMA, indent=2)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n",
            line=3,
            expected_fix=(
                "import json\n"
                "SCHEMA = {'type': 'object'}\n"
                "SYSTEM = 'Answer with JSON matching:\\n' + json.dumps(SCHEMA, indent=2, sort_keys=True)\n"
                "def ask(client, q):\n"
                "    return client.messages.create(system=SYSTEM, messages=[q])\n"
            ),
        ),
        # an alias, a multi-line call with a trailing comma, and a tool schema
        Invalid(
            "from json import dumps as to_json\n"
            "def tools(schema):\n"
            "    return [{'name': 'lookup', 'description': to_json(\n"
            "        schema,\n"
            "        indent=2,\n"
            "    )}]\n"
            "def ask(client, q, schema):\n"
            "    return client.messages.create(tools=tools(schema), messages=[q])\n",
            line=3,
            expected_fix=(
                "from json import dumps as to_json\n"
                "def tools(schema):\n"
                "    return [{'name': 'lookup', 'description': to_json(\n"
                "        schema,\n"
                "        indent=2, sort_keys=True,\n"
                "    )}]\n"
                "def ask(client, q, schema):\n"
                "    return client.messages.create(tools=tools(schema), messages=[q])\n"
            ),
        ),
        Invalid(
            "import json\n"
            "class Agent:\n"
            "    def __init__(self, policy):\n"
            "        self.policy_text = json.dumps(policy, sort_keys=False)\n"
            "    def messages(self, q):\n"
            "        return [{'role': 'system', 'content': self.policy_text}, {'role': 'user', 'content': q}]\n",
            line=4,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each unsorted `json.dumps` call once; offer `sort_keys=True`."""
        for segment, taint in context.segment_taints:
            if taint.kind != "json" or not isinstance(taint.origin, cst.Call):
                continue
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} reaches {segment.label} "
                f"(line {context.line_of(segment.node)}): key order follows insertion order, "
                "so equal data can serialise differently; pass `sort_keys=True`",
                self._fix(context, taint.origin),
            )

    def _fix(self, context: LintContext, call: cst.Call) -> Fix | None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "sort_keys":
                start, end = context.span(arg.value)
                return Fix("Set `sort_keys=True`", (Edit(start, end, "True"),))
        if not call.args:
            return None
        _, end = context.span(call.args[-1].value)
        return Fix("Add `sort_keys=True`", (Edit(end, end, ", sort_keys=True"),))
