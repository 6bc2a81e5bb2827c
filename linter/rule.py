"""The shape of a rule: a code, a docstring, examples, and a `check` method.

One rule per file in `prefixkit.linter.rules`. The class docstring is the
rule's documentation (first line: summary; then sections "Why it breaks
caching", "Example", "Use instead", rendered by `prefixkit.linter.docs`).
`VALID` and `INVALID` hold examples that the test suite runs through the real
linter: every `Valid` must stay silent for the rule, every `Invalid` must be
reported (at `line`, when given), and an `Invalid` with `expected_fix` marks
the rule as fixable and is checked byte for byte after `--fix`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .finding import Finding

if TYPE_CHECKING:
    from .context import LintContext, PromptContext

__all__ = ["Invalid", "PromptRule", "PythonRule", "Rule", "Valid"]


@dataclass(frozen=True)
class Valid:
    """Code (or prompt text) the rule must not report."""

    code: str
    path: str = "example.py"
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Invalid:
    """Code (or prompt text) the rule must report; `line` is the expected row."""

    code: str
    line: int | None = None
    expected_fix: str | None = None
    path: str = "example.py"
    files: Mapping[str, str] = field(default_factory=dict)


class Rule:
    """Base of all rules: identity, documentation and examples."""

    code: ClassVar[str]
    name: ClassVar[str]
    # "safe": `--fix` applies the rule's fixes (some may still be unsafe, case by case);
    # "unsafe": only `--unsafe-fixes` does (they may change what a correct program sends).
    fix_applicability: ClassVar[str] = "safe"
    VALID: ClassVar[tuple[Valid, ...]] = ()
    INVALID: ClassVar[tuple[Invalid, ...]] = ()

    @classmethod
    def summary(cls) -> str:
        """The first line of the docstring."""
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def fixable(cls) -> bool:
        """Whether the rule offers fixes (some `Invalid` has `expected_fix`); see `fix_applicability`."""
        return any(example.expected_fix is not None for example in cls.INVALID)


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
