"""Values given to a prompt template when it is rendered.

A value bound to a placeholder is followed into the template's text where the text is
known (a string constant, a module constant, a prompt file the code names), and placed
there as an f-string's value is: reported when it comes before shared text, not when
it only ends a prompt sent once or when the template has no placeholder for it. Where
the text is looked up at run time, the rendered result carries every input, and the
finding says its place is not known.

Invariants: binding a constant instead of the volatile value removes the finding;
appending static text after the placeholder never removes it; renaming the
placeholder consistently changes nothing.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source

from tests.linter.small_projects import line_of, project

RULES = (
    "You are the support agent of a bicycle shop. Answer questions about orders, returns "
    "and repairs, and quote the policy sections you rely on."
)

PLACEHOLDERS = st.from_regex(r"[a-z][a-z0-9_]{2,10}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"self", "time", "datetime", "jinja2", "string", "client", "history"}
    )
)
STATIC = st.text(alphabet="abcdefghij klmnop.,\n", min_size=1, max_size=80)


def findings(source: str, tmp_path: Path) -> list[tuple[str, int, str]]:
    path = tmp_path / "module.py"
    return [
        (f.code, f.start.row, f.message)
        for f in lint_source(source, path, LintConfig(root=tmp_path))
    ]


def rows(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    return [(code, row) for code, row, _message in findings(source, tmp_path)]


def send(system: str, setup: str = "", messages: str = "history") -> str:
    return f"""\
import string
from datetime import datetime

import jinja2

{setup}

def answer(client, history, question):
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, system={system}, messages={messages}
    )
"""


# --- the text is known: the value is placed --------------------------------------------


def test_a_clock_given_through_a_dict_of_inputs_is_reported_with_what_follows_it(
    tmp_path: Path,
) -> None:
    setup = (
        f'SYSTEM = "Today is {{date}}. {RULES}"\ninputs = {{"date": datetime.now().isoformat()}}'
    )
    source = send("SYSTEM.format(**inputs)", setup)
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "tokens of fixed text follow it" in found[0][2]


def test_a_value_the_template_has_no_placeholder_for_is_not_rendered(tmp_path: Path) -> None:
    setup = (
        f'SYSTEM = "Shop {{shop}}. {RULES}"\n'
        'inputs = {"shop": "north", "received": datetime.now().isoformat()}'
    )
    assert rows(send("SYSTEM.format(**inputs)", setup), tmp_path) == []


def test_a_value_ending_a_prompt_sent_once_is_not_reported(tmp_path: Path) -> None:
    setup = f'SYSTEM = "{RULES} Today is {{date}}."'
    messages = '[{"role": "user", "content": question}]'
    source = send("SYSTEM.format(date=datetime.now())", setup, messages)
    assert rows(source, tmp_path) == []


def test_a_value_ending_a_prompt_before_a_history_is_reported_as_ending_it(
    tmp_path: Path,
) -> None:
    setup = f'SYSTEM = "{RULES} Today is {{date}}."'
    source = send("SYSTEM.format(date=datetime.now())", setup)
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "ends `system=`" in found[0][2]


def test_dict_updates_and_item_writes_bind_placeholders(tmp_path: Path) -> None:
    setup = (
        f'SYSTEM = "Today is {{date}}, stamp {{stamp}}. {RULES}"\n'
        'inputs = dict(shop="north")\n'
        'inputs["date"] = "fixed"\n'
        "inputs.update(stamp=datetime.now())"
    )
    source = send("SYSTEM.format_map(inputs)", setup)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_a_positional_placeholder_is_bound_by_position(tmp_path: Path) -> None:
    setup = f'SYSTEM = "Shop {{}}, today {{}}. {RULES}"'
    source = send('SYSTEM.format("north", datetime.now())', setup)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]
    # the clock bound to the first placeholder: still before the rules
    source = send('SYSTEM.format(datetime.now(), "north")', setup)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_string_template_substitute_is_followed(tmp_path: Path) -> None:
    setup = f'SYSTEM = string.Template("Stamp $stamp. {RULES}")'
    source = send("SYSTEM.safe_substitute(stamp=datetime.now())", setup)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_a_jinja_placeholder_in_a_comment_renders_nothing(tmp_path: Path) -> None:
    commented = f'SYSTEM = jinja2.Template("{{# {{{{ now }}}} #}}{RULES}")'
    rendered = f'SYSTEM = jinja2.Template("At {{{{ now }}}}. {RULES}")'
    assert rows(send("SYSTEM.render(now=datetime.now())", commented), tmp_path) == []
    source = send("SYSTEM.render(now=datetime.now())", rendered)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_request_content_bound_to_a_placeholder_is_not_reported(tmp_path: Path) -> None:
    setup = f'SYSTEM = "{RULES} Question: {{question}}"'
    assert rows(send("SYSTEM.format(question=question)", setup), tmp_path) == []


def test_a_langchain_template_bound_with_partial_then_formatted(tmp_path: Path) -> None:
    source = f"""\
