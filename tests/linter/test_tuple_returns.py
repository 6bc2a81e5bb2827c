"""A function of the project that returns a tuple: each name the call is unpacked into takes
what the function returns at its own position, not the other items' values."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.linter import LintConfig, lint_paths, lint_source

from tests.linter.conftest import write

CLOCK = 'f"Started {time.time()}."'
FIXED = '"Plan the steps, then act on each one in turn."'

PREPARE = """\
import time


def prepare(question):
    return {items}
"""

RUN = """\
import time

import anthropic
{import_line}

client = anthropic.Anthropic()
{local}

def run(question):
    {targets} = prepare(question)
    return client.messages.create(
        model="m",
        max_tokens=5,
        system={chosen},
        messages=[{{"role": "user", "content": question}}],
    )
"""

CASES = st.integers(min_value=2, max_value=4).flatmap(
    lambda size: st.tuples(
        st.just(size), st.integers(0, size - 1), st.integers(0, size - 1), st.booleans()
    )
)
SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _codes(size: int, clock: int, chosen: int, imported: bool, root: Path) -> list[str]:
    items = ", ".join(CLOCK if position == clock else FIXED for position in range(size))
    targets = [f"part{position}" for position in range(size)]
    local = "" if imported else "\n" + PREPARE.format(items=items).split("\n", 2)[2]
    source = RUN.format(
        import_line="from app.prepare import prepare" if imported else "",
        local=local,
        targets=", ".join(targets),
        chosen=targets[chosen],
    )
    write(root / "app" / "__init__.py", "")
    write(root / "app" / "prepare.py", PREPARE.format(items=items))
    main = write(root / "app" / "main.py", source)
    (outcome,) = lint_paths([main], LintConfig(root=root))
    return [f.code for f in outcome.findings]


@SETTINGS
@given(case=CASES)
def test_only_the_item_holding_the_clock_carries_it(
    case: tuple[int, int, int, bool], tmp_path: Path
) -> None:
    size, clock, chosen, imported = case
    root = tmp_path / f"{size}-{clock}-{chosen}-{imported}"
    expected = ["PFX001"] if chosen == clock else []
    assert _codes(size, clock, chosen, imported, root) == expected


def test_what_is_given_to_one_item_does_not_reach_another(tmp_path: Path) -> None:
    # crewAI's task loop: the outputs list (holding what the loop appends) comes back
    # beside the tools; the tools given to `tools=` do not carry it
    source = """\
import time

import anthropic

client = anthropic.Anthropic()


def prepare(task, outputs):
    return task.tools, outputs


def run(tasks):
    outputs = []
    for task in tasks:
        tools, outputs = prepare(task, outputs)
        outputs.append(time.time())
        client.messages.create(model="m", max_tokens=5, tools=tools, messages=[])
"""
    findings = lint_source(source, tmp_path / "crew.py", LintConfig(root=tmp_path))
    assert [f.code for f in findings] == []
    swapped = source.replace("tools=tools", "tools=outputs")
    findings = lint_source(swapped, tmp_path / "crew.py", LintConfig(root=tmp_path))
    assert [f.code for f in findings] == ["PFX001"]


BUILT = """\
import time

import anthropic

client = anthropic.Anthropic()


def prepare(user_id):
    return tuple(part.strip() for part in ({first}, "Plan the steps, then act on each one."))


def run(user_id, question):
    {targets} = prepare(user_id)
    return client.messages.create(
        model="m",
        max_tokens=5,
        system={chosen},
        messages=[{{"role": "user", "content": question}}],
    )
"""


def _built(first: str, targets: str, chosen: str, root: Path) -> list[str]:
    source = BUILT.format(first=first, targets=targets, chosen=chosen)
    return [f.code for f in lint_source(source, root / "a.py", LintConfig(root=root))]


def test_unpacked_items_the_module_does_not_show_keep_what_changes_but_no_identity(
    tmp_path: Path,
) -> None:
    # `prepare` builds its tuple in a call: which item holds what is not known, so each
    # name keeps what changes per request but not an identity one item may hold
    user = 'f"You help user {user_id}."'
    assert _built(user, "whole", "whole", tmp_path) == ["PFX002", "PFX002"]
    assert _built(user, "intro, rules", "intro", tmp_path) == []
    assert _built(user, "intro, rules", "rules", tmp_path) == []
    clock = 'f"Started {time.time()}."'
    assert _built(clock, "intro, rules", "intro", tmp_path) == ["PFX001"]
    assert _built(clock, "intro, rules", "rules", tmp_path) == ["PFX001"]
