"""docs/testing.md: the MockProvider example runs as written and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "testing.md"
LONG_INSTRUCTIONS = "Answer billing questions from the price list, citing the invoice id. " * 120


def test_the_mock_provider_example_passes_as_documented() -> None:
    section = DOC.read_text(encoding="utf-8").split("## A mock of the provider APIs")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/testing.md lost its MockProvider example"
    namespace: dict[str, object] = {"LONG_INSTRUCTIONS": LONG_INSTRUCTIONS}
    exec(compile(code.group(1), str(DOC), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        assert callable(test)
        test()
