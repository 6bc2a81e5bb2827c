"""Taint analysis, catalog and suppression behaviour, including property tests."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.linter import Edit, LintConfig, Position, lint_paths, lint_source
from prefixkit.linter.catalog import is_identity_name, is_volatile_callable
from prefixkit.linter.context import LintContext
from prefixkit.linter.finding import apply_edits
from prefixkit.linter.globs import glob_matches


def codes(source: str, tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "module.py"
    findings = lint_source(source, path, LintConfig(root=tmp_path))
    return [(f.code, f.start.row) for f in findings]


@pytest.mark.parametrize(
    "name",
    ["user_id", "userId", "customer_email", "tenant.name", "request.id", "email", "username"],
)
def test_identity_names(name: str) -> None:
    assert is_identity_name(name.split("."))


@pytest.mark.parametrize(
    "name", ["tool_name", "model_name", "self.name", "request.headers", "version", "status"]
)
def test_not_identity_names(name: str) -> None:
    assert not is_identity_name(name.split("."))


_IDENTITY_EXAMPLES = ["user", "user_id", "customer_email", "tenant.name", "request.user.name"]


@given(st.sampled_from(_IDENTITY_EXAMPLES), st.sampled_from(["", "Role.", "settings.", "Kind."]))
def test_a_constant_named_like_identity_is_not_identity(name: str, owner: str) -> None:
    """`Role.USER`, `settings.DEFAULT_USER_ID`: constants are the same for every request."""
    parts = (owner + name).split(".")
    assert is_identity_name(name.split("."))
    assert not is_identity_name([*parts[:-1], parts[-1].upper()])


def test_an_enum_member_named_user_in_another_module_is_not_identity(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(
        "from enum import Enum\n\n\nclass Role(str, Enum):\n    USER = 'user'\n"
    )
    chat = package / "chat.py"
    chat.write_text(
        "import anthropic\n\nfrom app.base import Role\n\n"
        "RULES = 'Follow the rules. ' * 40\nclient = anthropic.Anthropic()\n\n\n"
        "def ask(question):\n"
        "    return client.messages.create(\n"
        "        model='m',\n        max_tokens=10,\n"
        "        system=f'You answer the {Role.USER} of this shop. ' + RULES,\n"
        "        messages=[{'role': 'user', 'content': question}],\n    )\n"
    )
    (outcome,) = lint_paths([chat], LintConfig(root=tmp_path))
    assert outcome.findings == []


def test_volatile_catalog_matches_prefix_entries_and_extras() -> None:
    assert is_volatile_callable("secrets.token_hex")
    assert is_volatile_callable("datetime.datetime.now")
    assert not is_volatile_callable("datetime.datetime.fromisoformat")
    assert is_volatile_callable("app.clock.now", frozenset({"app.clock.*"}))


def test_conditional_imports_count_every_qualified_name(tmp_path: Path) -> None:
    source = (
        "try:\n"
        "    from fastclock import stamp as now\n"
        "except ImportError:\n"
        "    from time import time as now\n"
        "SYSTEM = f'at {now()}. Answer from the manual.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
    )
    assert codes(source, tmp_path) == [("PFX001", 5)]


def test_module_constant_used_in_a_class_method(tmp_path: Path) -> None:
    source = (
        "import uuid\n"
        "RUN_ID = uuid.uuid4().hex\n"
        "class Bot:\n"
        "    def ask(self, client, q):\n"
        "        return client.messages.create(system='run ' + RUN_ID + '. Follow the rules.', messages=[q])\n"
    )
    assert codes(source, tmp_path) == [("PFX001", 2)]


def test_recursive_helpers_terminate(tmp_path: Path) -> None:
    source = (
        "def a(n):\n    return b(n - 1) if n else 'x'\n"
        "def b(n):\n    return a(n)\n"
        "def ask(client, q):\n    return client.messages.create(system=a(3), messages=[q])\n"
    )
    assert codes(source, tmp_path) == []


def test_self_referencing_assignment_terminates(tmp_path: Path) -> None:
    source = "s = 'a'\ns = s + s\ndef f(c):\n    return c.messages.create(system=s, messages=[])\n"
    assert codes(source, tmp_path) == []


def test_async_calls_are_followed(tmp_path: Path) -> None:
    source = (
        "import time\n"
        "async def stamp():\n    return str(time.time())\n"
        "async def ask(client, q):\n"
        "    return await client.messages.create(system=await stamp(), messages=[q])\n"
    )
    assert codes(source, tmp_path) == [("PFX001", 3)]


# --- property: volatile values are found exactly when present, whatever the plumbing ----
PIECES = st.sampled_from(["'You are helpful.'", "PRODUCT", "VERSION", "os.environ['REGION']"])
WRAPPERS = st.sampled_from(
    [
        "f'{{{0}}} and {{{1}}}'",
        "{0} + ' ' + {1}",
        "'{{}} {{}}'.format({0}, {1})",
        "'%s %s' % ({0}, {1})",
        "' '.join([{0}, {1}])",
        "helper({0}) + {1}",
    ]
)
PLACES = st.sampled_from(
    [
        "client.messages.create(system={value}, messages=[q])",
        "client.responses.create(instructions={value}, input=q)",
        "client.chat.completions.create(model='m', messages=[{{'role': 'system', 'content': {value}}}, *q])",
        "Segment.static({value})",
    ]
)
VOLATILE = st.sampled_from(["dt.now().isoformat()", "str(uuid4())", "str(time.time())"])


@settings(max_examples=60, deadline=None)
@given(
    first=PIECES,
    second=PIECES,
    wrapper=WRAPPERS,
    place=PLACES,
    volatile=st.one_of(st.none(), VOLATILE),
    via_variable=st.booleans(),
)
def test_volatile_value_reported_iff_present(
    tmp_path_factory: pytest.TempPathFactory,
    first: str,
    second: str,
    wrapper: str,
    place: str,
    volatile: str | None,
    via_variable: bool,
) -> None:
    if volatile is not None:
        second = volatile
    value = wrapper.format(first, second)
    lines = [
        "import os, time",
        "from datetime import datetime as dt",
        "from uuid import uuid4",
        "from prefixkit.sdk import Segment",
        "PRODUCT = 'Acme'",
        "VERSION = '1.2'",
        "def helper(text):",
        "    return text.strip()",
        "def build(client, q):",
    ]
    if via_variable:
        lines.append(f"    text = {value}")
        value = "text"
    lines.append("    return " + place.format(value=value))
    source = "\n".join(lines) + "\n"
    found = codes(source, tmp_path_factory.mktemp("p"))
    if volatile is None:
        assert found == [], source
    else:
        assert [code for code, _ in found] == ["PFX001"], source


@given(st.text(alphabet="ab\n", max_size=40))
def test_apply_edits_without_edits_is_identity(text: str) -> None:
    assert apply_edits(text, []) == text


@given(st.text(alphabet="abc\n", min_size=1, max_size=40), st.data())
def test_insertions_keep_the_rest_of_the_text(text: str, data: st.DataObject) -> None:
    lines = text.split("\n")
    row = data.draw(st.integers(1, len(lines)))
    column = data.draw(st.integers(1, len(lines[row - 1]) + 1))
    edited = apply_edits(text, [Edit(Position(row, column), Position(row, column), "XY")])
    assert edited.replace("XY", "", 1) == text


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("prompts/**/*.{md,txt,j2,jinja}", "prompts/a.md", True),
        ("prompts/**/*.{md,txt,j2,jinja}", "prompts/x/y/b.jinja", True),
        ("prompts/**/*.{md,txt,j2,jinja}", "prompts/a.py", False),
        ("prompts/**/*.{md,txt,j2,jinja}", "docs/prompts/a.md", False),
        ("*.md", "docs/readme.md", True),
        ("tests/**", "tests/linter/test_x.py", True),
    ],
)
def test_glob_matching(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(pattern, path) is expected


# --- calls between functions: one summary per function ---------------------------------------
def _context(source: str, tmp_path: Path) -> LintContext:
    return LintContext(cst.parse_module(source), str(tmp_path / "m.py"), LintConfig(root=tmp_path))


def test_calls_between_functions_cost_linear_time(tmp_path: Path) -> None:
    # each level calls the one below twice: following calls without summaries takes 2**40 steps
    lines = ["import time", "def f0():", "    return str(time.time())"]
    for level in range(1, 41):
        lines += [f"def f{level}():", f"    return f{level - 1}() + f{level - 1}()"]
    lines += [
        "def ask(client, q):",
        "    return client.messages.create(system=f40(), messages=[q])",
    ]
    assert codes("\n".join(lines) + "\n", tmp_path) == [("PFX001", 3)]


def test_a_helper_reports_only_the_call_that_passes_a_volatile_value(tmp_path: Path) -> None:
    source = (
        "import uuid\n"
        "def system(extra):\n"
        "    return 'You are terse. ' + extra\n"
        "def calm(client, q):\n"
        "    return client.messages.create(system=system('Be kind.'), messages=[q])\n"
        "def noisy(client, q):\n"
        "    return client.messages.create(system=system(str(uuid.uuid4())), messages=[q])\n"
    )
    assert codes(source, tmp_path) == [("PFX001", 7)]


def test_unpacked_names_take_their_own_item(tmp_path: Path) -> None:
    source = (
        "import time\n"
        "def pair():\n"
        "    return 'You are terse.', time.time()\n"
        "def ask(client, q):\n"
        "    text, started = pair()\n"
        "    return client.messages.create(system=text, messages=[q], metadata={'t': started})\n"
    )
    assert codes(source, tmp_path) == []


def test_a_dict_spreading_itself_terminates(tmp_path: Path) -> None:
    source = (
        "def ask(client, params, q):\n"
        "    params = {**params, 'system': 'Be brief.'}\n"
        "    params['cache_control'] = {'type': 'ephemeral'}\n"
        "    return client.messages.create(**params, messages=[q])\n"
    )
    assert codes(source, tmp_path) == []


# --- volatility periods ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "period"),
    [
        ("dt.now().isoformat()", "request"),
        ("f'{dt.now():%H:%M}'", "request"),
        ("str(uuid.uuid4())", "request"),
        ("str(date.today())", "day"),
        ("dt.now().strftime('%Y-%m-%d')", "day"),
        ("f'{dt.now():%A, %B %d}'", "day"),
        ("str(dt.now().date())", "day"),
        ("str(os.getpid())", "process"),
    ],
)
def test_volatile_values_carry_when_they_change(
    tmp_path: Path, expression: str, period: str
) -> None:
    source = (
        "import os, uuid\n"
        "from datetime import date, datetime as dt\n"
        "def ask(client, q):\n"
        f"    return client.messages.create(system={expression}, messages=[q])\n"
    )
    taints = _context(source, tmp_path).segment_taints
    assert [(t.kind, t.period) for _, t in taints] == [("volatile", period)]


def test_a_value_computed_at_import_changes_per_process(tmp_path: Path) -> None:
    source = (
        "from datetime import date\n"
        "SYSTEM = f'Today is {date.today()}. Answer from the manual.'\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n"
    )
    (finding,) = lint_source(source, tmp_path / "m.py", LintConfig(root=tmp_path))
    assert "computed once, when the module is loaded" in finding.message
    assert "every process start" in finding.message


def test_pfx001_names_a_daily_change_and_a_value_at_the_tail(tmp_path: Path) -> None:
    source = (
        "from datetime import date, datetime\n"
        "RULES = 'You answer SQL questions.'\n"
        "def daily(client, q):\n"
        "    return client.messages.create(system=f'{date.today()}: ' + RULES, messages=[q])\n"
        "def tail(client, q):\n"
        "    return client.messages.create(system=RULES + f' Now: {datetime.now()}', messages=[q])\n"
    )
    daily, tail = lint_source(source, tmp_path / "m.py", LintConfig(root=tmp_path))
    assert "changes once a day and reaches" in daily.message
    assert "changes on every request and ends" in tail.message
    assert "messages after it never are" in tail.message


def test_a_very_long_chain_of_assignments_is_cut_not_crashed_on(tmp_path: Path) -> None:
    lines = ["import time", "s0 = str(time.time())"]
    lines += [f"s{n} = s{n - 1} + 'x'" for n in range(1, 600)]
    lines += ["def ask(client, q):", "    return client.messages.create(system=s599, messages=[q])"]
    # beyond the depth the analysis follows, the clock is not seen: silence, not a RecursionError
    assert {code for code, _ in codes("\n".join(lines) + "\n", tmp_path)} <= {"PFX001"}