import time

from langchain_core.messages import SystemMessage
from langchain_core.prompts import PromptTemplate

PLANNER = PromptTemplate.from_template("It is {{now}}. {RULES}")


def plan(llm, history):
    template = PLANNER.partial(now=str(time.time()))
    return llm.invoke([SystemMessage(content=template.format()), *history])
"""
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "time.time()"))]


def test_invoking_a_model_is_not_rendering_a_template(tmp_path: Path) -> None:
    source = f"""\
import time

from langchain_core.messages import SystemMessage


def plan(llm, history):
    answer = llm.invoke({{"now": time.time()}})
    return llm.invoke([SystemMessage(content="{RULES}" + answer.content), *history])
"""
    assert rows(source, tmp_path) == []


def test_a_prompt_file_named_by_its_path_is_read_as_the_template(tmp_path: Path) -> None:
    code = """\
from datetime import datetime
from pathlib import Path

PLANNER = (Path(__file__).parent / "prompts" / "planner.txt").read_text()


def plan(client, history):
    return client.messages.create(
        model="m", max_tokens=9, system=PLANNER.format(date=datetime.now()), messages=history
    )
"""
    found = project(
        tmp_path,
        {"app/agent.py": code, "app/prompts/planner.txt": f"Today is {{date}}. {RULES}\n"},
    )
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert "tokens of fixed text follow it" in found["app/agent.py"][0][2]


def test_a_date_ending_a_prompt_file_sent_once_is_not_reported(tmp_path: Path) -> None:
    code = """\
import os
from datetime import datetime


def plan(client, question):
    path = os.path.join(os.path.dirname(__file__), "prompts", "planner.txt")
    text = open(path).read()
    return client.messages.create(
        model="m",
        max_tokens=9,
        system=text.format(date=datetime.now()),
        messages=[{"role": "user", "content": question}],
    )
"""
    found = project(
        tmp_path,
        {"app/agent.py": code, "app/prompts/planner.txt": f"{RULES}\nToday is {{date}}.\n"},
    )
    assert found["app/agent.py"] == []


def test_a_jinja_environment_template_loaded_by_name(tmp_path: Path) -> None:
    code = """\
from datetime import datetime
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"))


def plan(client, history):
    system = env.get_template("system.j2").render(today=datetime.now(), shop="north")
    return client.messages.create(model="m", max_tokens=9, system=system, messages=history)
"""
    template = f"Shop {{{{ shop }}}}. {RULES}\n{{# rendered {{{{ today }}}} #}}\n"
    found = project(tmp_path, {"app/agent.py": code, "app/templates/system.j2": template})
    assert found["app/agent.py"] == []
    template = f"Today is {{{{ today }}}}. {RULES}\n"
    (tmp_path / "app/templates/system.j2").write_text(template, encoding="utf-8")
    found = project(tmp_path / "again", {"app/agent.py": code, "app/templates/system.j2": template})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]


def test_a_text_that_cannot_be_read_as_a_template_keeps_every_value(tmp_path: Path) -> None:
    setup = f'SYSTEM = "Reply as JSON {{ {RULES}"'
    source = send("SYSTEM.format(stamp=datetime.now())", setup)
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "its place in the prompt is not known" in found[0][2]


# --- the text is looked up at run time: every input, place unknown --------------------


def test_a_prompt_store_of_another_module_given_inputs_by_keywords(tmp_path: Path) -> None:
    store = """\
_PROMPTS: dict[str, str] = {}


def format_prompt(name, **inputs):
    return _PROMPTS[name].format(**inputs)
"""
    agent = """\
from datetime import datetime

from .store import format_prompt


def plan(client, history):
    inputs = {"date": datetime.now().isoformat()}
    system = format_prompt("planner", **inputs)
    return client.messages.create(model="m", max_tokens=9, system=system, messages=history)
"""
    found = project(tmp_path, {"app/__init__.py": "", "app/store.py": store, "app/agent.py": agent})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(agent, "now()"))]
    assert "its place in the prompt is not known" in found["app/agent.py"][0][2]


def test_a_prompt_store_given_only_fixed_inputs_is_clean(tmp_path: Path) -> None:
    source = send(
        'get_prompt("planner", inputs={"shop": "north"})',
        "_PROMPTS = {}\n\ndef get_prompt(name, inputs=None):\n"
        "    return _PROMPTS[name].format(**(inputs or {}))",
    )
    assert rows(source, tmp_path) == []


# --- a chat template holding a system message: its render call is the prompt -------------


def chat(messages: str, body: str) -> str:
    return f"""\
from datetime import datetime

from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

PROMPT = ChatPromptTemplate.from_messages({messages})


