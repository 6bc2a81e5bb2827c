"""PFX101 volatile-placeholder-in-prompt."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..catalog import is_identity_name, name_words
from ..context import PromptContext
from ..finding import Finding
from ..rule import Invalid, PromptRule, Valid

__all__ = ["VolatilePlaceholderInPrompt"]

# {{ expr }}, {% tag %}, ${expr} and {identifier} (Python str.format style).
_PLACEHOLDER = re.compile(
    r"\{\{-?\s*(?P<jinja>.+?)\s*-?\}\}"
    r"|\{%-?\s*(?P<tag>.+?)\s*-?%\}"
    r"|\$\{\s*(?P<shell>[^{}]+?)\s*\}"
    r"|(?<![{$])\{(?P<format>[A-Za-z_][\w.]*)(?:![rsa])?(?::[^{}]*)?\}(?!\})"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")
# Words that name the clock to the second, and ones that name only the day.
_TIME_WORDS = frozenset({"now", "time", "timestamp", "datetime", "utcnow", "clock"})
_DAY_WORDS = frozenset({"today", "date", "weekday", "tomorrow", "yesterday"})
_ID_WORDS = frozenset({"uuid", "guid", "nonce", "random"})
_USER_WORDS = frozenset(
    {"user", "customer", "tenant", "session", "request", "account", "member", "patient"}
)
_KEYWORDS = frozenset(
    {
        "if",
        "else",
        "elif",
        "endif",
        "for",
        "in",
        "endfor",
        "not",
        "and",
        "or",
        "is",
        "set",
        "block",
        "endblock",
        "include",
        "extends",
        "macro",
        "endmacro",
        "raw",
        "endraw",
    }
)


def _reason(expression: str) -> tuple[str, str] | None:
    """What the placeholder fills in and how often it changes, or None when it is stable."""
    for dotted in _IDENTIFIER.findall(expression):
        parts = dotted.split(".")
        words = {word for part in parts for word in name_words(part)}
        if not words or parts[0] in _KEYWORDS:
            continue
        if _TIME_WORDS & words:
            return "the time", "on every request"
        if _DAY_WORDS & words:
            return "the date", "every day"
        if _ID_WORDS & words:
            return "a random id", "on every request"
        if is_identity_name(parts) or _USER_WORDS & words:
            return "per-user or per-request data", "for every user or request"
    return None


class VolatilePlaceholderInPrompt(PromptRule):
    """A static prompt file has a placeholder for a date, time, id or user data.

    Prompt files (by default `prompts/**/*.{md,txt,j2,jinja}`) are the static
    part of a prompt. Checked placeholders: `{{ ... }}`, `{% ... %}`,
    `${...}` and `{name}`; a placeholder counts when it names the clock
    (`now`, `date`, `timestamp`...), a random id (`uuid`, `nonce`) or a user,
    customer, tenant, session or request value. Placeholders for stable
    values (`{{ product_name }}`, `{tone}`) are fine.

    ## Why it breaks caching
    Once rendered, the placeholder puts a value that changes per request (or
    per user) into text that is meant to be identical for everyone, so the
    prefix after it is never served from cache.

    ## Example
    ```jinja
    You are the support agent for {{ product_name }}.
    Today is {{ current_date }}. The customer is {{ user.name }}.
    ```

    ## Use instead
    Keep the file constant and send the date and the user's name in the user
    message (or a `Segment.dynamic`):
    ```jinja
    You are the support agent for {{ product_name }}.
    ```
    """

    code = "PFX101"
    name = "volatile-placeholder-in-prompt"
    VALID = (
        Valid(
            "You are the support agent for {{ product_name }}.\nAnswer in a {tone} tone.\n",
            path="prompts/support.md",
        ),
        # JSON examples and code fences are not placeholders
        Valid(
            'Reply with JSON like {"user_id": 1, "date": "2024-01-01"}.\n'
            "```python\nprint(f'{x}')\n```\n",
            path="prompts/format.txt",
        ),
        # files outside the prompt globs are not prompt files
        Valid("Today is {{ now }}.\n", path="docs/notes.md"),
    )
    INVALID = (
        Invalid(
            "You are the support agent for {{ product_name }}.\nToday is {{ current_date }}.\n",
            line=2,
            path="prompts/support.md",
        ),
        Invalid("Hello {{ user.name }}, how can I help?\n", line=1, path="prompts/greet.j2"),
        Invalid("Trace: ${request_id}\n", line=1, path="prompts/trace.txt"),
        Invalid("Generated {timestamp:%Y-%m-%d}\n", line=1, path="prompts/sub/report.jinja"),
        # Go templates, in a prompts folder nested deeper in the project
        Invalid(
            "You are a research subagent.\nThe current date is {{.CurrentDate}}.\n",
            line=2,
            path="patterns/agents/prompts/research_subagent.md",
        ),
    )

    def check(self, context: PromptContext) -> Iterator[Finding]:
        """Report each placeholder that names volatile or per-user data."""
        for match in _PLACEHOLDER.finditer(context.text):
            expression = next(group for group in match.groups() if group is not None)
            reason = _reason(expression)
            if reason is None:
                continue
            what, period = reason
            yield context.finding(
                self.code,
                match.start(),
                match.end(),
                f"placeholder `{match.group(0)}` fills in {what}, so this static prompt and "
                f"everything cached after it change {period}: keep the file constant and pass "
                "the value in the user message (or a dynamic segment)",
            )
