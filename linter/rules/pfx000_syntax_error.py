"""PFX000 syntax-error: a Python file that does not parse."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Finding
from ..rule import Invalid, PythonRule, Valid

__all__ = ["SyntaxErrorRule"]


class SyntaxErrorRule(PythonRule):
    """A Python file that cannot be parsed, so none of its prompts can be checked.

    ## Why it breaks caching
    Nothing in the file is analysed: cache breakers in it go unnoticed. The
    linter reports the parse error at its position and keeps linting the
    other files.

    ## Example
    ```python
    def build_system(:
        return SYSTEM_PROMPT
    ```

    ## Use instead
    ```python
    def build_system():
        return SYSTEM_PROMPT
    ```
    """

    code = "PFX000"
    name = "syntax-error"
    VALID = (
        Valid("def build_system():\n    return 'You are helpful.'\n"),
        # a notebook declaring Python 3.13: PEP 701 f-strings parse
        Valid(
            '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["row = {\\"k\\": \\"v\\"}\\n", "print(f\\"value: {row[\\"k\\"]}\\")"]}], "metadata": {"language_info": {"name": "python", "version": "3.13.2"}}, "nbformat": 4, "nbformat_minor": 5}',
            path="analysis.ipynb",
        ),
    )
    INVALID = (
        # the same cell in a notebook declaring Python 3.8
        Invalid(
            '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["row = {\\"k\\": \\"v\\"}\\n", "print(f\\"value: {row[\\"k\\"]}\\")"]}], "metadata": {"language_info": {"name": "python", "version": "3.8.10"}}, "nbformat": 4, "nbformat_minor": 5}',
            line=2,
            path="analysis.ipynb",
        ),
        Invalid("def build_system(:\n    return SYSTEM_PROMPT\n", line=1),
        Invalid("SYSTEM = 'ok'\nif True\n    pass\n", line=2),
    )

    def check(self, context: LintContext) -> Iterator[Finding]:
        """`lint_python` reports parse errors itself (a parsed module has none)."""
        return iter(())
