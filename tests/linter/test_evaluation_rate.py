"""Where a volatile value is evaluated decides how often it changes: a clock read in a
function body that runs per request changes per request; one read once per process (at
import, in a class body, in a default argument, in a call made at import, in a cached
function without parameters) changes on every process start and is reported so."""

from __future__ import annotations

import keyword
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source
from prefixkit.linter.context import LintContext

ONCE_PER_PROCESS = {
    "a module constant": (
        "from datetime import date\n"
        "TODAY = date.today()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=f'Today is {TODAY}. Follow the rules below.', messages=[q])\n"
    ),
    "a module-level f-string": (
        "from datetime import datetime\n"
        "SYSTEM = f'You help. Year {datetime.now():%Y}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
    ),
    "a class attribute": (
        "from datetime import datetime\n"
        "class Bot:\n"
        "    STARTED = datetime.now()\n"
        "    def ask(self, client, q):\n"
        "        return client.messages.create(system=f'Up {self.STARTED}. Follow the rules below.', messages=[q])\n"
    ),
    "a class attribute read through the class name": (
        "from datetime import datetime\n"
        "class Config:\n"
        "    STARTED = datetime.now()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=f'Up {Config.STARTED}. Follow the rules below.', messages=[q])\n"
    ),
    "a default argument of a function": (
        "from datetime import datetime\n"
        "def build(now=datetime.now()):\n"
        "    return f'It is {now}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a default argument of a method": (
        "from datetime import datetime\n"
        "class Bot:\n"
        "    def build(self, now=datetime.now()):\n"
        "        return f'It is {now}. Follow the rules below.'\n"
        "    def ask(self, client, q):\n"
        "        return client.messages.create(system=self.build(), messages=[q])\n"
    ),
    "a function called at import": (
        "from datetime import datetime\n"
        "def build():\n"
        "    return f'It is {datetime.now()}. Follow the rules below.'\n"
        "SYSTEM = build()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
    ),
    "a lambda called at import": (
        "import time\n"
        "build = lambda: f'Booted {time.time()}. Follow the rules below.'\n"
        "SYSTEM = build()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
    ),
    "a method called in the class body": (
        "from datetime import date\n"
        "class Bot:\n"
        "    def _header():\n"
        "        return f'Today is {date.today()}. Follow the rules below.'\n"
        "    HEADER = _header()\n"
        "    def ask(self, client, q):\n"
        "        return client.messages.create(system=self.HEADER, messages=[q])\n"
    ),
    "a functools.lru_cache function without parameters": (
        "import functools\n"
        "from datetime import datetime\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def started():\n"
        "    return datetime.now().isoformat()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=f'Up {started()}. Follow the rules below.', messages=[q])\n"
    ),
    "a functools.cache function without parameters": (
        "from functools import cache\n"
        "from uuid import uuid4\n"
        "@cache\n"
        "def run_id():\n"
        "    return str(uuid4())\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=f'Run {run_id()}. Follow the rules below.', messages=[q])\n"
    ),
    "a cached function given as instructions": (
        "from functools import lru_cache\n"
        "from datetime import datetime\n"
        "from agents import Agent\n"
        "@lru_cache()\n"
        "def instructions():\n"
        "    return f'Started {datetime.now()}. Follow the rules below.'\n"
        "agent = Agent(name='a', instructions=instructions)\n"
    ),
}

PER_REQUEST = {
    "a function that builds the prompt on each call": (
        "from datetime import datetime\n"
        "def build():\n"
        "    return f'It is {datetime.now()}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a module-level lambda called per request": (
        "from datetime import datetime\n"
        "build = lambda: f'It is {datetime.now()}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a default of None replaced by the clock in the body": (
        "from datetime import datetime\n"
        "def build(now=None):\n"
        "    if now is None:\n"
        "        now = datetime.now()\n"
        "    return f'It is {now}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a default of None or-ed with the clock in the body": (
        "from datetime import datetime\n"
        "def build(now=None):\n"
        "    now = now or datetime.now()\n"
        "    return f'It is {now}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a default argument of a function defined per call": (
        "from datetime import datetime\n"
        "def ask(client, q):\n"
        "    def build(now=datetime.now()):\n"
        "        return f'It is {now}. Follow the rules below.'\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a function called at import and again per request": (
        "from datetime import datetime\n"
        "def build():\n"
        "    return f'It is {datetime.now()}. Follow the rules below.'\n"
        "SYSTEM = build()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
        "def ask_again(client, q):\n"
        "    return client.messages.create(system=build(), messages=[q])\n"
    ),
    "a function called on each pass of a module-level loop": (
        "from datetime import datetime\n"
        "import anthropic\n"
        "client = anthropic.Anthropic()\n"
        "def build():\n"
        "    return f'It is {datetime.now()}. Follow the rules below.'\n"
        "while True:\n"
        "    q = input()\n"
        "    client.messages.create(system=build(), messages=[q])\n"
    ),
    "a cached function with a parameter (computed again for each new argument)": (
        "from functools import lru_cache\n"
        "from datetime import datetime\n"
        "@lru_cache\n"
        "def header(topic):\n"
        "    return f'{topic} at {datetime.now()}. Follow the rules below.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=header(q), messages=[q])\n"
    ),
    "a cache built per call of the function that defines it": (
        "from functools import cache\n"
        "from datetime import datetime\n"
        "def ask(client, q):\n"
        "    @cache\n"
        "    def started():\n"
        "        return datetime.now().isoformat()\n"
        "    return client.messages.create(system=f'Up {started()}. Follow the rules below.', messages=[q])\n"
    ),
}


def _periods(source: str, tmp_path: Path) -> list[str | None]:
    module = cst.parse_module(source)
    context = LintContext(module, str(tmp_path / "m.py"), LintConfig(root=tmp_path))
    return [taint.period for _, taint in context.segment_taints if taint.kind == "volatile"]


def _messages(source: str, tmp_path: Path) -> list[str]:
    found = lint_source(source, tmp_path / "m.py", LintConfig(root=tmp_path))
    return [finding.message for finding in found if finding.code == "PFX001"]


@pytest.mark.parametrize("source", ONCE_PER_PROCESS.values(), ids=ONCE_PER_PROCESS.keys())
def test_a_value_evaluated_once_per_process_changes_per_process(
    source: str, tmp_path: Path
) -> None:
    assert _periods(source, tmp_path) == ["process"]


@pytest.mark.parametrize("source", ONCE_PER_PROCESS.values(), ids=ONCE_PER_PROCESS.keys())
def test_a_value_evaluated_once_per_process_is_reported_as_changing_per_process_start(
    source: str, tmp_path: Path
) -> None:
    (message,) = _messages(source, tmp_path)
    assert "changes on every process start" in message
    assert "every request" not in message


# a function's return value may be one of several parts of its agent's system prompt
ENDING_THE_SYSTEM_PROMPT = {
    case: source
    for case, source in ONCE_PER_PROCESS.items()
    if case != "a cached function given as instructions"
}


@pytest.mark.parametrize(
    "source", ENDING_THE_SYSTEM_PROMPT.values(), ids=ENDING_THE_SYSTEM_PROMPT.keys()
)
def test_a_value_evaluated_once_per_process_that_ends_the_system_prompt_is_not_reported(
    source: str, tmp_path: Path
) -> None:
    # every conversation of the process opens with the same text: only each
    # conversation's own messages follow the value
    ending = source.replace(" Follow the rules below.", "")
    assert _messages(ending, tmp_path) == [], ending


@pytest.mark.parametrize("source", PER_REQUEST.values(), ids=PER_REQUEST.keys())
def test_a_value_evaluated_on_each_call_changes_per_request(source: str, tmp_path: Path) -> None:
    assert _periods(source, tmp_path) == ["request"]


def test_a_fixed_class_attribute_read_through_the_class_name_is_clean(tmp_path: Path) -> None:
    source = (
        "from datetime import datetime\n"
        "class Config:\n"
        "    NAME = 'north'\n"
        "    def __init__(self):\n"
        "        self.NAME = datetime.now()\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=f'Shop {Config.NAME}. Follow the rules below.', messages=[q])\n"
    )
    # what a method stores on an instance is not read through the class
    assert _messages(source, tmp_path) == []


def test_the_message_names_the_call_made_at_import(tmp_path: Path) -> None:
    (message,) = _messages(ONCE_PER_PROCESS["a function called at import"], tmp_path)
    assert "computed once, when `build()` is called at import (line 4)" in message


def test_the_message_names_the_cached_function(tmp_path: Path) -> None:
    source = ONCE_PER_PROCESS["a functools.lru_cache function without parameters"]
    (message,) = _messages(source, tmp_path)
    assert "computed once per process, on the first call of `started()`" in message
    assert "(line 4), whose result is cached" in message


# names the generated module already binds (its imports, `str`, the sender's parameters)
_TAKEN = frozenset({"datetime", "uuid4", "time", "str", "client", "q"})
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and name not in _TAKEN
)
_VOLATILE = st.sampled_from(["datetime.now()", "str(uuid4())", "time.time()"])


@settings(max_examples=40, deadline=None)
@given(value=_NAMES, builder=_NAMES, volatile=_VOLATILE, at_import=st.booleans())
def test_the_same_expression_changes_per_process_at_module_scope_and_per_request_in_a_body(
    tmp_path_factory: pytest.TempPathFactory,
    value: str,
    builder: str,
    volatile: str,
    at_import: bool,
) -> None:
    assume(value != builder)
    body = [f"{value} = f'Started {{{volatile}}}. Follow the rules below.'"]
    if at_import:
        lines = [*body, f"def {builder}(client, q):"]
    else:
        lines = [f"def {builder}(client, q):", *(f"    {line}" for line in body)]
    lines.append(f"    return client.messages.create(system={value}, messages=[q])")
    source = "import time\nfrom datetime import datetime\nfrom uuid import uuid4\n"
    source += "\n".join(lines) + "\n"
    expected = "process" if at_import else "request"
    assert _periods(source, tmp_path_factory.mktemp("m")) == [expected], source


def _marked(build: str) -> str:
    return (
        "from datetime import datetime\n"
        f"{build}\n"
        "def ask(client, q):\n"
        "    block = {'type': 'text', 'text': header(), 'cache_control': {'type': 'ephemeral'}}\n"
        "    return client.messages.create(system=[block], messages=[q])\n"
    )


def _codes(source: str, tmp_path: Path) -> list[str]:
    return [f.code for f in lint_source(source, tmp_path / "m.py", LintConfig(root=tmp_path))]


def test_a_breakpoint_on_a_block_built_on_each_call_from_the_clock_is_pfx008(
    tmp_path: Path,
) -> None:
    source = _marked("def header():\n    return f'Now {datetime.now()}. Follow the rules below.'")
    assert "PFX008" in _codes(source, tmp_path)


def test_a_breakpoint_on_a_block_fixed_for_the_process_is_not_pfx008(tmp_path: Path) -> None:
    source = _marked(
        "import functools\n"
        "@functools.cache\n"
        "def header():\n"
        "    return f'Booted {datetime.now()}. Follow the rules below.'"
    )
    assert "PFX008" not in _codes(source, tmp_path)


CONVERSATION = """\
import random
from datetime import datetime

from litellm import completion

RULES = "Answer as the airline's agent. " * 10


def solve(env, examples, steps=30):
    {before}
    messages = [
        {{"role": "system", "content": f"{{RULES}}\\n\\n{{{value}}}"}},
        {{"role": "user", "content": env.reset()}},
    ]
    for _ in range(steps):
        {inside}
        answer = completion(model="m", messages=messages)
        messages.append(answer.choices[0].message.model_dump())
        messages.append({{"role": "user", "content": env.step()}})
    return messages
"""
PICKS = {
    "a clock": "started = datetime.now().isoformat()",
    "a random sample": "picked = random.sample(examples, 5)",
}


def conversation(pick: str, in_the_loop: bool = False) -> str:
    """CONVERSATION with the pick computed before the loop (and, `in_the_loop`, again on
    each pass, written into the system message)."""
    statement = PICKS[pick]
    value = statement.split(" = ")[0]
    inside = "pass"
    if in_the_loop:
        inside = statement + '\n        messages[0]["content"] = f"{RULES}\\n\\n{' + value + '}"'
    return CONVERSATION.format(before=statement, value=value, inside=inside)


@pytest.mark.parametrize("pick", sorted(PICKS))
def test_a_value_computed_before_the_loop_that_sends_the_conversation_ends_its_system_prompt(
    pick: str, tmp_path: Path
) -> None:
    """It is fixed for the conversation, and only the conversation's messages follow it."""
    source = conversation(pick)
    assert lint_source(source, tmp_path / "agent.py", LintConfig()) == []


@pytest.mark.parametrize("pick", sorted(PICKS))
def test_a_value_computed_in_the_loop_that_sends_the_conversation_is_reported(
    pick: str, tmp_path: Path
) -> None:
    source = conversation(pick, in_the_loop=True)
    found = lint_source(source, tmp_path / "agent.py", LintConfig())
    assert [f.code for f in found] == ["PFX001"]
    assert found[0].start.row == 16  # the value computed in the loop


@pytest.mark.parametrize("pick", sorted(PICKS))
def test_a_value_computed_on_each_call_before_a_history_it_was_given_is_reported(
    pick: str, tmp_path: Path
) -> None:
    """Each call sends the history of the calls before it after a new value."""
    source = conversation(pick)
    source = source.replace("def solve(env, examples,", "def solve(env, examples, history,")
    source = source.replace(
        '        {"role": "user", "content": env.reset()},',
        '        *history,\n        {"role": "user", "content": env.reset()},',
    )
    found = lint_source(source, tmp_path / "agent.py", LintConfig())
    assert [(f.code, f.start.row) for f in found] == [("PFX001", 10)]
