"""Counters in a system prompt: an attribute a method counts on every call (`self.step += 1`)
changes on every request that method sends, whatever the attribute and the method are
called; one counted only in the constructor, or one given a value that is not a count, is
not a counter. The length of a list a method grows on every call (`len(self.steps)`) is
a counter too. A loop's `range(n)` is a count, not the request's data.
"""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_source
from prefixkit.linter.catalog import is_identity_name

IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"self", "client"}
        and not name.startswith("__")
        and not is_identity_name([name])
    )
)
GUIDE = "Explain each tool call first; never guess a URL; say DONE when the goal is met. " * 6

AGENT = """\
import anthropic


class Agent:
    def __init__(self):
        self.client = anthropic.Anthropic()
        self.{count} = 0
        self.messages = []

    def {method}(self, text):
        self.{count} {operator} {step}
        self.messages.append({{"role": "user", "content": text}})
        return self.client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=f"You are on turn {{self.{count}}}. {guide}",
            messages=self.messages,
        )
"""


def findings(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "agent.py"
    return [(f.code, f.start.row) for f in lint_source(source, path, LintConfig(root=tmp_path))]


@settings(max_examples=25, deadline=None)
@given(
    names=st.lists(IDENTIFIERS, min_size=2, max_size=2, unique=True),
    operator=st.sampled_from(["+=", "-="]),
    step=st.sampled_from(["1", "2", "0.5"]),
)
def test_an_attribute_counted_on_every_call_is_reported_under_any_names(
    names: list[str], operator: str, step: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    count, method = names
    source = AGENT.format(count=count, method=method, operator=operator, step=step, guide=GUIDE)
    assert findings(source, tmp_path_factory.mktemp("p")) == [("PFX001", 16)]


def test_the_message_names_the_method_that_counts(tmp_path: Path) -> None:
    source = AGENT.format(count="turn", method="send", operator="+=", step="1", guide=GUIDE)
    (finding,) = lint_source(source, tmp_path / "agent.py", LintConfig(root=tmp_path))
    assert finding.message.startswith("`self.turn`, which `send` counts on every call,")


def test_an_attribute_counted_in_the_constructor_only_is_fixed(tmp_path: Path) -> None:
    source = AGENT.format(count="turn", method="send", operator="=", step="self.turn", guide=GUIDE)
    source = source.replace(
        "        self.turn = 0\n", "        self.turn = 0\n        self.turn += 1\n"
    )
    assert findings(source, tmp_path) == []


def test_an_attribute_given_a_value_that_is_not_a_count_is_not_a_counter(
    tmp_path: Path,
) -> None:
    source = AGENT.format(count="turn", method="send", operator="+=", step="'!'", guide=GUIDE)
    assert findings(source, tmp_path) == []


def test_a_loop_s_range_is_a_count_not_request_data(tmp_path: Path) -> None:
    source = f"""\
import anthropic

client = anthropic.Anthropic()


def run(goal, max_steps):
    history = [{{"role": "user", "content": goal}}]
    for step in range(max_steps):
        system = f"Step {{step}} of {{max_steps}}. {GUIDE}"
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, system=system, messages=history
        )
        history.append({{"role": "assistant", "content": reply.content}})
    return history
"""
    assert findings(source, tmp_path) == [("PFX001", 9)]


def test_a_builtin_s_count_of_request_data_is_not_request_data(tmp_path: Path) -> None:
    source = f"""\
import anthropic

client = anthropic.Anthropic()


def answer(question):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=f"The question has {{len(question)}} characters. {GUIDE}",
        messages=[{{"role": "user", "content": question}}],
    )
"""
    assert findings(source, tmp_path) == []


GROWN = """\
import anthropic


class Agent:
    def __init__(self):
        self.client = anthropic.Anthropic()
        self.{grown} = []

    def {method}(self, text):
        self.{grown}.{grows}(text)
        depth = "#" * len(self.{grown})
        return self.client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=f"Report heading: {{depth}}. {guide}",
            messages=[{{"role": "user", "content": text}}],
        )
"""


@settings(max_examples=20, deadline=None)
@given(
    names=st.lists(IDENTIFIERS, min_size=2, max_size=2, unique=True),
    grows=st.sampled_from(["append", "extend"]),
)
def test_the_length_of_a_list_grown_on_every_call_is_a_counter_under_any_names(
    names: list[str], grows: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    grown, method = names
    source = GROWN.format(grown=grown, method=method, grows=grows, guide=GUIDE)
    assert findings(source, tmp_path_factory.mktemp("p")) == [("PFX001", 11)]


def test_the_length_of_a_list_grown_in_the_constructor_only_is_fixed(tmp_path: Path) -> None:
    source = GROWN.format(grown="steps", method="send", grows="append", guide=GUIDE)
    source = source.replace("        self.steps.append(text)\n", "")
    source = source.replace(
        "        self.steps = []\n", "        self.steps = []\n        self.steps.append(1)\n"
    )
    assert findings(source, tmp_path) == []
