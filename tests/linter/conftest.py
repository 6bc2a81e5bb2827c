"""The project the linter's tests lint, and the sources they put in it."""

from __future__ import annotations

from pathlib import Path

import pytest

# A system prompt that holds the clock: one PFX001.
NOW_IN_SYSTEM = (
    "from datetime import datetime\n"
    "SYSTEM = f'Today is {datetime.now()}. Answer from the manual.'\n"
    "def ask(client, q):\n"
    "    return client.messages.create(system=SYSTEM, messages=[q])\n"
)
# A system prompt that holds the day and a set's order: a PFX001 and a PFX004 (fixable).
DAY_AND_SET_IN_SYSTEM = (
    "from datetime import datetime as dt\n"
    "TOOL_NAMES = {'search', 'refund'}\n"
    "SYSTEM = f'Today {dt.now():%Y-%m-%d}. Tools: {\", \".join(TOOL_NAMES)}'\n"
    "def ask(client, q):\n"
    "    return client.messages.create(system=SYSTEM, messages=[q])\n"
)


def write(path: Path, text: str) -> Path:
    """Write `text` to `path`, making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project without linter settings (a pyproject.toml with no `[tool.prefixkit.lint]`),
    which is the current folder."""
    write(tmp_path / "pyproject.toml", "[project]\nname = 'demo'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path
