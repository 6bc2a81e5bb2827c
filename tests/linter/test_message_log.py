"""A message appended to a conversation log that already holds turns is the log's tail:
silent whatever its role; the same message where a request's prompt starts is reported."""

from __future__ import annotations

import keyword
import tempfile
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source


def rows(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    found = lint_source(source, tmp_path / "module.py", LintConfig(root=tmp_path))
    return [(finding.code, finding.start.row) for finding in found]


HEADER = "import time\nfrom openai import OpenAI\nclient = OpenAI()\n"


def test_a_notice_appended_after_the_turns_a_list_starts_with_is_the_tail(tmp_path: Path) -> None:
    source = HEADER + (
        "def ask(question):\n"
        "    messages = [{'role': 'system', 'content': 'Be brief.'},\n"
        "                {'role': 'user', 'content': question}]\n"
        "    messages.append({'role': 'system', 'content': f'Sent at {time.time()}'})\n"
        "    return client.chat.completions.create(model='m', messages=messages)\n"
    )
    assert rows(source, tmp_path) == []


def test_a_notice_appended_to_a_script_log_after_its_turns_is_the_tail(tmp_path: Path) -> None:
    source = HEADER + (
        "messages = [{'role': 'system', 'content': 'You help.'}]\n"
        "while True:\n"
        "    messages.append({'role': 'user', 'content': input()})\n"
        "    reply = client.chat.completions.create(model='m', messages=messages)\n"
        "    messages.append({'role': 'assistant', 'content': reply.choices[0].message.content})\n"
        "    messages.append({'role': 'system', 'content': f'Tool done at {time.time()}'})\n"
    )
    assert rows(source, tmp_path) == []


def test_a_notice_appended_after_the_history_a_list_starts_from_is_the_tail(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "def ask(history):\n"
        "    messages = [{'role': 'system', 'content': 'You help.'}, *history]\n"
        "    messages.append({'role': 'system', 'content': f'Sent at {time.time()}'})\n"
        "    return client.chat.completions.create(model='m', messages=messages)\n"
    )
    assert rows(source, tmp_path) == []


LOG_CLASS = (
    "import time\n"
    "from dataclasses import dataclass\n"
    "import anthropic\n"
    "client = anthropic.Anthropic()\n"
    "@dataclass\n"
    "class Entry:\n"
    "    role: str\n"
    "    content: str\n"
    "class Log:\n"
    "    def __init__(self, system):\n"
    "        self.entries = [Entry('system', system)]\n"
    "    def record(self, entry):\n"
    "        self.entries.append(entry)\n"
    "class Agent:\n"
    "    def __init__(self):\n"
    "        self.log = Log('You are a coding agent.')\n"
    "    def step(self, text):\n"
    "        self.log.record(Entry('user', text))\n"
    "        reply = client.messages.create(model='m', max_tokens=9, messages=[\n"
    "            {'role': e.role, 'content': e.content} for e in self.log.entries])\n"
    "        %s\n"
    "        return reply\n"
)


def test_a_message_given_to_a_method_that_appends_it_to_a_log_is_the_tail(
    tmp_path: Path,
) -> None:
    call = "self.log.record(Entry('system', f'Tool ran in {time.time():.1f} s'))"
    assert rows(LOG_CLASS % call, tmp_path) == []


def test_a_message_given_to_a_method_that_does_not_append_it_is_still_checked(
    tmp_path: Path,
) -> None:
    call = "self.log.entries = [Entry('system', f'Now {time.time()}')] + self.log.entries"
    assert rows(LOG_CLASS % call, tmp_path) == [("PFX001", 21)]


def test_a_system_prompt_a_list_starts_with_before_the_history_is_reported(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "def ask(history, question):\n"
        "    messages = [{'role': 'system', 'content': f'It is {time.time()}. Be brief.'}]\n"
        "    messages += history\n"
        "    messages.append({'role': 'user', 'content': question})\n"
        "    return client.chat.completions.create(model='m', messages=messages)\n"
    )
    assert rows(source, tmp_path) == [("PFX001", 5)]


def test_a_system_message_appended_to_an_empty_list_before_the_history_is_reported(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "def ask(history):\n"
        "    messages = []\n"
        "    messages.append({'role': 'system', 'content': f'It is {time.time()}. Be brief.'})\n"
        "    messages.extend(history)\n"
        "    return client.chat.completions.create(model='m', messages=messages)\n"
    )
    assert rows(source, tmp_path) == [("PFX001", 6)]


def test_a_system_message_inserted_at_the_start_of_the_history_is_reported(
    tmp_path: Path,
) -> None:
    source = HEADER + (
        "def ask(history):\n"
        "    history.insert(0, {'role': 'system', 'content': f'It is {time.time()}. Be brief.'})\n"
        "    return client.chat.completions.create(model='m', messages=history)\n"
    )
    assert rows(source, tmp_path) == [("PFX001", 5)]


def test_a_system_message_put_before_the_history_is_reported(tmp_path: Path) -> None:
    source = HEADER + (
        "def ask(history):\n"
        "    system = {'role': 'system', 'content': f'It is {time.time()}. Be brief.'}\n"
        "    return client.chat.completions.create(model='m', messages=[system] + history)\n"
    )
    assert rows(source, tmp_path) == [("PFX001", 5)]


def test_a_project_message_first_in_a_list_before_the_history_is_reported(
    tmp_path: Path,
) -> None:
    call = (
        "client.messages.create(model='m', max_tokens=9, messages=[\n"
        "            Entry('system', f'Now {time.time()}. Be brief.'), *self.log.entries])"
    )
    assert rows(LOG_CLASS % call, tmp_path) == [("PFX001", 22)]


names = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"time", "client", "question", "list", "input", "print"}
    )
)
roles = st.sampled_from(["system", "developer", "SYSTEM", "Developer"])
logs = st.sampled_from(
    [
        "{log} = [{{'role': 'system', 'content': 'Help.'}}, {{'role': 'user', 'content': question}}]",
        "{log} = [{{'role': 'system', 'content': 'Help.'}}]\n"
        "    {log}.append({{'role': 'user', 'content': question}})",
        "{log} = [{{'role': 'system', 'content': 'Help.'}}]\n"
        "    {log} += [{{'role': 'assistant', 'content': question}}]",
        "{log} = list(question)",
    ]
)
adds = st.sampled_from(["{log}.append({msg})", "{log}.extend([{msg}])", "{log} += [{msg}]"])


