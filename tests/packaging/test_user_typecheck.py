"""A user's program type-checks with `mypy --strict` against the installed prefixkit.

The programs live in a temporary folder outside the checkout, so mypy finds
prefixkit the way it finds any installed package (for the editable install:
the static path entry `make` adds next to setuptools' import-time finder).
The app adds `disallow-any-expr` to `--strict` (inline, for itself only, so
mypy's cache of the official clients stays valid), making an untyped request an error:
`messages.create(**kwargs)` accepts a `dict[str, Any]` silently, so only typed
renderer returns let mypy check the keyword arguments a user sends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# mypy --strict on a program outside the checkout, the official clients included
pytestmark = pytest.mark.slow

IMPORTS_ONLY = """\
from prefixkit.sdk import CacheStats


def hit_ratio(usage: dict[str, int]) -> float | None:
    return CacheStats.from_usage(usage).hit_ratio
"""

APP = '''\
# mypy: disallow-any-expr
"""A support bot on Anthropic and OpenAI, as a user writes it."""

import anthropic
import openai

from prefixkit.sdk import CacheStats, Prompt, Segment, render_anthropic, render_openai_chat

POLICY = "You answer billing questions for Example Cloud. " * 200


def prompt_for(question: str) -> Prompt:
    return Prompt(system=Segment.static(POLICY, name="policy"), messages=[Segment.dynamic(question)])


def ask_claude(client: anthropic.Anthropic, question: str) -> tuple[str, CacheStats]:
    kwargs = render_anthropic(prompt_for(question), model="claude-sonnet-4-5", max_tokens=512)
    message = client.messages.create(**kwargs)
    text = "".join(block.text for block in message.content if block.type == "text")
    return text, CacheStats.from_usage(message.usage, model="claude-sonnet-4-5")


def ask_gpt(client: openai.OpenAI, question: str) -> tuple[str, CacheStats | None]:
    completion = client.chat.completions.create(
        **render_openai_chat(prompt_for(question), model="gpt-5")
    )
    text = completion.choices[0].message.content or ""
    if completion.usage is None:
        return text, None
    return text, CacheStats.from_usage(completion.usage, model="gpt-5")


def main() -> None:
    answer, stats = ask_claude(anthropic.Anthropic(), "Why is my bill higher?")
    ratio: float | None = stats.hit_ratio
    print(answer, stats.summary(), ratio)
    reply, chat_stats = ask_gpt(openai.OpenAI(), "And in November?")
    print(reply, chat_stats.summary() if chat_stats is not None else "no usage")


if __name__ == "__main__":
    main()
'''


CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`mypy --strict` over both user programs, in one run; its report.

    mypy runs from the checkout, so it reuses the cache `make typecheck` (which
    `make test` runs first) left there: the official clients are analysed
    already and the check takes seconds instead of minutes. The programs stay
    outside the checkout, where nothing but the installed package provides
    prefixkit.
    """
    folder = tmp_path_factory.mktemp("user_program")
    programs = [folder / "imports_only.py", folder / "app.py"]
    for program, source in zip(programs, (IMPORTS_ONLY, APP), strict=True):
        program.write_text(source)
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [str(mypy), "--strict", *map(str, programs)],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    return result.stdout


def _errors_in(report: str, program: str) -> list[str]:
    return [line for line in report.splitlines() if Path(line.split(":")[0]).name == program]


def test_mypy_resolves_the_installed_prefixkit_sdk(mypy_report: str) -> None:
    assert _errors_in(mypy_report, "imports_only.py") == [], mypy_report


def test_a_program_sending_rendered_requests_through_the_official_clients_passes_mypy_strict(
    mypy_report: str,
) -> None:
    assert _errors_in(mypy_report, "app.py") == [], mypy_report
    assert "Success: no issues found in 2 source files" in mypy_report