def answer(llm, question, history):
{body}
"""


SYSTEM_FIRST = f'[("system", "Current time: {{now}}. {RULES}"), ("user", "{{question}}")]'


def test_a_clock_given_to_a_chat_template_with_format_prompt_is_reported(
    tmp_path: Path,
) -> None:
    source = chat(
        SYSTEM_FIRST,
        '    inputs = {"now": datetime.now().isoformat(), "question": question}\n'
        "    return llm.invoke(PROMPT.format_prompt(**inputs))",
    )
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "system message of the chat template" in found[0][2]
    assert "tokens of fixed text follow it" in found[0][2]


def test_a_chain_invoked_with_inputs_built_by_keys_renders_its_template(tmp_path: Path) -> None:
    source = chat(
        SYSTEM_FIRST,
        '    inputs = {}\n    inputs["now"] = datetime.now().isoformat()\n'
        '    inputs["question"] = question\n    return (PROMPT | llm).invoke(inputs)',
    )
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_a_callable_bound_with_partial_is_volatile_on_every_request(tmp_path: Path) -> None:
    source = chat(
        f'[("system", "Current time: {{now}}. {RULES}"), MessagesPlaceholder("history")]',
        "    bound = PROMPT.partial(now=lambda: str(datetime.now()))\n"
        '    return (bound | llm).invoke({"history": history})',
    )
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "changes on every request" in found[0][2]


def test_a_template_name_rebound_with_partial_carries_the_bound_value(tmp_path: Path) -> None:
    source = chat(
        f'[("system", "Current time: {{now}}. {RULES}"), MessagesPlaceholder("history")]',
        "    global PROMPT\n"
        "    PROMPT = PROMPT.partial(now=datetime.now().isoformat())\n"
        '    return (PROMPT | llm).invoke({"history": history})',
    )
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


def test_a_stable_input_and_the_question_are_not_reported(tmp_path: Path) -> None:
    source = chat(
        SYSTEM_FIRST, '    return PROMPT.invoke({"now": "the opening day", "question": question})'
    )
    assert rows(source, tmp_path) == []


def test_an_input_only_a_closing_user_turn_reads_is_not_followed_to_the_callers(
    tmp_path: Path,
) -> None:
    source = chat(
        SYSTEM_FIRST,
        '    return PROMPT.invoke({"now": "the opening day", "question": question})\n\n\n'
        "def handle(llm, session_id, history):\n"
        '    return answer(llm, f"session {session_id}", history)',
    )
    assert rows(source, tmp_path) == []


def test_a_clock_ending_the_system_message_before_only_the_question_is_not_reported(
    tmp_path: Path,
) -> None:
    messages = f'[("system", "{RULES} Now: {{now}}"), ("human", "{{question}}")]'
    source = chat(
        messages, "    return PROMPT.invoke({'now': datetime.now(), 'question': question})"
    )
    assert rows(source, tmp_path) == []


def test_a_clock_ending_the_system_message_before_a_history_is_reported_as_ending_it(
    tmp_path: Path,
) -> None:
    messages = f'[("system", "{RULES} Now: {{now}}"), ("placeholder", "{{history}}")]'
    source = chat(messages, "    return PROMPT.invoke({'now': datetime.now(), 'history': history})")
    found = findings(source, tmp_path)
    assert [(code, row) for code, row, _ in found] == [("PFX001", line_of(source, "now()"))]
    assert "ends the system message of the chat template" in found[0][2]


def test_a_chat_template_of_user_turns_only_is_not_a_cached_position(tmp_path: Path) -> None:
    messages = '[("human", "At {now}: {question}")]'
    source = chat(
        messages, "    return PROMPT.invoke({'now': datetime.now(), 'question': question})"
    )
    assert rows(source, tmp_path) == []


def test_a_template_text_joined_with_plus_is_known(tmp_path: Path) -> None:
    source = f"""\
from datetime import datetime

from langchain_core.messages import SystemMessage
from langchain_core.prompts import PromptTemplate

RULES = "{RULES}"
TEMPLATE = PromptTemplate.from_template("The time is {{now}}. " + RULES)


def answer(llm, history):
    text = TEMPLATE.invoke({{"now": datetime.now()}}).to_string()
    return llm.invoke([SystemMessage(content=text), *history])