@settings(max_examples=40)
@given(log=names, text=names, role=roles, start=logs, add=adds)
def test_a_message_added_to_a_log_after_its_turns_is_never_reported(
    log: str, text: str, role: str, start: str, add: str
) -> None:
    assume(log != text)
    message = f"{{'role': '{role}', 'content': {text}}}"
    source = HEADER + (
        "def ask(question):\n"
        f"    {start.format(log=log)}\n"
        f"    {text} = f'Sent at {{time.time()}}'\n"
        f"    {add.format(log=log, msg=message)}\n"
        f"    return client.chat.completions.create(model='m', messages={log})\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        assert rows(source, Path(folder)) == []


@settings(max_examples=40)
@given(log=names, text=names, role=st.sampled_from(["system", "developer"]))
def test_the_same_message_first_in_a_list_is_always_reported(
    log: str, text: str, role: str
) -> None:
    assume(log != text)
    source = HEADER + (
        "def ask(question):\n"
        f"    {text} = f'Sent at {{time.time()}}'\n"
        f"    {log} = [{{'role': '{role}', 'content': {text}}}]\n"
        f"    {log}.append({{'role': 'user', 'content': question}})\n"
        f"    return client.chat.completions.create(model='m', messages={log})\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        assert [code for code, _row in rows(source, Path(folder))] == ["PFX001"]
