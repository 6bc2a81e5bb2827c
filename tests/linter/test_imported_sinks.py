"""Sinks inferred across the project's modules: a function or class of another module that
puts what it is given into a prompt makes the caller's argument a cached segment.

Invariants: renaming the other module, its function or its parameters changes no
finding, and a sink reached through N modules is found through N+1, up to the depth
imports are followed.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_paths
from prefixkit.linter.analysis import project_imports
from prefixkit.linter.analysis.cached_segments import ParameterSinks
from prefixkit.linter.analysis.project_imports import MAX_DEPTH
from prefixkit.linter.result_cache import ResultCache

from tests.linter.conftest import write

IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"self", "time", "anthropic", "client", "app", "main", "history"}
    )
)

LLM = """\
import anthropic

client = anthropic.Anthropic()


def ask(system_text, question):
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=system_text,
        messages=[{"role": "user", "content": question}],
    )


def in_user_turn(preamble, question):
    return client.messages.create(
        model="m",
        max_tokens=10,
        system="You answer questions about the manual.",
        messages=[{"role": "user", "content": f"{preamble} {question}"}],
    )


def logged(note, question):
    print(note)
    return ask("You answer questions about the manual.", question)


def through_helper(text, question):
    return ask(text + " Answer in French.", question)


class Prompts:
    @staticmethod
    def send(text, question):
        return ask(text, question)
"""

# a value in the middle of a system prompt: plenty of fixed text follows it
NOW = "f'Started {time.time()}. Plan the steps, then act on each one in turn.'"


def project_with(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A package `app` under `tmp_path` holding `modules` (name -> source)."""
    write(tmp_path / "app" / "__init__.py", "")
    for name, source in modules.items():
        write(tmp_path / "app" / f"{name}.py", source)
    return tmp_path


def found(root: Path, name: str = "main") -> list[tuple[str, int]]:
    (outcome,) = lint_paths([root / "app" / f"{name}.py"], LintConfig(root=root))
    return [(f.code, f.start.row) for f in outcome.findings]


def messages(root: Path, name: str = "main") -> list[str]:
    (outcome,) = lint_paths([root / "app" / f"{name}.py"], LintConfig(root=root))
    return [f.message for f in outcome.findings]


def caller(imports: str, *calls: str) -> str:
    body = "".join(f"    {call}\n" for call in calls)
    return f"import time\n\n{imports}\n\n\ndef run(question):\n{body}"


def test_an_argument_reaching_another_module_s_system_prompt_is_reported(tmp_path: Path) -> None:
    root = project_with(
        tmp_path, {"llm": LLM, "main": caller("from .llm import ask", f"ask({NOW}, question)")}
    )
    assert found(root) == [("PFX001", 7)]
    assert "`system=` in app/llm.py, through parameter `system_text` of `ask`" in messages(root)[0]


def test_a_parameter_that_reaches_only_the_latest_user_turn_is_not_a_sink(
    tmp_path: Path,
) -> None:
    main = caller("from .llm import in_user_turn", f"in_user_turn({NOW}, question)")
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == []


def test_a_parameter_that_reaches_no_prompt_is_not_a_sink(tmp_path: Path) -> None:
    main = caller("from .llm import logged", f"logged({NOW}, question)")
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == []


def test_helpers_of_the_other_module_are_followed(tmp_path: Path) -> None:
    main = caller("from .llm import through_helper", f"through_helper({NOW}, question)")
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == [("PFX001", 7)]


@pytest.mark.parametrize(
    "imports, call",
    [
        ("from .llm import ask", "ask"),
        ("from app.llm import ask", "ask"),
        ("from .llm import ask as speak", "speak"),
        ("from . import llm", "llm.ask"),
        ("import app.llm as llm", "llm.ask"),
        ("from .llm import Prompts", "Prompts.send"),
    ],
)
def test_every_import_form_of_the_other_module_s_function_is_followed(
    imports: str, call: str, tmp_path: Path
) -> None:
    main = caller(imports, f"{call}({NOW}, question)")
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == [("PFX001", 7)]


