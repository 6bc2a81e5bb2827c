"""Prompt templates kept as string values of YAML (and JSON) files are read as prompt
files: PFX101 reports them as it reports a `.prompt` file, at their place in the file."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.linter import Finding, LintConfig, lint_source
from prefixkit.linter.discovery import is_prompt_file
from prefixkit.linter.finding import Position
from prefixkit.linter.lint_file import lint_file
from prefixkit.linter.prompt_values import Placement

ROOT = Path("/prefixkit-yaml-project")  # never written: lint_source reads the text given
CONFIG = LintConfig(root=ROOT, select=("PFX101",))
GUIDANCE = (
    "Follow these rules carefully and always cite your sources with their URLs.\n"
    "Never invent results; when unsure, say so and explain what you would check.\n"
)


def lint(text: str, name: str = "prompts.yaml", config: LintConfig = CONFIG) -> list[Finding]:
    return lint_source(textwrap.dedent(text), ROOT / name, config)


def places(findings: list[Finding]) -> list[tuple[int, int, int, int]]:
    return [(f.start.row, f.start.column, f.end.row, f.end.column) for f in findings]


def test_a_placeholder_in_a_literal_block_is_reported_at_its_line_and_column() -> None:
    findings = lint(
        """\
        system: |
          You are a research agent.
          Time left: {remaining_time}.
          Follow these rules carefully and always cite your sources with their URLs.
          Never invent results; when unsure, say so and explain what you would check.
        """
    )
    assert places(findings) == [(3, 14, 3, 30)]
    assert "(to line 5)" in findings[0].message


def test_a_placeholder_in_a_folded_block_is_reported_at_its_line_and_column() -> None:
    findings = lint(
        """\
        agent:
          system: >-
            You are an assistant.
            Today is {{ today }}.
            Follow these rules carefully and always cite your sources with their URLs.
            Never invent results; when unsure, say so and explain what you would check.
        """
    )
    assert places(findings) == [(4, 14, 4, 25)]


def test_a_double_quoted_value_is_placed_through_its_escapes() -> None:
    findings = lint(
        'system: "You are \\"Ada\\".\\n  Caf\\u00e9 hours: {current_date}.\\n'
        + GUIDANCE.replace("\n", "\\n")
        + '"\n'
    )
    assert places(findings) == [(1, 47, 1, 61)]


def test_a_single_quoted_multi_line_value_is_placed_through_doubled_quotes() -> None:
    findings = lint(
        """\
        system: 'You are the user''s agent.
          It is {timestamp} now.

          Follow these rules carefully and always cite your sources with their URLs.
          Never invent results; when unsure, say so and explain what you would check.'
        """
    )
    assert places(findings) == [(2, 9, 2, 20)]


def test_every_template_of_nested_mappings_and_lists_is_read() -> None:
    findings = lint(
        """\
        agents:
          - name: planner
            prompts:
              system: |
                You plan the work. Today is {{ now }}.
                Follow these rules carefully and always cite your sources with their URLs.
                Never invent results; when unsure, say so and explain what you would check.
          - name: coder
            prompts:
              - |
                You write the code for user {user_id}.
                Follow these rules carefully and always cite your sources with their URLs.
                Never invent results; when unsure, say so and explain what you would check.
        """
    )
    assert places(findings) == [(5, 37, 5, 46), (11, 37, 11, 46)]


def test_a_placeholder_followed_by_the_requests_content_is_not_reported() -> None:
    findings = lint(
        """\
        user: |
          Today is {date}.
          {question}
          Follow these rules carefully and always cite your sources with their URLs.
        """
    )
    assert findings == []


def test_a_one_or_two_line_string_is_not_a_prompt() -> None:
    findings = lint(
        f"greeting: 'Today is {{date}}. {GUIDANCE.replace(chr(10), ' ')}'\n"
        f"short: |\n  Today is {{date}}.\n  {GUIDANCE.splitlines()[0]}\n"
    )
    assert findings == []


def test_env_and_ci_interpolation_is_not_a_template_placeholder() -> None:
    findings = lint(
        """\
        services:
          worker:
            command: |
              echo "started at ${START_DATE} by ${{ github.actor }} (${USER_ID})"
              ./run --date ${TODAY} --retries 3 --verbose --output /data/results
              ./report --since ${{ github.event.head_commit.timestamp }} --all --format json
        """,
        name="deploy/docker-compose.yml",
    )
    assert findings == []


def test_templates_shown_as_code_in_documentation_are_not_prompts() -> None:
    findings = lint(
        """\
        features:
          - |
            Templates can add the date with `{% now 'UTC' %}` and the user with ``{{ user_id }}``.
            ```python
            builder = PromptBuilder(template="Today is {{ current_date }}. Answer the question.")
            ```
            The example below shows a hook::

                system = f"You are a research assistant. The current time is {now}."
                state.set("messages", [system])

            .. code-block:: python

                ChatMessage.from_system(f"It is {timestamp}. Is this answer complete?")

            Follow these rules carefully and always cite your sources with their URLs.
        """,
        name="releasenotes/notes/add-date.yaml",
    )
    assert findings == []


def test_ci_workflows_are_not_prompt_files() -> None:
    config = LintConfig(root=ROOT)
    assert not is_prompt_file(".github/workflows/release.yml", config)
    assert not is_prompt_file("service/.github/actions/setup/action.yaml", config)
    assert is_prompt_file("agent/prompts_v2.yaml", config)
    assert is_prompt_file(".github/prompts/review.prompt.md", config)


def test_a_negated_prompt_glob_takes_paths_out() -> None:
    config = LintConfig(root=ROOT, prompt_globs=("**/*.yaml", "!deploy/**"))
    assert is_prompt_file("agent/prompts.yaml", config)
    assert not is_prompt_file("deploy/values.yaml", config)


def test_yaml_files_are_not_read_when_the_prompt_globs_leave_them_out() -> None:
    config = LintConfig(root=ROOT, select=("PFX101",), prompt_globs=("**/*.prompt",))
    text = f"system: |\n  Today is {{date}}.\n  {GUIDANCE.replace(chr(10), chr(10) + '  ')}"
    assert lint(text, config=config) == []
    assert len(lint(text)) == 1


def test_a_json_file_matched_by_the_prompt_globs_is_read_the_same_way() -> None:
    config = LintConfig(root=ROOT, select=("PFX101",), prompt_globs=("**/*.json",))
    text = json.dumps({"system": f"You are an agent.\nToday is {{date}}.\n{GUIDANCE}"})
    findings = lint(text, name="prompts.json", config=config)
    assert places(findings) == [(1, 41, 1, 47)]


def test_a_noqa_comment_on_the_yaml_line_suppresses_the_finding() -> None:
    findings = lint(
        """\
        system: |
          Time left: {remaining_time}.  # noqa: PFX101
          Follow these rules carefully and always cite your sources with their URLs.
          Never invent results; when unsure, say so and explain what you would check.
        """
    )
    assert findings == []


def test_a_yaml_file_that_does_not_parse_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("{{- if .Values.enabled }}\nkey: [unclosed {date}\n", encoding="utf-8")
    outcome = lint_file(path, LintConfig(root=tmp_path))
    assert (outcome.findings, outcome.error, outcome.skipped) == ([], None, None)


def test_a_value_whose_characters_cannot_be_followed_is_placed_at_its_start() -> None:
    placement = Placement("key: written\n", "other", 5, 12, None)
    assert placement.offsets == (5,) * 6
    assert placement.position(3) == Position(1, 6)


LINE = st.text(alphabet="abcdefghij klmnop,.;", min_size=1, max_size=60).map(
    lambda line: "x" + line
)
PLACEHOLDER = st.sampled_from(
    ["{current_date}", "{{ now }}", "{user_id}", "{question}", "{tone}", "{{ user.name }}"]
)


@st.composite
def templates(draw: st.DrawFn) -> str:
    """Three or more lines of static text, some holding a placeholder."""
    lines = []
    for _ in range(draw(st.integers(3, 8))):
        line = draw(LINE)
        if draw(st.booleans()):
            cut = draw(st.integers(0, len(line)))
            line = line[:cut] + draw(PLACEHOLDER) + line[cut:]
        lines.append(line)
    return "\n".join(lines) + "\n"


def _as_prompt_file(template: str) -> list[Finding]:
    return lint_source(template, ROOT / "system.prompt", CONFIG)


def _offset(text: str, row: int, column: int) -> int:
    return sum(len(line) + 1 for line in text.split("\n")[: row - 1]) + column - 1


@given(templates(), st.integers(1, 6))
def test_a_literal_block_gives_the_prompt_files_findings_indented(
    template: str, indent: int
) -> None:
    pad = " " * indent
    block = "system: |\n" + "".join(pad + line + "\n" for line in template.splitlines())
    expected = [
        (
            f.start.row + 1,
            f.start.column + indent,
            f.end.row + 1,
            f.end.column + indent,
            re.sub(r"to line (\d+)", lambda m: f"to line {int(m[1]) + 1}", f.message),
        )
        for f in _as_prompt_file(template)
    ]
    found = lint_source(block, ROOT / "prompts.yaml", CONFIG)
    assert [(*place, f.message) for place, f in zip(places(found), found, strict=True)] == expected


@given(templates())
def test_a_double_quoted_value_gives_the_prompt_files_findings_on_its_line(template: str) -> None:
    opening = "system: "

    def column(row: int, col: int) -> int:
        written = json.dumps(template[: _offset(template, row, col)])
        return len(opening) + len(written)  # the opening quote, and not the closing one

    expected = [
        (
            1,
            column(f.start.row, f.start.column),
            1,
            column(f.end.row, f.end.column),
            re.sub(r"to line \d+", "to line 1", f.message),
        )
        for f in _as_prompt_file(template)
    ]
    found = lint_source(opening + json.dumps(template) + "\n", ROOT / "prompts.yaml", CONFIG)
    assert [(*place, f.message) for place, f in zip(places(found), found, strict=True)] == expected
