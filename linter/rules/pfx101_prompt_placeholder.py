"""PFX101 volatile-placeholder-in-prompt."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..catalog import is_identity_name, name_words
from ..context import PromptContext
from ..finding import Finding
from ..rule import PromptRule

__all__ = ["VolatilePlaceholderInPrompt"]

# {{ expr }}, {% tag %}, ${expr} and {identifier} (Python str.format style).
_PLACEHOLDER = re.compile(
    r"\{\{-?\s*(?P<jinja>.+?)\s*-?\}\}"
    r"|\{%-?\s*(?P<tag>.+?)\s*-?%\}"
    r"|\$\{\s*(?P<shell>[^{}]+?)\s*\}"
    r"|(?<![{$])\{(?P<format>[A-Za-z_][\w.]*)(?:![rsa])?(?::[^{}]*)?\}(?!\})"
)
_TEST = re.compile(r"(?:el)?if\b")
# What an `{% if %}` tag only tests for presence (the date is set every day).
_PRESENCE_TESTED = frozenset({"the time", "the date", "a random id"})
_IDENTIFIER = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")
# Words that name the clock to the second, and ones that name only the day.
_TIME_WORDS = frozenset({"now", "time", "timestamp", "datetime", "utcnow", "clock"})
_DAY_WORDS = frozenset({"today", "date", "weekday", "tomorrow", "yesterday"})
_ID_WORDS = frozenset({"uuid", "guid", "nonce", "random"})
_USER_WORDS = frozenset(
    {"user", "customer", "tenant", "session", "request", "account", "member", "patient"}
)
# Words naming the request's own content (its task, documents, conversation): a prompt
# holding one is rendered per request from that placeholder on.
_CONTENT_WORDS = frozenset(
    {
        "context",
        "content",
        "contents",
        "comment",
        "comments",
        "issue",
        "question",
        "query",
        "input",
        "task",
        "message",
        "messages",
        "history",
        "conversation",
        "transcript",
        "document",
        "documents",
        "text",
        "patch",
        "diff",
        "feedback",
        "observation",
        "result",
        "results",
        "review",
        "problem",
    }
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
    for parts in _names(expression):
        words = {word for part in parts for word in name_words(part)}
        if not words:
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


def _names(expression: str) -> list[list[str]]:
    """The dotted names a placeholder reads, each as parts (template keywords left out)."""
    names = [dotted.split(".") for dotted in _IDENTIFIER.findall(expression)]
    return [parts for parts in names if parts[0] not in _KEYWORDS]


def _is_content(expression: str) -> bool:
    """Whether a placeholder fills in the request's own content (`{{ issue_context }}`)."""
    return any(
        _CONTENT_WORDS & set(name_words(part)) for parts in _names(expression) for part in parts
    )


class VolatilePlaceholderInPrompt(PromptRule):
    """A static prompt file has a placeholder for a date, time, id or user data.

    Prompt files (by default `prompts/**/*.{md,txt,j2,jinja}`) are the static
    part of a prompt. Checked placeholders: `{{ ... }}`, `{% ... %}`,
    `${...}` and `{name}`; a placeholder counts when it names the clock
    (`now`, `date`, `timestamp`...), a random id (`uuid`, `nonce`) or a user,
    customer, tenant, session or request value. Placeholders for stable
    values (`{{ product_name }}`, `{tone}`) are fine.

    Only a file's first such placeholder is reported: the prefix is broken
    from there on, so a later one (a second per-request field) breaks nothing
    new. Nothing is reported after a placeholder for the request's own
    content (`{{ issue_context }}`, `{{ review_comments }}`, `{question}`):
    the template is rendered per request from there on anyway. An
    `{% if date %}` tag only tests that the date is set; the `{{ date }}`
    inside it is the placeholder reported.

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

    def check(self, context: PromptContext) -> Iterator[Finding]:
        """Report the first placeholder that names volatile or per-user data, unless
        a placeholder for the request's content comes before it."""
        for match in _PLACEHOLDER.finditer(context.text):
            expression = next(group for group in match.groups() if group is not None)
            reason = _reason(expression)
            if reason is None:
                if _is_content(expression):
                    return
                continue
            what, period = reason
            kind = "tag" if match.group("tag") is not None else "placeholder"
            if kind == "tag" and _TEST.match(expression) and what in _PRESENCE_TESTED:
                continue  # `{% if runtime_info.date %}` is true every day: the `{{ }}` changes
            verb = "depends on" if kind == "tag" else "fills in"
            yield context.finding(
                self.code,
                match.start(),
                match.end(),
                f"{kind} `{match.group(0)}` {verb} {what}, so this static prompt and "
                f"everything cached after it change {period}: keep the file constant and pass "
                "the value in the user message (or a dynamic segment)",
            )
            return
