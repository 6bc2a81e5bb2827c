"""Sinks inferred from what the project's own code does, and findings placed by what follows.

Invariants: a project's names never decide a finding (renaming a class, a field, a
function or a parameter changes nothing), a value reaching a prompt through N helpers
is found through N+1, and a value that ends a prompt sent once is reported only when
something reusable follows it.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source

IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and name not in {"self", "time", "enum", "str"}
)


def findings(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "module.py"
    return [(f.code, f.start.row) for f in lint_source(source, path, LintConfig(root=tmp_path))]


MESSAGE_CLASS = """\
import enum
import time


class {Kinds}(enum.Enum):
    SYSTEM = "system"
    USER = "user"


class {Note}:
    def __init__(self, {body}, {kind}):
        self.{body} = {body}
        self.{kind} = {kind}


def {build}({question}, {history}):
    {opening} = {Note}(f"Started {{time.time()}}. Plan the steps, then act.", {Kinds}.SYSTEM)
    {asked} = {Note}({question}, {Kinds}.USER)
    return [{opening}, *{history}, {asked}]
"""


@settings(max_examples=25, deadline=None)
@given(names=st.lists(IDENTIFIERS, min_size=8, max_size=8, unique=True))
def test_renaming_the_project_s_message_class_changes_no_finding(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    kinds, note, body, kind, build, question, history, opening = names
    renamed = MESSAGE_CLASS.format(
        Kinds=kinds.title(),
        Note=note.title() + "X",
        body=body,
        kind=kind,
        build=build,
        question=question,
        history=history,
        opening=opening,
        asked=opening + "2",
    )
    original = MESSAGE_CLASS.format(
        Kinds="Kind",
        Note="Message",
        body="text",
        kind="role",
        build="build",
        question="question",
        history="history",
        opening="opening",
        asked="asked",
    )
    expected = findings(original, tmp_path_factory.mktemp("a"))
    assert [code for code, _ in expected] == ["PFX001"]
    assert findings(renamed, tmp_path_factory.mktemp("b")) == expected


def _chain(depth: int, names: list[str]) -> str:
    """A system prompt built from a parameter passed down through `depth` helpers."""
    lines = ["import time", "import anthropic", "client = anthropic.Anthropic()", ""]
    lines += [
        f"def {names[0]}(text, history):",
        "    return client.messages.create(",
        "        model='m', max_tokens=10, system=text + ' Answer in French.', messages=history",
        "    )",
        "",
    ]
    for level in range(1, depth + 1):
        lines += [
            f"def {names[level]}(text, history):",
            f"    return {names[level - 1]}(text, history)",
            "",
        ]
    lines += [
        "def run(history):",
        f"    return {names[depth]}(f'Started {{time.time()}}.', history)",
    ]
    return "\n".join(lines) + "\n"


@settings(max_examples=10, deadline=None)
@given(depth=st.integers(min_value=0, max_value=6), names=st.data())
def test_a_value_found_through_n_helpers_is_found_through_n_plus_one(
    tmp_path_factory: pytest.TempPathFactory, depth: int, names: st.DataObject
) -> None:
    chain = names.draw(st.lists(IDENTIFIERS, min_size=depth + 2, max_size=depth + 2, unique=True))
    shallow = findings(_chain(depth, chain), tmp_path_factory.mktemp("n"))
    deeper = findings(_chain(depth + 1, chain), tmp_path_factory.mktemp("m"))
    assert [code for code, _ in shallow] == ["PFX001"]
    assert [code for code, _ in deeper] == ["PFX001"]


ONE_SHOT = """\
import datetime


def ask(client, question, history):
    return client.chat.completions.create(
        model="m",
        messages=[
            {{"role": "system", "content": f"{before}{{datetime.datetime.now()}}{after}"}},
            {following}
            {{"role": "user", "content": question}},
        ],
    )
