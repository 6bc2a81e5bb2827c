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


LOOP_MODULE = """\
import openai
from toolkit import registry

client = openai.OpenAI()
DEFAULT_TOOL = {{"type": "function", "function": {{"name": "search"}}}}


def respond(names, messages):
    tools = []
    for name in {iterable}:
{body}
    return client.chat.completions.create(model="m", messages=messages, tools=tools)
"""
# loop bodies appending what holds the item, each behind a call the analysis cannot see into
HOLDING_ITEM = [
    "        tools.append(registry.create(name))",
    "        tool = registry.create(name)\n        tools.append(tool)",
    "        if tool := registry.create(name):\n            tools.append(tool)",
    "        spec = registry.spec(name)\n        tool = registry.wrap(spec)\n"
    "        tools.insert(0, tool)",
    "        tools.extend(registry.expand(name))",
]


@pytest.mark.parametrize("body", HOLDING_ITEM)
def test_a_list_filled_in_a_loop_over_a_set_is_in_set_order(body: str, tmp_path: Path) -> None:
    source = LOOP_MODULE.format(iterable="set(names)", body=body)
    assert codes(source, tmp_path) == [("PFX004", 10)]  # the `for` line, at the set


@pytest.mark.parametrize("body", HOLDING_ITEM)
def test_a_list_filled_in_a_loop_over_a_sorted_set_is_in_no_set_order(
    body: str, tmp_path: Path
) -> None:
    source = LOOP_MODULE.format(iterable="sorted(set(names))", body=body)
    assert codes(source, tmp_path) == []


@pytest.mark.parametrize(
    "body",
    [
        "        tools.append(DEFAULT_TOOL)",
        # a keyword spelled like the item reads nothing of it
        '        tools.append(registry.create(name="search"))',
        # nor does an attribute of that name
        "        tools.append(registry.name)",
    ],
)
def test_a_value_appended_without_the_item_takes_no_order(body: str, tmp_path: Path) -> None:
    source = LOOP_MODULE.format(iterable="set(names)", body=body)
    assert codes(source, tmp_path) == []


def test_an_attribute_filled_in_a_loop_over_a_set_is_in_set_order(tmp_path: Path) -> None:
    source = """\
import openai
from toolkit import registry

client = openai.OpenAI()


class Agent:
    def __init__(self, names):
        self.names = names
        self._tools = []

    def register(self):
        for name in set(self.names):
            if tool := registry.create(name):
                self._tools.append(tool)

    def respond(self, messages):
        return client.chat.completions.create(model="m", messages=messages, tools=self._tools)
"""
    assert codes(source, tmp_path) == [("PFX004", 13)]
