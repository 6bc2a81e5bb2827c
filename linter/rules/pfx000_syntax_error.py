"""PFX000 syntax-error: a Python file that does not parse."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import LintContext
from ..finding import Finding
from ..rule import PythonRule

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

    def check(self, context: LintContext) -> Iterator[Finding]:
        """`lint_python` reports parse errors itself (a parsed module has none)."""
        return iter(())
