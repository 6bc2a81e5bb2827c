"""SDK fixtures: cl100k_base offline (the trained tokenizer and the prompt files are in
tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixkit.sdk import TiktokenTokenizer

FIXTURES = Path(__file__).parent / "fixtures"
PROMPTS = FIXTURES / "prompts"


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")
