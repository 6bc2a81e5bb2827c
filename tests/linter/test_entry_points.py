"""Framework entry points and parameters followed back to their callers."""

from __future__ import annotations

from pathlib import Path

from prefixkit.linter import Finding, LintConfig, lint_source
from prefixkit.linter.catalog import PROMPT_ENTRY_POINTS, TRIGGER_WORDS, prompt_entry_point


def _lint(tmp_path: Path, code: str) -> list[Finding]:
    path = tmp_path / "example.py"
    path.write_text(code, encoding="utf-8")
    return lint_source(code, path, LintConfig(root=tmp_path, select=("PFX001",)))


def test_entry_point_is_matched_by_package_and_class_name() -> None:
    agno = next(entry for entry in PROMPT_ENTRY_POINTS if entry.framework == "agno")
    assert prompt_entry_point(frozenset({"agno.agent.Agent"})) == agno
    assert prompt_entry_point(frozenset({"agnostic.Agent"})) is None
    assert prompt_entry_point(frozenset({"agno.tools.Toolkit"})) is None


def test_a_module_importing_any_entry_point_package_is_analysed() -> None:
    # the linter skips modules without a trigger word; the import is always there
    for entry in PROMPT_ENTRY_POINTS:
        for package in entry.packages:
            assert any(word in f"from {package} import x" for word in TRIGGER_WORDS), package


def test_only_the_caller_passing_a_volatile_value_is_reported(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "def ask(client, system_prompt):\n"
        "    return client.responses.create(instructions=system_prompt, input=[])\n"
        "def fixed(client):\n"
        "    return ask(client, 'You help.')\n"
        "def stamped(client):\n"
        "    return ask(client, f'Started {time.time()}')\n"
    )
    assert [finding.start.row for finding in _lint(tmp_path, code)] == [7]


def test_a_parameter_is_followed_through_every_call_up(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "def ask(client, system):\n"
        "    return client.messages.create(system=system, messages=[])\n"
        "def one(client, text):\n"
        "    return ask(client, text)\n"
        "def two(client, text):\n"
        "    return one(client, text)\n"
        "def three(client, text):\n"
        "    return two(client, f'{time.time()} {text}')\n"
        "def four(client):\n"
        "    return three(client, str(time.monotonic()))\n"
    )
    findings = _lint(tmp_path, code)
    assert [(finding.start.row, finding.start.column) for finding in findings] == [
        (9, 27),
        (11, 30),
    ]


def test_agno_datetime_flag_message_says_where_agno_writes_the_time(tmp_path: Path) -> None:
    code = (
        "from agno.agent import Agent\n"
        "agent = Agent(add_datetime_to_context=True, expected_output='Two lines.')\n"
    )
    [finding] = _lint(tmp_path, code)
    assert finding.start.row == 2
    assert "additional_information" in finding.message
    assert "`add_datetime_to_context=`" in finding.message


def test_an_identity_parameter_is_reported_where_it_enters_not_again_at_callers(
    tmp_path: Path,
) -> None:
    code = (
        "def plan(client, user_name):\n"
        "    return client.messages.create(\n"
        "        system=f'You plan for {user_name}. Keep each step short.', messages=[])\n"
        "def research(client, user_name):\n"
        "    return plan(client, user_name)\n"
    )
    path = tmp_path / "example.py"
    path.write_text(code, encoding="utf-8")
    findings = lint_source(code, path, LintConfig(root=tmp_path, select=("PFX002",)))
    assert [finding.start.row for finding in findings] == [3]


def test_agno_datetime_flag_with_a_date_format_changes_once_a_day(tmp_path: Path) -> None:
    code = (
        "from agno.agent import Agent\n"
        "agent = Agent(add_datetime_to_context=True, datetime_format='%Y-%m-%d',\n"
        "              add_history_to_context=True)\n"
    )
    [finding] = _lint(tmp_path, code)
    assert "changes once a day" in finding.message
