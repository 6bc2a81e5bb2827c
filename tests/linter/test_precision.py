"""Shapes found as false positives on real code: silent, next to a twin still reported."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.linter import Finding, LintConfig, lint_source
from prefixkit.linter.catalog import is_identity_name


def findings(source: str, tmp_path: Path, name: str = "module.py") -> list[Finding]:
    return lint_source(source, tmp_path / name, LintConfig(root=tmp_path))


def test_one_finding_per_line_and_rule_at_the_earliest_column(tmp_path: Path) -> None:
    source = (
        "def ask(client, user, q):\n"
        "    system = f'Host for {user.name} ({user}) and {user}.'\n"
        "    return client.messages.create(system=system, messages=[q])\n"
    )
    (finding,) = findings(source, tmp_path)
    assert (finding.code, finding.start.row, finding.start.column) == ("PFX002", 2, 26)
    assert "`user.name`" in finding.message


@pytest.mark.parametrize(
    "name",
    [
        "tenant.name",
        "user.display_name",
        "customer_name",
        "request.user.name",
        "member.name",
        "st.session_state.company_name",
    ],
)
def test_a_name_on_a_person_is_identity(name: str) -> None:
    assert is_identity_name(name.split("."))


@pytest.mark.parametrize(
    "name", ["mcp_client.name", "f.display_name", "user.mcp_client.name", "display_name"]
)
def test_a_name_on_a_thing_is_a_label(name: str) -> None:
    assert not is_identity_name(name.split("."))


# static text after a placeholder: what makes a volatile placeholder a cache breaker
POLICY = "Answer in English, cite the policy section you rely on, and never promise a refund or a delivery date yourself.\n"


def prompt_rows(text: str, tmp_path: Path) -> list[int]:
    return [f.start.row for f in findings(text, tmp_path, "prompts/system.j2")]


def test_a_date_tested_by_an_if_tag_is_reported_once_where_it_is_filled_in(
    tmp_path: Path,
) -> None:
    text = "You help.\n{% if runtime.date %}\nToday is {{ runtime.date }}.\n{% endif %}\n" + POLICY
    assert prompt_rows(text, tmp_path) == [3]


def test_only_the_first_varying_placeholder_of_a_prompt_file_is_reported(
    tmp_path: Path,
) -> None:
    text = "PR #{{ pull_request.number }}\nby {{ user.name }} on {{ today }}\n" + POLICY
    assert prompt_rows(text, tmp_path) == [1]


def test_a_placeholder_after_the_requests_own_content_is_not_reported(tmp_path: Path) -> None:
    assert (
        prompt_rows("Comments:\n{{ review_comments }}\nToday: {{ today }}\n" + POLICY, tmp_path)
        == []
    )
    assert prompt_rows(
        "Today: {{ today }}\n" + POLICY + "Comments:\n{{ review_comments }}\n", tmp_path
    ) == [1]


def test_a_random_pick_from_a_list_that_grows_at_runtime_is_reported(tmp_path: Path) -> None:
    source = (
        "import random\n"
        "def ask(client, q, extra):\n"
        "    styles = ['haiku', 'pirate']\n"
        "    styles.append(extra)\n"
        "    system = f'Answer as a {random.choice(styles)}.'\n"
        "    return client.messages.create(system=system, messages=[q])\n"
    )
    assert [(f.code, f.start.row) for f in findings(source, tmp_path)] == [("PFX001", 5)]


TAIL = (
    "import datetime\n"
    "from langchain_core.messages import SystemMessage\n"
    "def report(state):\n"
    "    note = SystemMessage(content=f'Checked at {datetime.datetime.now()}')\n"
    "    return {'messages': %s}\n"
)


@pytest.mark.parametrize(
    "shape", ["state['messages'] + [note]", "[*state['messages'], note]", "state.get('m') + [note]"]
)
def test_a_message_appended_after_the_history_is_the_tail(tmp_path: Path, shape: str) -> None:
    assert findings(TAIL % shape, tmp_path) == []


@pytest.mark.parametrize("shape", ["[note] + state['messages']", "[note]"])
def test_a_message_before_the_history_is_the_prefix(tmp_path: Path, shape: str) -> None:
    assert [f.code for f in findings(TAIL % shape, tmp_path)] == ["PFX001"]


def test_appending_to_a_list_the_function_starts_itself_is_the_prefix(tmp_path: Path) -> None:
    source = (
        "import datetime\n"
        "def ask(client, q, history):\n"
        "    history.append({'role': 'system', 'content': f'at {datetime.datetime.now()}'})\n"
        "    messages = [{'role': 'system', 'content': 'You help.'}]\n"
        "    messages.append({'role': 'system', 'content': f'Today {datetime.date.today()}'})\n"
        "    return client.chat.completions.create(model='m', messages=messages + history)\n"
    )
    assert [(f.code, f.start.row) for f in findings(source, tmp_path)] == [("PFX001", 5)]