"""


@settings(max_examples=30, deadline=None)
@given(
    before=st.sampled_from(["You answer questions. Now: ", "Rules first, then the time: "]),
    after=st.sampled_from(["", ".", "\\n", " (UTC).", ". Cite every source you use, always."]),
    with_history=st.booleans(),
)
def test_a_value_ending_a_prompt_is_reported_only_when_something_reusable_follows(
    tmp_path_factory: pytest.TempPathFactory, before: str, after: str, with_history: bool
) -> None:
    source = ONE_SHOT.format(
        before=before, after=after, following="*history," if with_history else ""
    )
    found = findings(source, tmp_path_factory.mktemp("o"))
    reusable_text_follows = len(after.replace("\\n", "").strip()) >= 12
    if with_history or reusable_text_follows:
        assert [code for code, _ in found] == ["PFX001"], source
    else:
        assert found == [], source


def test_a_finding_says_how_much_fixed_text_follows_the_value(tmp_path: Path) -> None:
    source = ONE_SHOT.format(before="Now: ", after=". " + "Cite every source. " * 10, following="")
    path = tmp_path / "module.py"
    (finding,) = lint_source(source, path, LintConfig(root=tmp_path))
    assert "about 48 tokens of fixed text follow it" in finding.message


ROLE_FORMS = {
    "a literal, by position": ('Entry("system", {text})', ""),
    "a literal, by keyword": ('Entry(kind="developer", body={text})', ""),
    "an enum member": ("Entry(body={text}, kind=Kind.SYSTEM)", ""),
    "a variable holding a literal": ("Entry(lead, {text})", 'lead = "system"'),
    "an attribute holding a literal": ("Entry(self.lead, {text})", ""),
}


@pytest.mark.parametrize("form", sorted(ROLE_FORMS))
def test_a_system_role_is_resolved_by_value_in_any_spelling(form: str, tmp_path: Path) -> None:
    call, binding = ROLE_FORMS[form]
    text = 'f"Opened {time.time()}. Plan each step before acting."'
    source = "\n".join(
        [
            "import enum",
            "import time",
            "class Kind(enum.Enum):",
            "    SYSTEM = 'system'",
            "class Planner:",
            "    lead = 'system'",
            "    def build(self, history):",
            f"        {binding}",
            f"        return [{call.format(text=text)}, *history]",
        ]
    )
    assert [code for code, _ in findings(source + "\n", tmp_path)] == ["PFX001"], source


@pytest.mark.parametrize("role", ['"user"', '"assistant"', "Kind.USER", "speaker"])
def test_a_message_class_given_another_role_is_not_a_prompt(role: str, tmp_path: Path) -> None:
    source = "\n".join(
        [
            "import enum",
            "import time",
            "class Kind(enum.Enum):",
            "    USER = 'user'",
            "def build(history, speaker='user'):",
            f"    return [*history, Entry({role}, f'Sent {{time.time()}} to the team, thanks.')]",
        ]
    )
    assert findings(source + "\n", tmp_path) == [], source


SETTER_CLASS = """\
import time
import anthropic

client = anthropic.Anthropic()
RULES = "Plan the steps, then act on each one in turn. Report what you changed."


class {Agent}:
    def __init__(self):
        self.{field} = RULES

    def {setter}(self, {text}):
        self.{field} = {text}

    def {send}(self, {question}):
        return client.messages.create(
            model="m",
            max_tokens=10,
            system=self.{field},
            messages=[{{"role": "user", "content": {question}}}],
        )


def {run}({question}):
    {agent} = {Agent}()
    {agent}.{setter}(f"Started {{time.time()}}. Plan the steps, then act on each one.")
    return {agent}.{send}({question})
"""


@settings(max_examples=25, deadline=None)
@given(names=st.lists(IDENTIFIERS, min_size=8, max_size=8, unique=True))
def test_a_setter_s_parameter_stored_on_self_and_read_into_a_prompt_is_a_sink(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    # `agent.set_system(f"... {time.time()} ...")`, the class sending `system=self.system`:
    # the argument reaches the prompt whatever the class, method, field and names are called
    agent, field, setter, text, send, question, run, instance = names
    source = SETTER_CLASS.format(
        Agent=agent.title() + "X",
        field=field,
        setter=setter,
        text=text,
        send=send,
        question=question,
        run=run,
        agent=instance,
    )
    assert findings(source, tmp_path_factory.mktemp("s")) == [("PFX001", 26)], source


DISPATCH = """\
import time
import anthropic

client = anthropic.Anthropic()


class Conversation:
    def __init__(self):
        self.system = "You are helpful."
        self.turns = []

    def add(self, role, text):
        {dispatch}

    def send(self):
        return client.messages.create(
            model="m", max_tokens=10, system=self.system, messages=self.turns
        )


def run(question):
    conversation = Conversation()
    conversation.add({role!r}, f"Started {{time.time()}}. Plan the steps, then act on each.")
    return conversation.send()
"""

DISPATCHES = {
    "==": 'if role == "system":\n            self.system = text\n'
    "        else:\n            self.turns.append({'role': role, 'content': text})",
    "in": 'if role in ("system", "developer"):\n            self.system = text\n'
    "        else:\n            self.turns.append({'role': role, 'content': text})",
    "!= (the else branch)": 'if role != "system":\n'
    "            self.turns.append({'role': role, 'content': text})\n"
    "        else:\n            self.system = text",
    "a conditional expression": "self.system = text if role == 'system' else self.system",
}


@pytest.mark.parametrize("dispatch", sorted(DISPATCHES))
@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_a_parameter_put_into_the_prompt_under_a_test_on_the_role_counts_for_that_role(
    dispatch: str, role: str, tmp_path: Path
) -> None:
    # `add(role, text)` keeps `text` as the system prompt only when `role` is "system": a
    # call given another role literal puts nothing into the prompt
    source = DISPATCH.format(dispatch=DISPATCHES[dispatch], role=role)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "conversation.add(" in text)
    expected = [("PFX001", line)] if role == "system" else []
    assert findings(source, tmp_path) == expected, source
