"""PFX003 unsorted-json-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..analysis.bindings import Env
from ..analysis.key_order import KeyOrder
from ..context import LintContext
from ..finding import Edit, Finding, Fix
from ..rule import Invalid, PythonRule, Valid

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
    VALID = (
        Valid(
            "import json\n"
            "TOOLS = {'search', 'fetch'}\n"
            "ARGS = {name: {'type': 'string'} for name in TOOLS}\n"
            "SYSTEM = 'Reply as JSON: ' + json.dumps(ARGS, sort_keys=True)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
        # a literal dict keeps its order on every run
        Valid(
            "import json\n"
            "SCHEMA = {'type': 'object', 'properties': {'b': {}, 'a': {}}}\n"
            "SYSTEM = 'Answer with JSON matching:\\n' + json.dumps(SCHEMA, indent=2)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
        # a schema generated from a Pydantic model: field order is deliberate (instructor)
        Valid(
            "import json\n"
            "from pydantic import BaseModel, TypeAdapter\n"
            "class Answer(BaseModel):\n"
            "    reasoning: str\n"
            "    answer: str\n"
            "def ask(client, response_model, q):\n"
            "    message = f'''Return JSON for this schema:\n"
            "    {json.dumps(response_model.model_json_schema(), indent=2, ensure_ascii=False)}'''\n"
            "    tools = [{'name': 'answer',\n"
            "              'description': json.dumps(TypeAdapter(Answer).json_schema())}]\n"
            "    return client.messages.create(system=message, tools=tools, messages=[q])\n"
        ),
        # a parameter alone says nothing about its key order
        Valid(
            "from json import dumps as to_json\n"
            "def tools(schema):\n"
            "    return [{'name': 'lookup', 'description': to_json(schema, indent=2)}]\n"
            "def ask(client, q, schema):\n"
            "    return client.messages.create(tools=tools(schema), messages=[q])\n"
        ),
        # iterating a sorted set, a list or a literal dict is ordered
        Valid(
            "import json\n"
            "TAGS = {'b', 'a'}\n"
            "NAMES = ['b', 'a']\n"
            "BY_TAG = {tag: tag.upper() for tag in sorted(TAGS)}\n"
            "BY_NAME = dict.fromkeys(NAMES, 'string')\n"
            "system = json.dumps(BY_TAG) + json.dumps(BY_NAME)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system, messages=[q])\n"
        ),
        # a merge of module constants: the same order every time
        Valid(
            "import json\n"
            "BASE = {'tone': 'formal'}\n"
            "EXTRA = {'length': 'short'}\n"
            "def helper(extra):\n"
            "    return json.dumps({**BASE, **extra})\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=helper(EXTRA), messages=[q])\n"
        ),
        # unsorted JSON in the user turn or a log line does not matter
        Valid(
            "import json, logging\n"
            "def ask(client, payload):\n"
            "    data = {k: 1 for k in set(payload)}\n"
            "    logging.info('payload %s', json.dumps(data))\n"
            "    return client.messages.create(system='Be exact.',\n"
            "        messages=[{'role': 'user', 'content': json.dumps(data)}])\n"
        ),
        # keyword arguments forwarded with ** may carry sort_keys
        Valid(
            "import json\n"
            "DUMP_OPTIONS = {'sort_keys': True, 'indent': 2}\n"
            "SYSTEM = json.dumps({k: 1 for k in {'b', 'a'}}, **DUMP_OPTIONS)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        ),
    )
    INVALID = (
        Invalid(
            "import json\n"
            "TOOLS = {'search', 'fetch', 'summarise'}\n"
            "ARGS = {name: {'type': 'string'} for name in TOOLS}\n"
            "SYSTEM = 'Call tools with JSON arguments:\\n' + json.dumps(ARGS, indent=2)\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM, messages=[q])\n",
            line=4,
            expected_fix=(
                "import json\n"
                "TOOLS = {'search', 'fetch', 'summarise'}\n"
                "ARGS = {name: {'type': 'string'} for name in TOOLS}\n"
                "SYSTEM = 'Call tools with JSON arguments:\\n' + json.dumps(ARGS, indent=2, sort_keys=True)\n"
                "def ask(client, q):\n"
                "    return client.messages.create(system=SYSTEM, messages=[q])\n"
            ),
        ),
        # an alias, a multi-line call, and a dict filled in a loop over a set union
        Invalid(
            "from json import dumps as to_json\n"
            "REQUIRED = {'query'}\n"
            "OPTIONAL = {'limit', 'offset'}\n"
            "def tools():\n"
            "    properties = {}\n"
            "    for name in REQUIRED | OPTIONAL:\n"
            "        properties[name] = {'type': 'string'}\n"
            "    return [{'name': 'lookup', 'description': to_json(\n"
            "        properties,\n"
            "        indent=2,\n"
            "    )}]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=tools(), messages=[q])\n",
            line=8,
            expected_fix=(
                "from json import dumps as to_json\n"
                "REQUIRED = {'query'}\n"
                "OPTIONAL = {'limit', 'offset'}\n"
                "def tools():\n"
                "    properties = {}\n"
                "    for name in REQUIRED | OPTIONAL:\n"
                "        properties[name] = {'type': 'string'}\n"
                "    return [{'name': 'lookup', 'description': to_json(\n"
                "        properties,\n"
                "        indent=2, sort_keys=True,\n"
                "    )}]\n"
                "def ask(client, q):\n"
                "    return client.messages.create(tools=tools(), messages=[q])\n"
            ),
        ),
        # settings merged with what each caller passes, stored on self
        Invalid(
            "import json\n"
            "DEFAULTS = {'tone': 'formal', 'length': 'short'}\n"
            "class Agent:\n"
            "    def __init__(self, overrides):\n"
            "        self.policy_text = json.dumps({**DEFAULTS, **overrides}, sort_keys=False)\n"
            "    def messages(self, q):\n"
            "        return [{'role': 'system', 'content': self.policy_text},\n"
            "                {'role': 'user', 'content': q}]\n",
            line=5,
        ),
        # a dict from a directory listing, passed to a helper that serialises it
        Invalid(
            "import json, os\n"
            "def render(examples):\n"
            "    return 'Examples:\\n' + json.dumps(examples)\n"
            "def ask(client, q):\n"
            "    examples = {name: name.upper() for name in os.listdir('examples')}\n"
            "    return client.messages.create(system=render(examples), messages=[q])\n",
            line=3,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report unsorted `json.dumps` of a dict whose key order can vary; offer `sort_keys=True`."""
        key_order: KeyOrder | None = None
        for segment, taint in context.segment_taints:
            if taint.kind != "json" or not isinstance(taint.origin, cst.Call):
                continue
            dumped = _dumped(taint.origin)
            if dumped is None:
                continue
            key_order = key_order or KeyOrder(context.module, context.analysis, context.call_sites)
            reason = key_order.unstable(dumped, Env(key_order.sites.enclosing(taint.origin)))
            if reason is None:
                continue
            yield context.finding(
                self.code,
                taint.origin,
                f"{taint.detail} reaches {segment.label} "
                f"(line {context.line_of(segment.node)}), and the dict's key order can change "
                f"between runs: {reason}; build it in a fixed order or pass `sort_keys=True`",
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
                applicability=UnsortedJsonInCachedSegment.fix_applicability,
            )
    if not call.args:
        return None
    _, end = context.span(call.args[-1].value)
    return Fix(
        "Add `sort_keys=True`",
        (Edit(end, end, ", sort_keys=True"),),
        applicability=UnsortedJsonInCachedSegment.fix_applicability,
    )
