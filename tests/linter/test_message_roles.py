"""Message roles resolved by value, whatever their spelling.

A dict message's role is read the way a message class's is: a literal in any case, an
enum member named for the role (or its `.value`), or a name the module binds to such a
literal. A
conversation turn (user, assistant, tool or function result) is not the prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.linter import LintConfig, lint_source

MODULE = """\
import enum
import time
from openai import OpenAI

client = OpenAI()
LEAD_ROLE = "system"


class Role(str, enum.Enum):
    SYSTEM = "system"
    USER = "user"


def ask(history):
    messages = [{message}, *history]
    return client.chat.completions.create(model="m", messages=messages)
"""

DATED = 'f"Opened {time.time()}. Plan each step before acting, then write the answer."'


def findings(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "module.py"
    return [(f.code, f.start.row) for f in lint_source(source, path, LintConfig(root=tmp_path))]


SYSTEM_ROLE_SPELLINGS = {
    "upper case": '"SYSTEM"',
    "mixed case": '"System"',
    "developer, upper case": '"DEVELOPER"',
    "an enum member whose value is system": "Role.SYSTEM",
    "the value of that enum member": "Role.SYSTEM.value",
    "a module constant holding system": "LEAD_ROLE",
}


@pytest.mark.parametrize("spelling", sorted(SYSTEM_ROLE_SPELLINGS))
def test_a_dict_message_s_system_role_is_read_by_value(spelling: str, tmp_path: Path) -> None:
    role = SYSTEM_ROLE_SPELLINGS[spelling]
    source = MODULE.format(message=f'{{"role": {role}, "content": {DATED}}}')
    assert findings(source, tmp_path) == [("PFX001", 15)], source


def test_dict_built_with_a_role_constant_is_a_system_message(tmp_path: Path) -> None:
    source = MODULE.format(message=f"dict(role=LEAD_ROLE, content={DATED})")
    assert findings(source, tmp_path) == [("PFX001", 15)], source


@pytest.mark.parametrize(
    "role", ['"USER"', '"Assistant"', "Role.USER", "Role.USER.value", '"tool"', '"function"']
)
def test_a_dict_message_with_a_turn_role_is_not_the_prefix(role: str, tmp_path: Path) -> None:
    source = MODULE.format(message=f'{{"role": {role}, "content": {DATED}}}')
    assert findings(source, tmp_path) == [], source


@pytest.mark.parametrize("role", ['"tool"', '"function"', '"TOOL"'])
def test_a_cache_marker_on_a_tool_result_is_not_a_prefix_block(role: str, tmp_path: Path) -> None:
    block = f'{{"type": "text", "text": {DATED}, "cache_control": {{"type": "ephemeral"}}}}'
    message = f'{{"role": {role}, "tool_call_id": "call_1", "content": [{block}]}}'
    source = MODULE.format(message=message)
    assert findings(source, tmp_path) == [], source


def test_a_cache_marker_on_a_system_block_spelled_in_upper_case_is_a_prefix_block(
    tmp_path: Path,
) -> None:
    block = f'{{"type": "text", "text": {DATED}, "cache_control": {{"type": "ephemeral"}}}}'
    source = MODULE.format(message=f'{{"role": "SYSTEM", "content": [{block}]}}')
    assert ("PFX001", 15) in findings(source, tmp_path), source


def test_a_dict_whose_role_names_no_message_role_is_not_a_message(tmp_path: Path) -> None:
    # a request queued with a crew role label: appending it to a list does not make it a
    # message at a conversation's tail, so its `system` is still checked
    source = (
        "import time\n"
        "class Queue:\n"
        "    def plan(self, task):\n"
        "        rules = 'Plan each step before acting, then write the answer.'\n"
        "        self.requests.append({'role': 'reviewer', 'model': 'm', 'messages': [task],\n"
        "                              'system': f'Opened {time.time()}. {rules}'})\n"
    )
    assert findings(source, tmp_path) == [("PFX001", 6)]


def test_a_dict_with_a_tool_role_appended_to_a_log_is_a_message_at_its_tail(
    tmp_path: Path,
) -> None:
    source = (
        "import time\n"
        "class Session:\n"
        "    def record(self, call_id, result):\n"
        "        self.messages.append({'role': 'TOOL', 'tool_call_id': call_id, 'content': [\n"
        "            {'type': 'text', 'text': f'{result} at {time.time()}',\n"
        "             'cache_control': {'type': 'ephemeral'}}]})\n"
    )
    assert findings(source, tmp_path) == []


ROLES_MODULE = """\
import enum


class Speaker(enum.Enum):
    LEAD = "system"
    ASKER = "user"


class Prompt:
    def __init__(self, speaker, text):
        self.speaker = speaker
        self.text = text

    def as_message(self):
        return {"role": self.speaker.value, "content": self.text}
"""

ROLE_IMPORTS = {
    "the class imported": "from .roles import Prompt, Speaker",
    "the module imported": "from . import roles\nfrom .roles import Prompt",
}

IMPORTED_ROLE_SPELLINGS = {
    "a dict's role, the member": ('{{"role": {speaker}.LEAD, "content": {text}}}', 9),
    "a dict's role, the member's value": ('{{"role": {speaker}.LEAD.value, "content": {text}}}', 9),
    "a project message class given the member": ("Prompt({speaker}.LEAD, {text}).as_message()", 9),
}


@pytest.mark.parametrize("spelling", sorted(IMPORTED_ROLE_SPELLINGS))
@pytest.mark.parametrize("imports", sorted(ROLE_IMPORTS))
def test_a_role_bound_in_another_module_of_the_project_is_read_by_value(
    spelling: str, imports: str, tmp_path: Path
) -> None:
    # `class Speaker(Enum): LEAD = "system"` in roles.py: `Speaker.LEAD` in app.py is the
    # system role, whatever the member is named
    package = tmp_path / "app"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "roles.py").write_text(ROLES_MODULE, encoding="utf-8")
    speaker = "roles.Speaker" if "module" in imports else "Speaker"
    template, line = IMPORTED_ROLE_SPELLINGS[spelling]
    message = template.format(speaker=speaker, text=DATED)
    source = (
        f"import time\nfrom openai import OpenAI\n{ROLE_IMPORTS[imports]}\n\n"
        f"client = OpenAI()\n\n\ndef ask(history):\n    messages = [{message}, *history]\n"
        '    return client.chat.completions.create(model="m", messages=messages)\n'
    )
    if "module" in imports:
        line += 1
    path = package / "app.py"
    path.write_text(source, encoding="utf-8")
    found = [(f.code, f.start.row) for f in lint_source(source, path, LintConfig(root=tmp_path))]
    assert found == [("PFX001", line)], source


def test_a_turn_role_bound_in_another_module_is_not_the_prefix(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    (package / "roles.py").write_text(ROLES_MODULE, encoding="utf-8")
    source = (
        "import time\nfrom openai import OpenAI\nfrom .roles import Speaker\n\n"
        "client = OpenAI()\n\n\ndef ask(history):\n"
        f'    messages = [*history, {{"role": Speaker.ASKER, "content": {DATED}}}]\n'
        '    return client.chat.completions.create(model="m", messages=messages)\n'
    )
    path = package / "app.py"
    path.write_text(source, encoding="utf-8")
    assert lint_source(source, path, LintConfig(root=tmp_path)) == []