def test_the_argument_is_checked_at_each_call(tmp_path: Path) -> None:
    main = caller(
        "from .llm import ask",
        "ask('You answer questions about the manual.', question)",
        f"ask({NOW}, question)",
    )
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == [("PFX001", 8)]


def test_a_module_without_prompt_words_calling_a_sink_is_linted(tmp_path: Path) -> None:
    main = caller("from .llm import ask", f"ask({NOW}, question)")
    assert not any(word in main for word in ("system", "tools", "instruction", "Segment"))
    assert found(project_with(tmp_path, {"llm": LLM, "main": main})) == [("PFX001", 7)]


MESSAGES = """\
import anthropic

client = anthropic.Anthropic()


class Note:
    role: str = "system"

    def __init__(self, text):
        self.text = text


class Persona:
    def __init__(self, persona, label):
        self.persona = persona
        self.label = label

    def run(self, history):
        print(self.label)
        return client.messages.create(model="m", system=self.persona, messages=history)


class Brief:
    text: str
    footer: str = ""

    def send(self, history):
        return client.messages.create(model="m", system=self.text, messages=history)


class SystemMessage:
    \"\"\"A notice shown in the status bar; never sent to a model.\"\"\"

    def __init__(self, content):
        self.content = content
"""


@pytest.mark.parametrize(
    "call, expected",
    [
        (f"Note({NOW})", [("PFX001", 7)]),
        (f"Persona({NOW}, 'main')", [("PFX001", 7)]),
        (f"Persona(label={NOW}, persona='You plan.')", []),
        (f"Brief({NOW})", [("PFX001", 7)]),
        (f"Brief(footer={NOW}, text='You plan.')", []),
        (f"SystemMessage(content={NOW})", []),
    ],
)
def test_a_class_of_another_module_is_a_sink_by_what_it_does(
    call: str, expected: list[tuple[str, int]], tmp_path: Path
) -> None:
    main = caller("from app.messages import Brief, Note, Persona, SystemMessage", call)
    assert found(project_with(tmp_path, {"messages": MESSAGES, "main": main})) == expected


def test_a_function_taking_keyword_arguments_leaves_the_keyword_to_its_spelling(
    tmp_path: Path,
) -> None:
    relay = "def relay(client, **kwargs):\n    return client.messages.create(**kwargs)\n"
    main = caller("from .relay import relay", f"relay(None, system={NOW})")
    assert found(project_with(tmp_path, {"relay": relay, "main": main})) == [("PFX001", 7)]


def test_changing_the_other_module_lints_the_caller_again(tmp_path: Path) -> None:
    root = project_with(
        tmp_path, {"llm": LLM, "main": caller("from .llm import logged", f"logged({NOW}, q)")}
    )
    config = LintConfig(root=root)

    def run() -> list[tuple[bool, int]]:
        (outcome,) = lint_paths([root / "app" / "main.py"], config, cache=ResultCache.for_config)
        return [(outcome.cached, len(outcome.findings))]

    assert run() == [(False, 0)]
    assert run() == [(True, 0)]
    write(root / "app" / "llm.py", LLM.replace('ask("You answer', 'ask(note + " You answer'))
    assert run() == [(False, 1)]


RENAMED = """\
import anthropic

client = anthropic.Anthropic()


def {function}({text}, {question}):
    return client.messages.create(
        model="m",
        max_tokens=10,
        system={text} + " Answer in French.",
        messages=[{{"role": "user", "content": {question}}}],
    )
"""


