"""SDK fixtures: cl100k_base offline and prompt files (the trained tokenizer is in tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prefixkit.sdk import TiktokenTokenizer

FIXTURES = Path(__file__).parent / "fixtures"
PROMPTS = FIXTURES / "prompts"


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


@pytest.fixture
def prompt_root(tmp_path: Path) -> Path:
    """A writable copy of the fixture prompt set: tmp/prompts (lock goes to tmp/prefixkit.lock)."""
    root = tmp_path / "prompts"
    shutil.copytree(PROMPTS, root)
    return root
