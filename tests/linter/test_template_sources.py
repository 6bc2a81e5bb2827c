"""Template texts kept elsewhere: a string value of a YAML or JSON file loaded by the
code (`yaml.safe_load(open("prompts.yaml"))["system"]`), and a constant of another
module of the project (`from .prompts import QA_PROMPT`).

Where the file's path and the keys are written in the code, the value given to a
placeholder is placed in the template's text as for a template defined in place: reported
with the fixed text that follows it, not reported where it ends a prompt sent once, not
rendered where the template has no placeholder for it. Where the file or a key cannot be
resolved, the text is not guessed: the value keeps the finding of a template whose text
is not known.

Invariant: binding a constant instead of the volatile value removes the finding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.linter.small_projects import line_of, project

RULES = (
    "You are the support agent of a bicycle shop. Answer questions about orders, returns "
    "and repairs, and quote the policy sections you rely on."
)
NOT_PLACED = "its place in the prompt is not known"
FOLLOWED = "tokens of fixed text follow it"

PROMPTS_YAML = f"""\
planner:
  system: |
    The time is {{time}}.
    {RULES}
  closing: |
    {RULES}
    The time is {{time}}.
summary: "Summarise the conversation."
"""


def agent(load: str, system: str, messages: str = "history") -> str:
    return f"""\
import json
import string
from datetime import datetime
from pathlib import Path

import jinja2
import yaml

{load}


def plan(client, history, question):
    return client.messages.create(
        model="m", max_tokens=9, system={system}, messages={messages}
    )
"""


# --- a template kept in a YAML or JSON file -----------------------------------------------


@pytest.mark.parametrize(
    "load",
    [
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'PROMPTS = yaml.safe_load(Path("app/prompts.yaml").read_text())',
        'PROMPTS = yaml.load(open("app/prompts.yaml"), Loader=yaml.SafeLoader)',
        'with open(Path(__file__).parent / "prompts.yaml") as f:\n    PROMPTS = yaml.safe_load(f)',
    ],
    ids=["open", "read_text", "load with a loader", "with open as"],
)
def test_a_clock_given_to_a_yaml_template_is_reported_with_what_follows_it(
    load: str, tmp_path: Path
) -> None:
    code = agent(load, 'PROMPTS["planner"]["system"].format(time=datetime.now())')
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


@pytest.mark.parametrize(
    "read",
    ['PROMPTS.get("planner").get("system")', 'PROMPTS["planner"].get("system", "")'],
    ids=["get", "get with a default"],
)
def test_a_yaml_template_read_with_get_is_placed(read: str, tmp_path: Path) -> None:
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', f"{read}.format(time=datetime.now())"
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


def test_a_template_from_a_json_file_is_placed_as_well(tmp_path: Path) -> None:
    document = json.dumps({"prompts": [{"system": f"The time is {{time}}. {RULES}"}]})
    code = agent(
        'PROMPTS = json.load(open("app/prompts.json"))',
        'PROMPTS["prompts"][0]["system"].format(time=datetime.now())',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.json": document})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


def test_a_jinja_template_built_from_a_yaml_value_is_placed(tmp_path: Path) -> None:
    yaml_text = f"system: |\n  The time is {{{{ time }}}}.\n  {RULES}\n"
    load = (
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))\n'
        'PLANNER = jinja2.Template(PROMPTS["system"])'
    )
    code = agent(load, "PLANNER.render(time=datetime.now())")
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": yaml_text})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


def test_a_string_template_built_from_a_yaml_value_is_placed(tmp_path: Path) -> None:
    yaml_text = f"system: |\n  Stamp $stamp.\n  {RULES}\n"
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'string.Template(PROMPTS["system"]).substitute(stamp=datetime.now())',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": yaml_text})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


def test_a_yaml_template_given_inputs_through_a_dict_is_placed(tmp_path: Path) -> None:
    load = (
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))\n'
        'INPUTS = {"time": datetime.now().isoformat()}'
    )
    code = agent(load, 'PROMPTS["planner"]["system"].format(**INPUTS)')
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert FOLLOWED in found["app/agent.py"][0][2]


def test_a_clock_ending_a_yaml_template_sent_once_is_not_reported(tmp_path: Path) -> None:
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'PROMPTS["planner"]["closing"].format(time=datetime.now())',
        '[{"role": "user", "content": question}]',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert found["app/agent.py"] == []


def test_a_value_the_yaml_template_has_no_placeholder_for_is_not_rendered(
    tmp_path: Path,
) -> None:
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'PROMPTS["summary"].format(time=datetime.now())',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert found["app/agent.py"] == []


def test_a_stable_value_given_to_a_yaml_template_is_clean(tmp_path: Path) -> None:
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'PROMPTS["planner"]["system"].format(time="noon")',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert found["app/agent.py"] == []


def test_a_yaml_template_that_never_reaches_a_model_is_not_reported(tmp_path: Path) -> None:
    code = """\
import logging
from datetime import datetime

import yaml

PROMPTS = yaml.safe_load(open("app/prompts.yaml"))


def note():
    logging.info(PROMPTS["planner"]["system"].format(time=datetime.now()))
