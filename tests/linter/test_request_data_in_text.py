"""PFX005 inside one text: request data placed before the fixed text of its own prompt.

Invariants: the finding depends on what follows the data in the prompt's text (about 100
tokens of fixed text or more), not on the names the project uses; data is request data
when it is a parameter of the function that sends the prompt or what a call the linter
cannot see into returns for one (retrieved context), and not when that call is given
constants only or the text is built in a constructor.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_paths, lint_source
from prefixkit.linter.catalog import is_configuration_name

from tests.linter.conftest import write

# names a request's data may have (a name that says settings or the prompt itself is not)
IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"self", "time", "str", "json"}
        and not is_configuration_name(name)
    )
)
RULES = ("Rules. " + "Cite every record you use as [Data: id]. " * 12).strip()  # 498 characters


def findings(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "module.py"
    config = LintConfig(root=tmp_path)
    return [(f.code, f.start.row) for f in lint_source(source, path, config)]


RETRIEVED = """\
TEMPLATE = \"\"\"---Role---
You answer questions about the tables provided.

---Data tables---
{{context_data}}

{rules}
\"\"\"


class {Search}:
    def __init__(self, {llm}, {builder}, {template}=None):
        self.{llm} = {llm}
        self.{builder} = {builder}
        self.{template} = {template} or TEMPLATE

    async def {search}(self, {query}):
        {found} = self.{builder}.build_context(query={query})
        {prompt} = self.{template}.format(context_data={found}.text)
        {history} = [{{"role": "system", "content": {prompt}}}]
        return await self.{llm}.achat(prompt={query}, history={history})
"""


@settings(max_examples=20, deadline=None)
@given(names=st.lists(IDENTIFIERS, min_size=9, max_size=9, unique=True))
def test_retrieved_context_before_the_system_prompt_s_rules_is_reported_under_any_names(
    names: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    keys = ["Search", "llm", "builder", "template", "search", "query", "found", "prompt"]
    source = RETRIEVED.format(
        rules=RULES,
        **dict(zip(keys, [names[0].title(), *names[1:8]], strict=True)),
        history=names[8],
    )
    # where the data is put into the text
    assert findings(source, tmp_path_factory.mktemp("p")) == [("PFX005", 19)]


ONE_TEXT = """\
import anthropic

client = anthropic.Anthropic()


def answer({question}, {notes}):
    system = {system}
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=system,
        messages=[{{"role": "user", "content": {question}}}],
    )
"""


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(IDENTIFIERS, min_size=2, max_size=2, unique=True),
    after=st.integers(min_value=0, max_value=900),
)
@example(names=["question", "notes"], after=399)
@example(names=["question", "notes"], after=400)
def test_request_data_is_reported_when_about_100_tokens_of_fixed_text_follow_it(
    names: list[str], after: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    question, notes = names
    tail = ("x" * after).strip()
    system = f'f"You help with research notes: {{{notes}}} {tail}"'
    source = ONE_TEXT.format(question=question, notes=notes, system=system)
    expected = [("PFX005", 7)] if after >= 400 else []
    assert findings(source, tmp_path_factory.mktemp("p")) == expected


@pytest.mark.parametrize(
    "value",
    [
        "retrieve(question)",  # a function of an installed package
        "store.search(question, k=5)",  # a method of an object the linter cannot resolve
        "context_for(question)",  # a helper of the module calling one of those
        "' '.join(store.search(question))",
    ],
)
def test_what_an_opaque_call_returns_for_a_parameter_is_request_data(
    value: str, tmp_path: Path
) -> None:
    source = f"""\
from rag import retrieve, store
import anthropic

client = anthropic.Anthropic()


def context_for(query):
    return store.search(query)


def answer(question):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=f"Context:\\n{{{value}}}\\n\\n{RULES}",
        messages=[{{"role": "user", "content": question}}],
    )
"""
    assert findings(source, tmp_path) == [("PFX005", 15)]


@pytest.mark.parametrize(
    "value",
    [
        "store.load('rules')",  # given constants only: the same for every request
        "retrieve(MODEL)",
        "settings.context",  # deployment settings
    ],
)
def test_a_call_given_no_request_data_is_not_request_data(value: str, tmp_path: Path) -> None:
    source = f"""\
from rag import retrieve, settings, store
import anthropic

client = anthropic.Anthropic()
MODEL = "claude-sonnet-4-5"


def answer(question):
    return client.messages.create(
        model=MODEL,
        max_tokens=512,
        system=f"Context:\\n{{{value}}}\\n\\n{RULES}",
        messages=[{{"role": "user", "content": question}}],
    )
"""
    assert findings(source, tmp_path) == []


def test_a_prompt_built_in_the_constructor_is_fixed_for_the_object_s_life(tmp_path: Path) -> None:
    source = f"""\
import anthropic


class Assistant:
    def __init__(self, persona):
        self.client = anthropic.Anthropic()
        self.system_prompt = f"You are {{persona}}.\\n\\n{RULES}"

    def ask(self, question):
        return self.client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=512,
            system=self.system_prompt,
            messages=[{{"role": "user", "content": question}}],
        )
