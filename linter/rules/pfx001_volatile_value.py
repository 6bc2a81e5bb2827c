"""PFX001 volatile-value-in-cached-segment."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..cached_segments import CachedSegment
from ..catalog import DAILY_CALLABLES
from ..context import LintContext
from ..finding import Finding
from ..rule import Invalid, PythonRule, Valid
from ..taint import Env, Taint

__all__ = ["VolatileValueInCachedSegment"]


class VolatileValueInCachedSegment(PythonRule):
    """A clock, date, uuid, random number, pid or hostname reaches a cached segment.

    Cached segments are the `system=` / `instructions=` / `tools=` arguments,
    system and developer messages, `SystemMessage(...)`, blocks carrying
    `cache_control` or `prompt_cache_breakpoint`, and prefixkit's
    `Segment.static` / `Segment.versioned`. Values are followed through
    f-strings, `.format`, `%`, `+`, `"".join`, variables and helper functions
    of the same module; imports are resolved under aliases.

    ## Why it breaks caching
    A provider reuses a cached prefix only when it is byte-identical. A
    timestamp or uuid in the system prompt makes every request's prefix new:
    every call pays a cache write (1.25x input price on Anthropic) and never
    reads one, and nothing reports the miss.

    ## Example
    ```python
    from datetime import datetime as dt

    SYSTEM = f"You are a support agent. Today is {dt.now():%Y-%m-%d}."
    client.messages.create(model=MODEL, system=SYSTEM, messages=messages)
    ```

    ## Use instead
    ```python
    SYSTEM = "You are a support agent."
    today = f"Today is {dt.now():%Y-%m-%d}."
    client.messages.create(
        model=MODEL,
        system=SYSTEM,
        messages=[*history, {"role": "user", "content": f"{today}\\n{question}"}],
    )
    ```
    """

    code = "PFX001"
    name = "volatile-value-in-cached-segment"
    VALID = (
        # the latest user message may change on every request
        Valid(
            "import datetime\n"
            "SYSTEM = 'You are a support agent.'\n"
            "def ask(client, question):\n"
            "    now = datetime.datetime.now().isoformat()\n"
            "    return client.messages.create(\n"
            "        system=SYSTEM,\n"
            "        messages=[{'role': 'user', 'content': f'[{now}] {question}'}],\n"
            "    )\n"
        ),
        # headers, idempotency keys and metadata are not part of the prompt
        Valid(
            "import uuid\n"
            "def ask(client, messages):\n"
            "    return client.messages.create(\n"
            "        system='You are terse.',\n"
            "        messages=messages,\n"
            "        extra_headers={'Idempotency-Key': str(uuid.uuid4())},\n"
            "        metadata={'request_id': uuid.uuid4().hex},\n"
            "    )\n"
        ),
        # logging and timing around the call
        Valid(
            "import logging, time\n"
            "log = logging.getLogger(__name__)\n"
            "SYSTEM = 'You summarise tickets.'\n"
            "def summarise(client, ticket):\n"
            "    started = time.perf_counter()\n"
            "    reply = client.messages.create(system=SYSTEM, messages=[{'role': 'user', 'content': ticket}])\n"
            "    log.info('summarised in %.2fs at %s', time.perf_counter() - started, time.time())\n"
            "    return reply\n"
        ),
        # f-strings over constants and environment settings
        Valid(
            "import os\n"
            "from myapp.settings import settings\n"
            "PRODUCT = 'Acme Cloud'\n"
            "VERSION = '2.3'\n"
            'SYSTEM = f\'You support {PRODUCT} {VERSION} in {os.environ.get("REGION", "eu")}.\'\n'
            "SYSTEM_LONG = SYSTEM + f' Plan limits: {settings.plan_limits}. Locale: {os.getenv(\"LOCALE\")}'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=SYSTEM_LONG, messages=[{'role': 'user', 'content': q}])\n"
        ),
        # a volatile value in a dynamic prefixkit segment is fine
        Valid(
            "from datetime import datetime\n"
            "from prefixkit.sdk import Prompt, Segment\n"
            "def build(question):\n"
            "    return Prompt(\n"
            "        system=[Segment.static('You are helpful.')],\n"
            "        messages=[Segment.dynamic(f'{datetime.now():%H:%M} {question}')],\n"
            "    )\n"
        ),
        # a rolling breakpoint on the latest user turn is the recommended pattern
        Valid(
            "import time\n"
            "def ask(client, history, question):\n"
            "    turn = {'role': 'user', 'content': [\n"
            "        {'type': 'text', 'text': f'{time.strftime(\"%H:%M\")} {question}',\n"
            "         'cache_control': {'type': 'ephemeral'}},\n"
            "    ]}\n"
            "    return client.messages.create(system='Be brief.', messages=[*history, turn])\n"
        ),
        # a helper that logs a timestamp but returns a constant
        Valid(
            "import time, logging\n"
            "def system_prompt():\n"
            "    logging.debug('built at %s', time.time())\n"
            "    return 'You are a careful assistant.'\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system_prompt(), messages=[{'role': 'user', 'content': q}])\n"
        ),
        # a request payload dict: its top-level cache_control does not make it a block
        Valid(
            "def params(model, messages, cache_control, user_profile_id):\n"
            "    return {'model': model, 'messages': messages, 'system': 'Be brief.',\n"
            "            'cache_control': cache_control, 'user_profile_id': user_profile_id}\n"
        ),
        # a local variable that shadows a clock name but holds a constant
        Valid(
            "def build(client, q):\n"
            "    now = 'the current release'\n"
            "    return client.responses.create(instructions=f'Describe {now}.', input=q)\n"
        ),
    )
    INVALID = (
        Invalid(
            "from datetime import datetime as dt\n"
            "SYSTEM = f'You are a support agent. Today is {dt.now():%Y-%m-%d}.'\n"
            "def ask(client, messages):\n"
            "    return client.messages.create(system=SYSTEM, messages=messages)\n",
            line=2,
        ),
        Invalid(
            "import datetime\n"
            "def ask(client, q):\n"
            "    return client.chat.completions.create(model='m', messages=[\n"
            "        {'role': 'system', 'content': 'Date: ' + str(datetime.date.today())},\n"
            "        {'role': 'user', 'content': q},\n"
            "    ])\n",
            line=4,
        ),
        Invalid(
            "import uuid\n"
            "def ask(client, q):\n"
            "    header = 'Trace {}'.format(uuid.uuid4())\n"
            "    return client.responses.create(instructions=header + '\\nBe brief.', input=q)\n",
            line=3,
        ),
        # through a helper function and "".join
        Invalid(
            "import time\n"
            "def stamp():\n"
            "    return time.strftime('%Y-%m-%d %H:%M')\n"
            "def system_text(rules):\n"
            "    return ''.join(['Rules:\\n', rules, '\\nGenerated ', stamp()])\n"
            "def ask(client, q):\n"
            "    return client.messages.create(system=system_text('be kind'), messages=[q])\n",
            line=3,
        ),
        # a prompt builder class: attribute set in __init__ from the clock
        Invalid(
            "from datetime import datetime\n"
            "class SupportPrompt:\n"
            "    def __init__(self, product):\n"
            "        self.product = product\n"
            "        self.created = datetime.utcnow()\n"
            "    def system(self):\n"
            "        return 'Agent for %s (session started %s)' % (self.product, self.created)\n"
            "    def send(self, client, q):\n"
            "        return client.messages.create(system=self.system(), messages=[q])\n",
            line=5,
        ),
        # LangChain SystemMessage and a cache_control block
        Invalid(
            "import random\n"
            "from langchain_core.messages import SystemMessage\n"
            "GREETINGS = ['Hi', 'Hello']\n"
            "def messages(q):\n"
            "    return [SystemMessage(content=f'{random.choice(GREETINGS)}! You help with billing.'), q]\n",
            line=5,
        ),
        Invalid(
            "import socket\n"
            "BLOCK = {'type': 'text', 'text': f'Served by {socket.gethostname()}',\n"
            "         'cache_control': {'type': 'ephemeral'}}\n",
            line=2,
        ),
        # prefixkit's own static segment
        Invalid(
            "import os\n"
            "from prefixkit.sdk import Segment\n"
            "WORKER = Segment.static(f'worker {os.getpid()}: answer in English')\n",
            line=3,
        ),
        # a payload dict sent with **params
        Invalid(
            "import time\n"
            "def ask(client, q):\n"
            "    params = {'model': 'm', 'system': f'Epoch {time.time():.0f}', 'messages': [q]}\n"
            "    return client.messages.create(**params)\n",
            line=3,
        ),
        # tool definitions are cached too
        Invalid(
            "import time\n"
            "TOOLS = [{'name': 'search', 'description': f'Search (index built {time.time()})',\n"
            "          'input_schema': {'type': 'object'}}]\n"
            "def ask(client, q):\n"
            "    return client.messages.create(tools=TOOLS, messages=[q])\n",
            line=2,
        ),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Report each volatile origin once, where it is produced, saying when it changes."""
        for segment, taint in context.segment_taints:
            if taint.kind != "volatile":
                continue
            yield context.finding(self.code, taint.origin, _message(context, segment, taint))


