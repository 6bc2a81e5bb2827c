"""No fix that `--fix` applies changes the bytes a correct program sends.

Each program below builds a request and prints, as JSON in argument order,
what it would send (a stand-in client prints `json.dumps(kwargs)`). It runs
in a real interpreter under several `PYTHONHASHSEED` values, which is what
varies between processes in production:

- a correct program sends the same bytes under every seed; after `--fix`
  (safe fixes only) it must still send exactly those bytes (a fix may apply
  or not, but it must not change what goes out);
- a broken program sends different bytes under different seeds; after the
  fix its rule offers (with `--unsafe-fixes` where that fix is unsafe) it
  sends the same bytes under every seed;
- an unsafe fix is never applied by plain `--fix`.

Every fixable rule appears here (a test checks that), so a new fixable
rule needs programs of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from prefixkit.linter import LintConfig, lint_source
from prefixkit.linter.lint_file import lint_file
from prefixkit.linter.rule import Rule
from prefixkit.linter.rules import ALL_RULES

from tests.linter.test_fixtures import copy_fixture, fixtures

SEEDS = range(4)

CLIENT = """import json


class _Messages:
    def create(self, **kwargs):
        print(json.dumps(kwargs))


class _Client:
    messages = _Messages()


client = _Client()
"""


@dataclass(frozen=True)
class Program:
    """A request-building program for `rule`; `body` defines `ask(client, q)`."""

    rule: str
    name: str
    body: str

    @property
    def source(self) -> str:
        return f"{CLIENT}\n{self.body}\nask(client, 'hi')\n"


CORRECT = (
    # PFX004: a set of ints iterates in the same order in every process
    Program(
        "PFX004",
        "int-set",
        "IDS = {8, 1, 3}\n"
        "SYSTEM = 'Allowed ids: ' + ', '.join(str(i) for i in IDS)\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n",
    ),
    # PFX004: already sorted, and a set used only for membership
    Program(
        "PFX004",
        "sorted-set",
        "TOOLS = {'search', 'fetch', 'summarise', 'translate'}\n"
        "BLOCKED = {'fetch'}\n"
        "SYSTEM = 'Tools: ' + ', '.join(sorted(TOOLS))\n"
        "def ask(client, q):\n"
        "    tools = [{'name': n} for n in sorted(TOOLS) if n not in BLOCKED]\n"
        "    return client.messages.create(system=SYSTEM, tools=tools, messages=[q])\n",
    ),
    # PFX004: a list deduplicated through dict.fromkeys keeps its order
    Program(
        "PFX004",
        "dedup-list",
        "NAMES = ['search', 'fetch', 'search', 'translate']\n"
        "def ask(client, q):\n"
        "    tools = [{'name': n} for n in dict.fromkeys(NAMES)]\n"
        "    return client.messages.create(tools=tools, messages=[q])\n",
    ),
    # PFX003: a literal schema whose field order is deliberate (reasoning first)
    Program(
        "PFX003",
        "literal-schema",
        "import json\n"
        "SCHEMA = {'type': 'object', 'properties': {'reasoning': {'type': 'string'},\n"
        "          'answer': {'type': 'string'}}, 'required': ['reasoning', 'answer']}\n"
        "SYSTEM = 'Reply with JSON for this schema:\\n' + json.dumps(SCHEMA, indent=2)\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n",
    ),
    # PFX003: a dict built in a fixed order from a list, and a merge of constants
    Program(
        "PFX003",
        "ordered-dicts",
        "import json\n"
        "FIELDS = ['query', 'limit', 'offset']\n"
        "BASE = {'tone': 'formal'}\n"
        "EXTRA = {'length': 'short'}\n"
        "def ask(client, q):\n"
        "    properties = {name: {'type': 'string'} for name in FIELDS}\n"
        "    policy = json.dumps({**BASE, **EXTRA})\n"
        "    tools = [{'name': 'lookup', 'description': json.dumps(properties)}]\n"
        "    return client.messages.create(system=policy, tools=tools, messages=[q])\n",
    ),
)

BROKEN = (
    # PFX004: tool names from a set of strings
    Program(
        "PFX004",
        "str-set-tools",
        "ENABLED = {'search', 'fetch', 'summarise', 'translate', 'weather'}\n"
        "def ask(client, q):\n"
        "    tools = [{'name': name} for name in ENABLED]\n"
        "    return client.messages.create(tools=tools, messages=[q])\n",
    ),
    # PFX004: a set joined into the system prompt
    Program(
        "PFX004",
        "str-set-join",
        "LANGS = {'en', 'de', 'fr', 'es', 'it'}\n"
        "SYSTEM = 'Answer in one of: ' + ', '.join(LANGS)\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n",
    ),
    # PFX003: a dict keyed by a set of strings, serialised into the system prompt
    Program(
        "PFX003",
        "set-keyed-dict",
        "import json\n"
        "TOOLS = {'search', 'fetch', 'summarise', 'translate', 'weather'}\n"
        "ARGS = {name: {'type': 'string'} for name in TOOLS}\n"
        "SYSTEM = 'Arguments:\\n' + json.dumps(ARGS)\n"
        "def ask(client, q):\n"
        "    return client.messages.create(system=SYSTEM, messages=[q])\n",
    ),
)

# A set of objects that do not compare: `sorted` would raise TypeError, so a
# fix that wraps it in `sorted(...)` must not be applied by plain `--fix`.
UNORDERABLE = Program(
    "PFX004",
    "dataclass-set",
    "from dataclasses import dataclass\n"
    "@dataclass(frozen=True)\n"
    "class Tool:\n"
    "    name: str\n"
    "TOOLS = {Tool('search'), Tool('fetch'), Tool('summarise'), Tool('translate')}\n"
    "def ask(client, q):\n"
    "    tools = [{'name': tool.name} for tool in TOOLS]\n"
    "    return client.messages.create(tools=tools, messages=[q])\n",
)


def _sent(path: Path) -> list[str]:
    """What the program at `path` prints under each seed (a failed run fails the test)."""
    outputs = []
    for seed in SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run(
            [sys.executable, "-I", "-S", str(path)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
        assert run.returncode == 0, f"{path.name} failed under seed {seed}:\n{run.stderr}"
        outputs.append(run.stdout)
    return outputs


def _write(tmp_path: Path, program: Program) -> tuple[Path, LintConfig]:
    path = tmp_path / f"{program.name.replace('-', '_')}.py"
    path.write_text(program.source, encoding="utf-8")
    return path, LintConfig(root=tmp_path, select=(program.rule,))


@pytest.mark.parametrize("program", CORRECT, ids=lambda p: f"{p.rule}-{p.name}")
def test_safe_fix_keeps_the_bytes_a_correct_program_sends(tmp_path: Path, program: Program) -> None:
    path, config = _write(tmp_path, program)
    before = _sent(path)
    assert len(set(before)) == 1, "the program is meant to be deterministic"
    lint_file(path, config, fix=True)
    assert _sent(path) == before


@pytest.mark.parametrize("program", BROKEN, ids=lambda p: f"{p.rule}-{p.name}")
def test_offered_fix_makes_a_broken_program_send_the_same_bytes_in_every_process(
    tmp_path: Path, program: Program
) -> None:
    path, config = _write(tmp_path, program)
    assert len(set(_sent(path))) > 1, "the program is meant to vary with PYTHONHASHSEED"
    outcome = lint_file(path, config, fix=True, unsafe_fixes=True)
    assert outcome.fixed >= 1
    assert outcome.findings == []
    assert len(set(_sent(path))) == 1


def test_plain_fix_leaves_unsafe_fixes_unapplied(tmp_path: Path) -> None:
    program = next(p for p in BROKEN if p.rule == "PFX003")
    path, config = _write(tmp_path, program)
    outcome = lint_file(path, config, fix=True)
    assert path.read_text(encoding="utf-8") == program.source
    assert outcome.fixed == 0
    assert [(f.code, f.fix and f.fix.applicability) for f in outcome.findings] == [
        ("PFX003", "unsafe")
    ]


def test_plain_fix_does_not_sort_a_set_whose_elements_do_not_compare(tmp_path: Path) -> None:
    path, config = _write(tmp_path, UNORDERABLE)
    _sent(path)  # it runs (in a varying order) before the fix
    lint_file(path, config, fix=True)
    _sent(path)  # and still runs after it


@pytest.mark.parametrize(
    "rule", [rule for rule in ALL_RULES if rule.fixable()], ids=lambda rule: rule.code
)
def test_fixes_offered_keep_the_promise_of_the_rule_docs(tmp_path: Path, rule: type[Rule]) -> None:
    # "unsafe": the rule never offers a fix that plain --fix applies
    offered = set()
    invalid = [f for f in fixtures() if f.parent.name == rule.code and ".invalid" in f.name]
    for number, fixture in enumerate(invalid):
        root = tmp_path / str(number)
        root.mkdir()
        for path in copy_fixture(fixture, root):
            text = path.read_text(encoding="utf-8")
            findings = lint_source(text, path, LintConfig(root=root, select=(rule.code,)))
            offered |= {f.fix.applicability for f in findings if f.fix is not None}
    allowed = {"safe", "unsafe"} if rule.fix_applicability == "safe" else {"unsafe"}
    assert offered and offered <= allowed


def test_every_fixable_rule_has_fix_safety_programs() -> None:
    fixable = {rule.code for rule in ALL_RULES if rule.fixable()}
    assert fixable == {p.rule for p in CORRECT} == {p.rule for p in BROKEN}
