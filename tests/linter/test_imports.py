"""Values followed through imports into the other modules of the linted project."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from prefixkit.cli.main import main
from prefixkit.linter import LintConfig, lint_paths
from prefixkit.linter.analysis.project_imports import MAX_DEPTH
from prefixkit.linter.result_cache import ResultCache

DATES = (
    "from datetime import datetime\n"
    "import time\n"
    "\n"
    "def get_today_str():\n"
    "    return datetime.now().strftime('%a %b %d, %Y')\n"
    "\n"
    "def stamp():\n"
    "    return str(time.time())\n"
    "\n"
    "def static_text():\n"
    "    return 'You are helpful.'\n"
    "\n"
    "def label(value, user):\n"
    "    return f'{value} for {user.email}'\n"
    "\n"
    "BOOTED = f'booted at {time.time()}'\n"
    "\n"
    "class Prompt:\n"
    "    @staticmethod\n"
    "    def system_prompt(name):\n"
    "        return f'You are {name}. It is {datetime.now()}.'\n"
    "\n"
    "    @classmethod\n"
    "    def dated(cls, name):\n"
    "        return f'{name} {get_today_str()}'\n"
)


def system_call(expression: str, imports: str) -> str:
    return (
        f"{imports}\n"
        "from langchain_core.messages import SystemMessage\n"
        "\n"
        "def messages(q):\n"
        f"    return [SystemMessage(content={expression}), q]\n"
    )


@pytest.fixture
def project(project: Path) -> Path:
    """A src/ layout: src/app/{__init__,dates}.py, the linted modules beside them."""
    package = project / "src" / "app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "dates.py").write_text(DATES, encoding="utf-8")
    return project


def write(project: Path, source: str, name: str = "main.py") -> Path:
    path = project / "src" / "app" / name
    path.write_text(source, encoding="utf-8")
    return path


def findings(capsys: pytest.CaptureFixture[str], *paths: str) -> list[dict[str, object]]:
    capsys.readouterr()
    main(["lint", *paths, "--no-cache", "--exit-zero", "--format", "json"])
    items: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return items


def rows(items: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(item["code"], item["location"]) for item in items]


@pytest.mark.parametrize(
    ("imports", "expression"),
    [
        ("from .dates import get_today_str", "f'Date: {get_today_str()}'"),
        ("from app.dates import get_today_str", "f'Date: {get_today_str()}'"),
        ("import app.dates as d", "f'Date: {d.get_today_str()}'"),
        ("from app import dates", "f'Date: {dates.get_today_str()}'"),
        ("import app.dates", "f'Date: {app.dates.get_today_str()}'"),
    ],
    ids=["relative", "absolute-src-layout", "module-alias", "from-package", "dotted"],
)
def test_each_import_form_reaches_the_function_in_the_other_module(
    project: Path, capsys: pytest.CaptureFixture[str], imports: str, expression: str
) -> None:
    write(project, system_call(expression, imports))
    (item,) = findings(capsys, "src/app/main.py")
    assert item["code"] == "PFX001"
    assert item["location"] == {"row": 5, "column": 44}
    message = str(item["message"])
    assert "get_today_str()` (src/app/dates.py:5) returns `datetime.datetime.now()`" in message
    assert "formatted to the day, which changes once a day" in message


def test_static_and_class_methods_are_followed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        project,
        system_call(
            "Prompt.system_prompt('Ada')\n        + Prompt.dated('Ada')",
            "from .dates import Prompt",
        ),
    )
    messages = [str(item["message"]) for item in findings(capsys, "src/app/main.py")]
    assert len(messages) == 2
    assert "`Prompt.system_prompt()` (src/app/dates.py:21)" in messages[0]
    assert "changes on every request" in messages[0]
    assert "`Prompt.dated()` (src/app/dates.py:5)" in messages[1]
    assert "changes once a day" in messages[1]


def test_a_constant_computed_at_import_of_the_other_module_changes_per_process(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project, system_call("BOOTED", "from .dates import BOOTED"))
    (item,) = findings(capsys, "src/app/main.py")
    assert item["location"] == {"row": 5, "column": 35}
    message = str(item["message"])
    assert "`BOOTED` (src/app/dates.py:16) holds `time.time()`" in message
    assert "computed once when src/app/dates.py is loaded" in message
    assert "every process start" in message


def test_an_imported_function_called_at_import_of_the_linted_module_changes_per_process(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        project,
        "from langchain_core.messages import SystemMessage\n"
        "from .dates import stamp\n"
        "SYSTEM = SystemMessage(content=f'Started {stamp()}. Answer from the manual.')\n",
    )
    (item,) = findings(capsys, "src/app/main.py")
    message = str(item["message"])
    assert message.startswith("`stamp()` (src/app/dates.py:8) returns `time.time()`, which is")
    assert "computed once, when the module is loaded" in message


BOOT = (
    "import functools, time\n"
    "def _stamp():\n"
    "    return str(time.time())\n"
    "BOOTED = _stamp()\n"
    "@functools.cache\n"
    "def started():\n"
    "    return str(time.time())\n"
)


def test_a_constant_of_the_other_module_made_by_a_call_at_its_import_changes_per_process(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "boot.py").write_text(BOOT, encoding="utf-8")
    write(
        project,
        system_call("f'Booted {BOOTED}. Follow the rules below.'", "from .boot import BOOTED"),
    )
    (item,) = findings(capsys, "src/app/main.py")
    message = str(item["message"])
    assert "`BOOTED` (src/app/boot.py:3) holds `time.time()`" in message
    assert "computed once when src/app/boot.py is loaded" in message
    assert "every process start" in message


def test_a_cached_function_of_the_other_module_changes_per_process(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "boot.py").write_text(BOOT, encoding="utf-8")
    write(
        project,
        system_call("f'Up {started()}. Follow the rules below.'", "from .boot import started"),
    )
    (item,) = findings(capsys, "src/app/main.py")
    message = str(item["message"])
    assert "`started()` (src/app/boot.py:7) returns `time.time()`" in message
    assert "computed once per process by a cached function there" in message
    assert "every process start" in message


CONFIG = (
    "from datetime import datetime\n"
    "class Config:\n"
    "    NAME = 'north'\n"
    "    STARTED = datetime.now()\n"
)


def test_a_class_attribute_of_the_other_module_changes_per_process(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "config.py").write_text(CONFIG, encoding="utf-8")
    source = system_call(
        "f'Up {Config.STARTED}. Follow the rules below.'", "from .config import Config"
    )
    write(project, source)
    (item,) = findings(capsys, "src/app/main.py")
    message = str(item["message"])
    assert "`Config.STARTED` (src/app/config.py:4) holds `datetime.datetime.now()`" in message
    assert "every process start" in message


def test_a_fixed_class_attribute_of_the_other_module_is_clean(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "config.py").write_text(CONFIG, encoding="utf-8")
    write(
        project,
        system_call("f'Shop {Config.NAME}. Follow the rules below.'", "from .config import Config"),
    )
    assert findings(capsys, "src/app/main.py") == []


def test_the_call_arguments_are_substituted_into_the_other_modules_function(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "render.py").write_text(
        "def render(value):\n    return f'You are terse. Now: {value}'\n", encoding="utf-8"
    )
    write(
        project,
        system_call("render(time.time())", "import time\nfrom .render import render"),
    )
    (item,) = findings(capsys, "src/app/main.py")
    assert item["location"] == {"row": 6, "column": 42}
    assert str(item["message"]).startswith("`time.time()` changes on every request")


def test_a_set_passed_to_the_other_modules_function_is_reported_where_it_is_built(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "render.py").write_text(
        "def tool_list(names):\n    return 'Tools: ' + ', '.join(names)\n", encoding="utf-8"
    )
    write(project, system_call("tool_list({'search', 'refund'})", "from .render import tool_list"))
    (item,) = findings(capsys, "src/app/main.py")
    assert item["code"] == "PFX004"
    assert item["location"] == {"row": 5, "column": 45}


def test_a_package_init_that_re_exports_a_function_is_followed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "__init__.py").write_text(
        "from .dates import stamp as build_stamp\n", encoding="utf-8"
    )
    write(project, system_call("build_stamp()", "from app import build_stamp"))
    (item,) = findings(capsys, "src/app/main.py")
    assert "`build_stamp()` (src/app/dates.py:8) returns `time.time()`" in str(item["message"])


def test_the_line_named_in_the_other_file_is_where_the_value_is_computed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "app" / "clock.py").write_text(
        "import functools, time\n"
        "A = 1; B = 2  # two statements on one line\n"
        "\n"
        "# a comment\n"
        "@functools.cache\n"
        "def started():\n"
        "    return (\n"
        "        time.time()\n"
        "    )\n",
        encoding="utf-8",
    )
    write(
        project, system_call("f'{started()} Answer from the manual.'", "from .clock import started")
    )
    (item,) = findings(capsys, "src/app/main.py")
    assert "`started()` (src/app/clock.py:8) returns `time.time()`" in str(item["message"])


def test_a_function_returning_fixed_text_is_not_reported(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project, system_call("static_text()", "from .dates import static_text"))
    assert findings(capsys, "src/app/main.py") == []


def test_identity_data_is_not_carried_across_modules(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the other module's own identity value, and one passed to it (PFX002 stays local)
    write(project, system_call("label('plan', q)", "from .dates import label"))
    write(project, system_call("label(q.user.email, None)", "from .dates import label"), "b.py")
    assert findings(capsys, "src/app/main.py", "src/app/b.py") == []


def test_installed_and_standard_library_modules_are_not_followed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # email.utils.formatdate() formats the current time, but it is not project code
    write(project, system_call("formatdate()", "from email.utils import formatdate"))
    assert findings(capsys, "src/app/main.py") == []


def test_a_module_outside_the_project_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "common"
    outside.mkdir()
    (outside / "clock.py").write_text("import time\ndef now():\n    return time.time()\n")
    inside = tmp_path / "service"
    inside.mkdir()
    (inside / ".git").mkdir()  # the repository ends here
    (inside / "main.py").write_text(
        system_call("f'{now()}'", "from common.clock import now"), encoding="utf-8"
    )
    (inside / "relative.py").write_text(
        system_call("f'{now()}'", "from ..shared.clock import now"), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert findings(capsys, "service") == []


def test_an_import_cycle_ends_and_a_long_chain_is_cut(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = project / "src" / "app"
    (package / "a.py").write_text(
        "from .b import ping\nimport time\ndef pong():\n    return ping()\n", encoding="utf-8"
    )
    (package / "b.py").write_text(
        "from .a import pong\ndef ping():\n    return pong()\n", encoding="utf-8"
    )
    chain = [f"link{i}" for i in range(MAX_DEPTH + 1)]
    (package / f"{chain[-1]}.py").write_text(
        "import time\ndef value():\n    return time.time()\n", encoding="utf-8"
    )
    for name, inner in itertools.pairwise(chain):
        (package / f"{name}.py").write_text(f"from .{inner} import value\n", encoding="utf-8")
    write(project, system_call("f'{pong()}'", "from .a import pong"), "cycle.py")
    write(project, system_call("f'{value()}'", f"from .{chain[1]} import value"), "near.py")
    write(project, system_call("f'{value()}'", f"from .{chain[0]} import value"), "far.py")
    items = findings(capsys, "src/app/cycle.py", "src/app/near.py", "src/app/far.py")
    assert [item["filename"] for item in items] == ["src/app/near.py"]


def test_changing_the_imported_module_lints_the_importing_file_again(project: Path) -> None:
    main_py = write(project, system_call("static_text()", "from .dates import static_text"))
    config = LintConfig(root=project)

    def run() -> list[tuple[bool, int]]:
        (outcome,) = lint_paths([main_py], config, cache=ResultCache.for_config)
        return [(outcome.cached, len(outcome.findings))]

    assert run() == [(False, 0)]
    assert run() == [(True, 0)]
    dates = project / "src" / "app" / "dates.py"
    dates.write_text(
        DATES.replace("return 'You are helpful.'", "return f'Now {time.time()}'"),
        encoding="utf-8",
    )
    assert run() == [(False, 1)]
    assert run() == [(True, 1)]


@pytest.mark.parametrize("first", ["time.time()", "uuid.uuid4()"])
def test_a_call_carrying_two_clocks_names_the_first_in_its_module(
    first: str, tmp_path: Path
) -> None:
    """The same finding, the same message, from run to run: of two values of the same
    kind and rate a call returns, the one computed first in its module is named."""
    second = "uuid.uuid4()" if first == "time.time()" else "time.time()"
    (tmp_path / "stamps.py").write_text(
        "import time\nimport uuid\n\n\ndef stamp():\n"
        f"    a = {first}\n    b = {second}\n    return f'{{a}} {{b}}'\n"
    )
    main_file = tmp_path / "main.py"
    main_file.write_text(
        "import anthropic\n\nfrom stamps import stamp\n\nclient = anthropic.Anthropic()\n"
        "RULES = 'Follow the rules. ' * 40\n\n\ndef ask(question):\n"
        "    return client.messages.create(\n        model='m',\n        max_tokens=10,\n"
        "        system=f'Request {stamp()}. ' + RULES,\n"
        "        messages=[{'role': 'user', 'content': question}],\n    )\n"
    )
    (outcome,) = lint_paths([main_file], LintConfig(root=tmp_path))
    (finding,) = outcome.findings
    assert "stamps.py:6" in finding.message