"""
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert found["app/agent.py"] == []


@pytest.mark.parametrize(
    ("load", "key"),
    [
        ('PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', '["planner"]["missing"]'),
        ('PROMPTS = yaml.safe_load(open("app/elsewhere.yaml"))', '["planner"]["system"]'),
        ("PROMPTS = yaml.safe_load(open(PROMPT_PATH))", '["planner"]["system"]'),
        ('PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', '[SECTION]["system"]'),
        ('PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', '["planner"]'),
        ('PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', '["planner"].get("missing", "")'),
        ('PROMPTS = yaml.safe_load(open("app/prompts.yaml"))', '.get(SECTION)["system"]'),
    ],
    ids=[
        "missing key",
        "missing file",
        "path not written",
        "key not written",
        "not a string",
        "missing key read with get",
        "key read with get not written",
    ],
)
def test_an_unresolved_yaml_template_is_not_guessed(load: str, key: str, tmp_path: Path) -> None:
    code = agent(load, f"PROMPTS{key}.format(time=datetime.now())")
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": PROMPTS_YAML})
    assert [(c, r) for c, r, _ in found["app/agent.py"]] == [("PFX001", line_of(code, "now()"))]
    assert NOT_PLACED in found["app/agent.py"][0][2]


def test_an_unparsable_yaml_file_is_not_guessed(tmp_path: Path) -> None:
    code = agent(
        'PROMPTS = yaml.safe_load(open("app/prompts.yaml"))',
        'PROMPTS["planner"]["system"].format(time=datetime.now())',
    )
    found = project(tmp_path, {"app/agent.py": code, "app/prompts.yaml": "planner: [unclosed\n"})
    assert NOT_PLACED in found["app/agent.py"][0][2]


# --- a template imported from another module of the project --------------------------------

PROMPTS_MODULE = (
    f'QA_PROMPT = "Today is {{date}}. {RULES}"\nCLOSING = "{RULES} Today is {{date}}."\n'
)


def importer(name: str, value: str, messages: str = "history") -> str:
    return f"""\
from datetime import date

from .prompts import {name}


def ask(client, history, question):
    return client.messages.create(
        model="m", max_tokens=9, system={name}.format(date={value}), messages={messages}
    )
"""


def test_an_imported_template_is_placed_as_one_defined_in_the_module(tmp_path: Path) -> None:
    code = importer("QA_PROMPT", "date.today()")
    found = project(
        tmp_path,
        {"app/__init__.py": "", "app/prompts.py": PROMPTS_MODULE, "app/chat.py": code},
    )
    assert [(c, r) for c, r, _ in found["app/chat.py"]] == [("PFX001", line_of(code, "today()"))]
    assert FOLLOWED in found["app/chat.py"][0][2]


def test_an_imported_template_read_from_a_yaml_file_there_is_placed(tmp_path: Path) -> None:
    prompts = 'import yaml\n\nQA_PROMPT = yaml.safe_load(open("app/prompts.yaml"))["qa"]\n'
    code = importer("QA_PROMPT", "date.today()")
    found = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/prompts.py": prompts,
            "app/prompts.yaml": f"qa: |\n  Today is {{date}}.\n  {RULES}\n",
            "app/chat.py": code,
        },
    )
    assert [(c, r) for c, r, _ in found["app/chat.py"]] == [("PFX001", line_of(code, "today()"))]
    assert FOLLOWED in found["app/chat.py"][0][2]


def test_a_date_ending_an_imported_template_sent_once_is_not_reported(tmp_path: Path) -> None:
    code = importer("CLOSING", "date.today()", '[{"role": "user", "content": question}]')
    found = project(
        tmp_path,
        {"app/__init__.py": "", "app/prompts.py": PROMPTS_MODULE, "app/chat.py": code},
    )
    assert found["app/chat.py"] == []


def test_an_imported_template_re_exported_by_a_package_is_placed(tmp_path: Path) -> None:
    code = importer("QA_PROMPT", "date.today()").replace("from .prompts", "from .texts")
    found = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/texts/__init__.py": "from .qa import QA_PROMPT\n",
            "app/texts/qa.py": PROMPTS_MODULE,
            "app/chat.py": code,
        },
    )
    assert [(c, r) for c, r, _ in found["app/chat.py"]] == [("PFX001", line_of(code, "today()"))]
    assert FOLLOWED in found["app/chat.py"][0][2]


def test_an_imported_template_whose_text_is_not_known_is_not_guessed(tmp_path: Path) -> None:
    prompts = "import os\n\nQA_PROMPT = os.environ['QA_PROMPT']\n"
    code = importer("QA_PROMPT", "date.today()")
    found = project(
        tmp_path, {"app/__init__.py": "", "app/prompts.py": prompts, "app/chat.py": code}
    )
    assert NOT_PLACED in found["app/chat.py"][0][2]


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stable=st.sampled_from(['"2024-01-01"', "'monday'", "question[:0]", "42"]))
def test_binding_a_constant_to_a_template_kept_elsewhere_removes_the_finding(
    stable: str, tmp_path: Path
) -> None:
    files = {
        "app/__init__.py": "",
        "app/prompts.py": 'import yaml\n\nQA_PROMPT = yaml.safe_load(open("app/p.yaml"))["qa"]\n',
        "app/p.yaml": f"qa: |\n  Today is {{date}}.\n  {RULES}\n",
        "app/chat.py": importer("QA_PROMPT", stable),
    }
    assert project(tmp_path, files)["app/chat.py"] == []