"""
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]


# --- invariants --------------------------------------------------------------------------

DIALECTS = {
    "format": ('"{opening}{{{name}}}{tail}"', "SYSTEM.format(**{{'{name}': {value}}})"),
    "format_map": ('"{opening}{{{name}}}{tail}"', "SYSTEM.format_map(dict({name}={value}))"),
    "dollar": (
        'string.Template("{opening}${{{name}}}{tail}")',
        "SYSTEM.substitute({name}={value})",
    ),
    "jinja": (
        'jinja2.Template("{opening}{{{{ {name} }}}}{tail}")',
        "SYSTEM.render({name}={value})",
    ),
    "chat": (
        'ChatPromptTemplate.from_messages([("system", "{opening}{{{name}}}{tail}"), '
        '("placeholder", "{{history}}")])',
        "SYSTEM.invoke({{'{name}': {value}}}).to_string()",
    ),
}


def rendered(dialect: str, name: str, value: str, tail: str, opening: str = "Stamp ") -> str:
    template, call = DIALECTS[dialect]
    escaped = tail.replace("\\", "\\\\").replace("\n", "\\n").replace("{", "").replace("}", "")
    escaped = escaped.replace("$", "")
    setup = "SYSTEM = " + template.format(opening=opening, name=name, tail=escaped)
    return send(call.format(name=name, value=value), setup)


@settings(max_examples=30, deadline=None)
@given(dialect=st.sampled_from(sorted(DIALECTS)), name=PLACEHOLDERS)
def test_binding_a_constant_instead_removes_the_finding(
    tmp_path_factory: pytest.TempPathFactory, dialect: str, name: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("render")
    tail = ". " + RULES
    source = rendered(dialect, name, "datetime.now()", tail)
    assert rows(source, tmp_path) == [("PFX001", line_of(source, "now()"))]
    assert rows(rendered(dialect, name, "'north'", tail), tmp_path) == []


@settings(max_examples=30, deadline=None)
@given(dialect=st.sampled_from(sorted(DIALECTS)), name=PLACEHOLDERS, extra=STATIC)
def test_appending_static_text_after_the_placeholder_never_removes_the_finding(
    tmp_path_factory: pytest.TempPathFactory, dialect: str, name: str, extra: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("render")
    source = rendered(dialect, name, "datetime.now()", ". " + RULES)
    before = rows(source, tmp_path)
    after = rows(rendered(dialect, name, "datetime.now()", ". " + RULES + extra), tmp_path)
    assert before == after == [("PFX001", line_of(source, "now()"))]


@settings(max_examples=30, deadline=None)
@given(
    dialect=st.sampled_from(sorted(DIALECTS)),
    names=st.lists(PLACEHOLDERS, min_size=2, max_size=2, unique=True),
    tail=st.sampled_from(["", ".", ". " + RULES]),
)
def test_renaming_the_placeholder_consistently_changes_no_finding(
    tmp_path_factory: pytest.TempPathFactory, dialect: str, names: list[str], tail: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("render")
    first, second = names
    assert findings(rendered(dialect, first, "datetime.now()", tail), tmp_path) == findings(
        rendered(dialect, second, "datetime.now()", tail), tmp_path
    )


STORED = """\
from datetime import datetime


class {Agent}:
    def __init__(self, {store}, llm):
        self.{store} = {store}
        self.llm = llm

    async def run(self, history):
        system = await self.{store}.{handler}.{method}(
            "agent", {given}
        )
        return await self.llm.acompletion(
            messages=[{{"role": "system", "content": system}}, *history]
        )
"""


@settings(max_examples=15, deadline=None)
@given(names=st.lists(PLACEHOLDERS, min_size=4, max_size=4, unique=True))
def test_a_clock_in_the_inputs_given_to_a_prompt_store_the_module_does_not_show_is_reported(
    names: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What the store renders is not known: the clock's place in it is not either."""
    agent, store, handler, method = names
    given = f'{handler}={{"{method}": datetime.now().strftime("%H:%M")}}'
    source = STORED.format(
        Agent=agent.title(), store=store, handler=handler, method=method, given=given
    )
    tmp_path = tmp_path_factory.mktemp("p")
    found = [f for f in lint_source(source, tmp_path / "agent.py", LintConfig())]
    assert [(f.code, f.start.row) for f in found] == [("PFX001", 11)]
    assert "its place in the prompt is not known" in found[0].message


def test_a_clock_given_by_keyword_itself_is_an_object_s_metadata_not_followed(
    tmp_path: Path,
) -> None:
    """`Message(created_at=now)`, `Part(id=uuid4())`: what the call makes is not the
    clock's text."""
    source = STORED.format(
        Agent="Agent",
        store="store",
        handler="prompts",
        method="build",
        given='created_at=datetime.now().strftime("%H:%M")',
    )
    assert lint_source(source, tmp_path / "agent.py", LintConfig()) == []


def test_a_clock_given_by_position_to_a_call_the_module_does_not_show_is_not_followed(
    tmp_path: Path,
) -> None:
    """A positional argument may be what a model is asked (`llm.invoke(...)`), not a
    template's input."""
    source = STORED.format(
        Agent="Agent",
        store="store",
        handler="prompts",
        method="fetch",
        given='{"date": datetime.now().strftime("%H:%M")}',
    )
    assert lint_source(source, tmp_path / "agent.py", LintConfig()) == []