def _message(context: LintContext, segment: CachedSegment, taint: Taint) -> str:
    where = f"{segment.label} (line {context.line_of(segment.node)})"
    if taint.period == "process":
        if context.analysis.at_import(taint.origin):
            stale = ", and the date or time in it goes stale" if _is_date(taint) else ""
            return (
                f"{taint.detail} is computed once at import and reaches {where}: it changes on "
                f"every process start (deploy, restart, each worker), so each process writes "
                f"its own cache entry{stale}; use a fixed value, or put it in the latest user "
                "message"
            )
        return (
            f"{taint.detail} differs between processes and hosts and reaches {where}: each "
            "worker writes its own cache entry; use a fixed value, or put it in the latest "
            "user message"
        )
    if taint.period == "day":
        daily = " formatted to the day" if _callable(taint) not in DAILY_CALLABLES else ""
        return (
            f"{taint.detail}{daily} changes once a day and reaches {where}: from that point on the "
            "prefix is written to the cache again each day (and differs between servers in "
            "other time zones); keep it last in the cached part if that is acceptable, or "
            "move it into the latest user message"
        )
    if _at_tail(context, segment, taint):
        return (
            f"{taint.detail} changes on every request and ends {where}: the text before it can "
            "still be cached, but nothing after it (tools or messages that follow) ever is; "
            "move it into the latest user message"
        )
    return (
        f"{taint.detail} changes on every request and reaches {where}, so the cached prefix "
        "never matches: move it after the cached part (e.g. into the latest user message)"
    )


def _callable(taint: Taint) -> str:
    return taint.detail.strip("`").removesuffix("()")


def _is_date(taint: Taint) -> bool:
    return _callable(taint).split(".")[0] in ("datetime", "time", "pendulum", "arrow")


def _at_tail(context: LintContext, segment: CachedSegment, taint: Taint) -> bool:
    """Whether `taint` enters only through the last piece of the segment's text."""
    node = segment.node
    if isinstance(node, cst.FormattedString):
        pieces: list[cst.BaseExpression] = [
            part.expression
            for part in node.parts
            if isinstance(part, cst.FormattedStringExpression)
        ]
        trailing = node.parts[-1] if node.parts else None
        if isinstance(trailing, cst.FormattedStringText) and trailing.value.strip():
            return False
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        pieces = [node.left, node.right]
    else:
        return False
    if len(pieces) < 2:
        return False
    env = Env(segment.function)
    analysis = context.analysis
    return taint in analysis.taints(pieces[-1], env) and not any(
        taint in analysis.taints(piece, env) for piece in pieces[:-1]
    )
