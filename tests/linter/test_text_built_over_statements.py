"""A prompt's text built over several statements (`system = ""`, `system += f"... {now}"`,
`system += RULES`, or the same on `req.system_prompt`) is laid out whole.

Invariants: what follows a value is counted over the whole text the statements build, not
within the one statement that adds it, whatever the names; a value added by the last
statement ends the text; reading a prompt's own text back to extend it
(`req.system_prompt = f"{req.system_prompt}..."`) puts no request data into it.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source
from prefixkit.linter.catalog import is_configuration_name

from tests.linter.small_projects import project

IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"self", "time", "str", "json", "datetime", "client", "history"}
        and not is_configuration_name(name)
        and "id" not in name
        and "user" not in name
    )
)
RULES = "Rules. " + "Use the tools to finish the task and explain each step. " * 10

# (what is added, the rule that reports it) for each kind of changing value
VALUES = {
    "clock": ("datetime.now().isoformat()", "PFX001"),
    "user": ("user_id", "PFX002"),
    "request": ("{data}", "PFX005"),
}

BUILT = """\
from datetime import datetime

RULES = {rules!r}


class Request:
    system_prompt = ""


def {send}(client, user_id, {data}, history):
    {holder}
    {text} += f"Context: {{{value}}}\\n"
    {text} += RULES
    return client.chat.completions.create(
        model="m", messages=[{{"role": "system", "content": {text}}}, *history]
    )
"""


def findings(source: str, tmp_path: Path) -> list[tuple[str, int, str]]:
    path = tmp_path / "module.py"
    return [(f.code, f.start.row, f.message) for f in lint_source(source, path, LintConfig())]


def built(kind: str, names: list[str], on_attribute: bool, added_last: bool = False) -> str:
    send, data, obj, name = names
    value, _ = VALUES[kind]
    text = f"{obj}.system_prompt" if on_attribute else name
    holder = f"{obj} = Request()" if on_attribute else f'{name} = ""'
    source = BUILT.format(
        rules=RULES, send=send, data=data, holder=holder, text=text, value=value.format(data=data)
    )
    if added_last:  # the rules first, the value after them
        lines = source.splitlines()
        lines[11], lines[12] = lines[12], lines[11]
        source = "\n".join(lines) + "\n"
    return source


@settings(max_examples=15, deadline=None)
@given(
    kind=st.sampled_from(sorted(VALUES)),
    names=st.lists(IDENTIFIERS, min_size=4, max_size=4, unique=True),
    on_attribute=st.booleans(),
)
def test_fixed_text_a_later_statement_adds_follows_the_value(
    kind: str, names: list[str], on_attribute: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    found = findings(built(kind, names, on_attribute), tmp_path_factory.mktemp("p"))
    assert [(code, row) for code, row, _ in found] == [(VALUES[kind][1], 12)]
    assert "tokens of fixed text follow it" in found[0][2]


@pytest.mark.parametrize("on_attribute", [False, True])
def test_a_clock_the_last_statement_adds_ends_the_text(on_attribute: bool, tmp_path: Path) -> None:
    names = ["send", "data", "req", "system"]
    found = findings(built("clock", names, on_attribute, added_last=True), tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", 13)]
    assert "the messages after it never are" in found[0][2]


@pytest.mark.parametrize("on_attribute", [False, True])
def test_request_data_the_last_statement_adds_is_not_reported(
    on_attribute: bool, tmp_path: Path
) -> None:
    names = ["send", "data", "req", "system"]
    assert findings(built("request", names, on_attribute, added_last=True), tmp_path) == []


EXTENDED = """\
RULES = {rules!r}


def {extend}({obj}):
    {obj}.system_prompt = f"{{{obj}.system_prompt or ''}}\\n{{RULES}}\\n"


def {send}(client, {obj}, {event}, history):
    {obj}.session = {event}.session_id
    {extend}({obj})
    return client.chat.completions.create(
        model="m", messages=[{{"role": "system", "content": {obj}.system_prompt}}, *history]
    )
"""


@settings(max_examples=15, deadline=None)
@given(names=st.lists(IDENTIFIERS, min_size=4, max_size=4, unique=True))
def test_a_prompt_s_own_text_read_back_to_extend_it_is_not_request_data(
    names: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    extend, obj, event, send = names
    source = EXTENDED.format(rules=RULES, extend=extend, obj=obj, event=event, send=send)
    assert findings(source, tmp_path_factory.mktemp("p")) == []


def test_a_prompt_s_own_text_read_back_in_another_module_is_not_the_caller_s_request(
    tmp_path: Path,
) -> None:
    """The function extending the prompt is a sink for `req.system_prompt`, not for `req`:
    a caller's per-user `req` is not reported there."""
    agent = EXTENDED.format(rules=RULES, extend="extend", obj="req", event="event", send="send")
    caller = """\
from agent import send


def wake(client, run_context, history):
    req = run_context.context.event.get_extra("request")
    return send(client, req, run_context.context.event, history)
"""
    found = project(tmp_path, {"agent.py": agent, "wake.py": caller})
    assert found == {"agent.py": [], "wake.py": []}
