"""The shape of a rule: a code, a docstring, and a `check` method.

One rule per file in `prefixkit.linter.rules`. The class docstring is the
rule's documentation (first line: summary; then sections "Why it breaks
caching", "Example", "Use instead", rendered by `prefixkit.linter.docs`).
A rule module holds the rule's logic only: its example corpus (code it must
report, code it must leave alone, fixes byte for byte) is fixture files in
`tests/linter/fixtures/<CODE>/`, which every rule is run against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from .finding import Finding

if TYPE_CHECKING:
    from .context import LintContext, PromptContext

__all__ = ["PromptRule", "PythonRule", "Rule"]


class Rule:
    """Base of all rules: identity and documentation."""

    code: ClassVar[str]
    name: ClassVar[str]
    # None: the rule offers no fix; "safe": `--fix` applies the rule's fixes (some may
    # still be unsafe, case by case); "unsafe": only `--unsafe-fixes` does (they may
    # change what a correct program sends).
    fix_applicability: ClassVar[str | None] = None

    @classmethod
    def summary(cls) -> str:
        """The first line of the docstring."""
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def fixable(cls) -> bool:
        """Whether the rule offers fixes (see `fix_applicability`)."""
        return cls.fix_applicability is not None


class PythonRule(Rule):
    """A rule over Python source; all Python rules share one `LintContext` per file."""

    def check(self, context: LintContext) -> Iterator[Finding]:
        """Yield this rule's findings for one module."""
        raise NotImplementedError


class PromptRule(Rule):
    """A rule over a prompt file (text matched by the prompt globs)."""

    def check(self, context: PromptContext) -> Iterator[Finding]:
        """Yield this rule's findings for one prompt file."""
        raise NotImplementedError
