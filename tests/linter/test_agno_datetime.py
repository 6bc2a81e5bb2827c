"""agno's `add_datetime_to_context=True`, reported by what agno writes after the time.

agno puts `The current time is ...` into its system message's <additional_information>,
after the description, role and instructions. The flag breaks caching only when the
agent or team, as configured at the call, puts reusable content after the time: tool
instructions, expected output, additional context, memories, knowledge, the history.
A value the linter cannot know counts as turning that content on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.linter import Finding, LintConfig, lint_source

HEADER = """\
from agno.agent import Agent
from agno.team import Team
from agno.tools.duckduckgo import DuckDuckGoTools
from settings import settings, knowledge_base


def lookup(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return city


"""


def flags(call: str, tmp_path: Path) -> list[Finding]:
    path = tmp_path / "agents.py"
    source = HEADER + f"agent = {call}\n"
    return lint_source(source, path, LintConfig(root=tmp_path, select=("PFX001",)))


ONE_SHOT = {
    "instructions only": "Agent(instructions='You answer.', add_datetime_to_context=True)",
    "agno 1.x spelling": "Agent(description='You answer.', add_datetime_to_instructions=True)",
    "a tool the module defines": (
        "Agent(instructions='You answer.', tools=[lookup], add_datetime_to_context=True)"
    ),
    "history turned off": (
        "Agent(add_history_to_context=False, tools=[], add_datetime_to_context=True)"
    ),
    "a team whose members come before the time": (
        "Team(members=[Agent(role='Searches.')], instructions='Route each question.',"
        " knowledge=knowledge_base, add_datetime_to_context=True)"
    ),
    "a system message of its own": (
        "Agent(system_message='You answer.', expected_output='Two lines.',"
        " add_datetime_to_context=True)"
    ),
    "no default system message": (
        "Agent(build_context=False, expected_output='Two lines.', add_datetime_to_context=True)"
    ),
}


@pytest.mark.parametrize("shape", sorted(ONE_SHOT))
def test_the_time_with_nothing_reusable_after_it_is_not_reported(
    shape: str, tmp_path: Path
) -> None:
    assert flags(ONE_SHOT[shape], tmp_path) == []


FOLLOWED = {
    "expected output": (
        "Agent(instructions='You answer.', expected_output='Two lines.',"
        " add_datetime_to_context=True)",
        "the expected output (`expected_output=`)",
    ),
    "a toolkit whose instructions the linter cannot see": (
        "Agent(tools=[DuckDuckGoTools()], add_datetime_to_context=True)",
        "the tool instructions (`tools=`)",
    ),
    "the history": (
        "Agent(add_history_to_context=True, add_datetime_to_context=True)",
        "the conversation history (`add_history_to_context=`)",
    ),
    "a history setting the linter cannot know": (
        "Agent(add_history_to_context=settings.history, add_datetime_to_context=True)",
        "the conversation history (`add_history_to_context=`)",
    ),
    "an agent's knowledge": (
        "Agent(knowledge=knowledge_base, add_datetime_to_context=True)",
        "the knowledge base's instructions (`knowledge=`)",
    ),
    "a team's additional context": (
        "Team(members=[], additional_context='Prices are in euros.', add_datetime_to_context=True)",
        "the additional context (`additional_context=`)",
    ),
}


@pytest.mark.parametrize("shape", sorted(FOLLOWED))
def test_the_time_before_reusable_content_is_reported_naming_it(shape: str, tmp_path: Path) -> None:
    call, following = FOLLOWED[shape]
    [finding] = flags(call, tmp_path)
    assert following in finding.message