@settings(max_examples=20, deadline=None)
@given(names=st.lists(IDENTIFIERS, min_size=4, max_size=4, unique=True))
def test_renaming_the_other_module_function_or_parameter_changes_no_finding(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    module, function, text, question = names

    def lint(module: str, function: str, text: str, question: str) -> list[tuple[str, int]]:
        root = project_with(
            tmp_path_factory.mktemp("p"),
            {
                module: RENAMED.format(function=function, text=text, question=question),
                "main": caller(f"from .{module} import {function}", f"{function}({NOW}, 'q')"),
            },
        )
        return found(root)

    expected = lint("llm", "ask", "system_text", "question")
    assert expected == [("PFX001", 7)]
    assert lint(module, function, text, question) == expected


def _chain(root: Path, links: int) -> Path:
    """`links` modules: link0 sends the request, each next one calls the one before."""
    modules = {"link0": RENAMED.format(function="send", text="text", question="question")}
    for level in range(1, links):
        modules[f"link{level}"] = (
            f"from .link{level - 1} import send as inner\n\n\n"
            "def send(text, question):\n"
            "    return inner(text, question)\n"
        )
    modules["main"] = caller(f"from .link{links - 1} import send", f"send({NOW}, 'q')")
    return project_with(root, modules)


@settings(max_examples=6, deadline=None)
@given(links=st.integers(min_value=1, max_value=MAX_DEPTH - 1))
def test_a_sink_reached_through_n_modules_is_found_through_n_plus_one(
    tmp_path_factory: pytest.TempPathFactory, links: int
) -> None:
    assert found(_chain(tmp_path_factory.mktemp("n"), links)) == [("PFX001", 7)]
    assert found(_chain(tmp_path_factory.mktemp("m"), links + 1)) == [("PFX001", 7)]


def test_a_chain_longer_than_the_import_depth_is_cut(tmp_path: Path) -> None:
    assert found(_chain(tmp_path, MAX_DEPTH + 1)) == []


def test_an_import_cycle_between_helpers_ends(tmp_path: Path) -> None:
    root = project_with(
        tmp_path,
        {
            "a": "from .b import pong\n\n\ndef ping(text):\n    return pong(text)\n",
            "b": "from .a import ping\n\n\ndef pong(text):\n    return ping(text)\n",
            "main": caller("from .a import ping", f"ping({NOW})"),
        },
    )
    assert found(root) == []


def _long_class(field: str) -> str:
    filler = "".join(f"    def helper{n}(self):\n        return {n}\n\n" for n in range(80))
    return (
        "import anthropic\n\nclient = anthropic.Anthropic()\n\n\n"
        "class Persona:\n"
        f"{field}"
        "    def __init__(self, persona):\n"
        "        self.persona = persona\n\n"
        "    def run(self, history):\n"
        "        return client.messages.create(model='m', system=self.persona, messages=history)\n\n"
        f"{filler}"
    )


@pytest.mark.parametrize(
    "field, expected", [("", []), ("    role: str = 'system'\n\n", [("PFX001", 7)])]
)
def test_a_long_class_of_another_module_is_a_sink_only_by_its_role_field(
    field: str, expected: list[tuple[str, int]], tmp_path: Path
) -> None:
    main = caller("from .persona import Persona", f"Persona({NOW})")
    root = project_with(tmp_path, {"persona": _long_class(field), "main": main})
    assert found(root) == expected


def test_a_keyword_given_to_a_long_class_of_another_module_counts_by_its_spelling(
    tmp_path: Path,
) -> None:
    source = _long_class("").replace("__init__(self, persona)", "__init__(self, persona, system)")
    main = caller("from .persona import Persona", f"Persona('You plan.', system={NOW})")
    root = project_with(tmp_path, {"persona": source, "main": main})
    assert found(root) == [("PFX001", 7)]


def test_a_summary_that_follows_no_import_is_computed_once_for_every_depth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ask` is reached from main (two modules deep) and through `helper` (one less deep):
    # llm imports no module of the project, so its summary is the same at both depths
    computed: list[tuple[str, tuple[str, ...]]] = []
    original = project_imports._Other._sinks

    def counted(other: project_imports._Other) -> ParameterSinks:
        computed.append((other.parsed.path.name, other.attributes))
        return original(other)

    monkeypatch.setattr(project_imports._Other, "_sinks", counted)
    helper = (
        "from .llm import ask\n\n\ndef relay(text, question):\n    return ask(text, question)\n"
    )
    main = caller("from .llm import ask\nfrom .helper import relay", f"ask({NOW}, question)")
    root = project_with(tmp_path, {"llm": LLM, "helper": helper, "main": main})
    main_path = root / "app" / "main.py"
    main_path.write_text(main + f"    relay({NOW}, question)\n", encoding="utf-8")
    assert found(root) == [("PFX001", 8), ("PFX001", 9)]
    assert computed.count(("llm.py", ("ask",))) == 1


SESSION = """\
from .llm import ask

RULES = "Plan the steps, then act on each one in turn. Report what you changed."


class Session:
    def __init__(self):
        self.system_text = RULES

    def set_system(self, text):
        self.system_text = text

    def remember(self, note):
        self.notes = note

    def send(self, question):
        return ask(self.system_text, question)

    def compose(self, inputs):
        return "Started {started}. ".format(**inputs) + RULES

    def add(self, role, text):
        if role == "system":
            self.system_text = text


def open_session():
    return Session()
"""


@pytest.mark.parametrize(
    "calls",
    [
        ("session = Session()", f"session.set_system({NOW})"),
        ("session = s.Session()", f"session.set_system({NOW})"),
    ],
    ids=["class imported", "class through its module"],
)
def test_a_method_called_on_an_instance_of_another_module_s_class_is_a_sink_by_what_it_does(
    calls: tuple[str, ...], tmp_path: Path
) -> None:
    imports = "from . import session as s" if "s.Session" in calls[0] else ""
    main = caller(f"from .session import Session\n{imports}", *calls)
    root = project_with(tmp_path, {"llm": LLM, "session": SESSION, "main": main})
    assert found(root) == [("PFX001", 7 + len(calls))]


def test_a_method_of_another_module_s_class_whose_parameter_reaches_no_prompt_is_not_a_sink(
    tmp_path: Path,
) -> None:
    main = caller("from .session import Session", "session = Session()", f"session.remember({NOW})")
    assert found(project_with(tmp_path, {"llm": LLM, "session": SESSION, "main": main})) == []


def test_a_value_rendered_by_a_method_of_another_module_s_class_keeps_its_taint(
    tmp_path: Path,
) -> None:
    # a prompt store's `compose(inputs)` returns its template filled in with what it is given
    main = caller(
        "from .llm import ask\nfrom .session import Session",
        "store = Session()",
        "ask(store.compose({'started': time.time()}), question)",
    )
    root = project_with(tmp_path, {"llm": LLM, "session": SESSION, "main": main})
    assert found(root) == [("PFX001", 9)]


@pytest.mark.parametrize(("role", "expected"), [("system", [("PFX001", 8)]), ("user", [])])
def test_a_method_of_another_module_s_class_counts_only_for_the_role_it_is_given(
    role: str, expected: list[tuple[str, int]], tmp_path: Path
) -> None:
    # `add(role, text)` stores `text` as the system prompt only under `if role == "system"`
    main = caller(
        "from .session import Session", "session = Session()", f"session.add({role!r}, {NOW})"
    )
    assert found(project_with(tmp_path, {"llm": LLM, "session": SESSION, "main": main})) == expected


ROLES = """\
from enum import Enum


class Role(str, Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
"""

ENTRIES = """\
from .roles import Role


class Entry:
    def __init__(self, role, text):
        self.role = role
        self.text = text


def to_entry(data):
    return Entry(Role(data["role"]), data["content"])
"""


def test_a_class_naming_several_roles_is_a_role_not_a_system_message(tmp_path: Path) -> None:
    # letta's `MessageRole(openai_message_dict["role"])`: the enum holds a system member,
    # but calling it makes a role; a user turn's dict given to `to_entry` is no system prompt
    main = caller(
        "from .roles import Role\nfrom .entries import to_entry",
        f"Role({NOW})",
        f'to_entry({{"role": "user", "content": {NOW}}})',
    )
    root = project_with(tmp_path, {"roles": ROLES, "entries": ENTRIES, "main": main})
    assert found(root) == []