"""
    assert findings(source, tmp_path) == []


def test_a_user_s_identity_is_reported_once_as_identity(tmp_path: Path) -> None:
    source = ONE_TEXT.format(
        question="question", notes="user_name", system=f'f"You help {{user_name}}.\\n{RULES}"'
    )
    assert findings(source, tmp_path) == [("PFX002", 7)]


def test_what_another_module_s_function_returns_for_a_parameter_is_request_data(
    tmp_path: Path,
) -> None:
    write(tmp_path / "app" / "__init__.py", "")
    write(
        tmp_path / "app" / "retrieval.py",
        "from rag import store\n\n\ndef context_for(query):\n    return store.search(query)\n",
    )
    main = write(
        tmp_path / "app" / "main.py",
        f"""\
import anthropic

from .retrieval import context_for

client = anthropic.Anthropic()


def answer(question):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=f"Context:\\n{{context_for(question)}}\\n\\n{RULES}",
        messages=[{{"role": "user", "content": question}}],
    )
""",
    )
    (outcome,) = lint_paths([main], LintConfig(root=tmp_path))
    assert [(f.code, f.start.row) for f in outcome.findings] == [("PFX005", 12)]


def test_a_text_with_several_request_values_is_reported_once_at_the_first(
    tmp_path: Path,
) -> None:
    system = f'f"Topic: {{question}}.\\nNotes: {{notes}}.\\n{RULES}"'
    source = ONE_TEXT.format(question="question", notes="notes", system=system)
    found = lint_source(source, tmp_path / "m.py", LintConfig(root=tmp_path))
    assert [(f.code, f.start.row, f.start.column) for f in found] == [
        ("PFX005", 7, 24)
    ]  # `question`, not `notes`


def test_an_agent_built_with_its_parameters_and_handed_back_is_not_reported(
    tmp_path: Path,
) -> None:
    source = f"""\
from agents import Agent


def negotiator(scenario, style):
    return Agent(
        name="negotiator",
        instructions=f"You negotiate {{scenario}} in a {{style}} way.\\n\\n{RULES}",
    )
"""
    assert findings(source, tmp_path) == []


@pytest.mark.parametrize(
    "value",
    [
        "INSTRUCTIONS.get(language)",  # one of the mapping's fixed texts, chosen by the key
        "Configuration.from_runnable_config(config).report_structure",  # run settings
    ],
)
def test_a_fixed_text_chosen_by_request_data_or_settings_is_not_request_data(
    value: str, tmp_path: Path
) -> None:
    source = f"""\
import anthropic

from .configuration import Configuration

client = anthropic.Anthropic()
INSTRUCTIONS = {{"fr": "Translate into French.", "de": "Translate into German."}}


def translate(text, language, config):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=f"{{{value}}}\\n\\n{RULES}",
        messages=[{{"role": "user", "content": text}}],
    )
"""
    assert findings(source, tmp_path) == []


@pytest.mark.parametrize(
    "value",
    [
        "system_prompt",  # the prompt's own text, given from outside
        "data_config['work_dir']",  # settings
    ],
)
def test_a_parameter_named_as_settings_or_as_the_prompt_is_not_request_data(
    value: str, tmp_path: Path
) -> None:
    source = f"""\
import anthropic

client = anthropic.Anthropic()


def answer(question, system_prompt, data_config):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=f"{{{value}}}\\n\\n{RULES}",
        messages=[{{"role": "user", "content": question}}],
    )
"""
    assert findings(source, tmp_path) == []


# each form of text, with the request data before the fixed text and after it
LAYOUTS = {
    "f-string": ('f"Context:\\n{found}\\n\\n{RULES}"', 'f"{RULES}\\n\\nContext:\\n{found}"'),
    "format": (
        '"Context:\\n{}\\n\\n{}".format(found, RULES)',
        '"{}\\n\\nContext:\\n{}".format(RULES, found)',
    ),
    "percent": (
        '"Context:\\n%s\\n\\n%s" % (found, RULES)',
        '"%s\\n\\nContext:\\n%s" % (RULES, found)',
    ),
    "percent by name": (
        '"Context: %(found)s %(rules)s" % {"found": found, "rules": RULES}',
        '"%(rules)s Context: %(found)s" % {"found": found, "rules": RULES}',
    ),
    "concatenation": (
        '"Context:\\n" + found + "\\n\\n" + RULES',
        'RULES + "\\n\\nContext:\\n" + found',
    ),
    "string.Template": (
        'string.Template("Context: $found $rules").substitute(found=found, rules=RULES)',
        'string.Template("$rules Context: $found").substitute(found=found, rules=RULES)',
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("data_first", [True, False])
def test_the_text_s_layout_is_read_in_each_form(
    layout: str, data_first: bool, tmp_path: Path
) -> None:
    text = LAYOUTS[layout][0 if data_first else 1]
    source = f"""\
import string

import anthropic

from rag import store

client = anthropic.Anthropic()
RULES = "{RULES}"


def answer(question):
    found = store.search(question)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system={text},
        messages=[{{"role": "user", "content": question}}],
    )
"""
    assert findings(source, tmp_path) == ([("PFX005", 16)] if data_first else [])
