"""A comprehension over a set takes the set's order, whatever its element makes of the item."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source

MODULE = """\
import openai
from toolspecs import ToolSpec

client = openai.OpenAI()


class Agent:
    def __init__(self):
        self.usable = set()
        self.specs = {{}}

    def respond(self, messages):
        def spec(name):
            return ToolSpec(name=name, strict=True)

        tools = {comprehension}
        return client.chat.completions.create(model="m", messages=messages, tools=tools)
"""
TOOLS_LINE = 16

# element shapes using the item `f`: the last two hide it behind a call the analysis
# cannot see into, or behind a local function that returns such a call
USING_ITEM = ["f", '{"name": f}', "self.specs[f]", "ToolSpec(name=f)", "spec(f)"]
COMPREHENSIONS = ["[{elt} for f in {it}]", "list({elt} for f in {it})"]


def codes(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    findings = lint_source(source, tmp_path / "agent.py", LintConfig(root=tmp_path))
    return [(f.code, f.start.row) for f in findings]


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(element=st.sampled_from(USING_ITEM), shape=st.sampled_from(COMPREHENSIONS))
def test_a_tool_list_built_over_a_set_is_in_set_order(
    element: str, shape: str, tmp_path: Path
) -> None:
    comprehension = shape.format(elt=element, it="self.usable")
    source = MODULE.format(comprehension=comprehension)
    assert codes(source, tmp_path) == [("PFX004", TOOLS_LINE)]


@pytest.mark.parametrize("shape", COMPREHENSIONS)
def test_a_sorted_set_gives_its_order_to_nothing(shape: str, tmp_path: Path) -> None:
    comprehension = shape.format(elt="spec(f)", it="sorted(self.usable)")
    assert codes(MODULE.format(comprehension=comprehension), tmp_path) == []


@pytest.mark.parametrize("shape", COMPREHENSIONS)
def test_an_element_that_ignores_the_item_takes_no_order(shape: str, tmp_path: Path) -> None:
    comprehension = shape.format(elt='ToolSpec(name="search")', it="self.usable")
    assert codes(MODULE.format(comprehension=comprehension), tmp_path) == []
