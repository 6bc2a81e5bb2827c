"""PFX101 volatile-placeholder-in-prompt."""

from __future__ import annotations

import re
from collections.abc import Iterator

from prefixkit.sdk.tokenizer import local_tiktoken

from ..catalog import is_identity_name, name_words
from ..context import PromptContext
from ..finding import Finding
from ..rule import PromptRule
from .pfx101_templates import Piece, is_jinja, names, scan

__all__ = ["VolatilePlaceholderInPrompt"]

# Fewer static tokens than one KV-cache block (vLLM's default size) after a placeholder:
# nothing shared is lost.
MIN_SHARED_TOKENS = 16
_TEST = re.compile(r"(?:el)?if\b")
# What an `{% if %}` tag only tests for presence (the date is set every day).
_PRESENCE_TESTED = frozenset({"the time", "the date", "a random id"})
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


def _reason(expression: str) -> tuple[str, str] | None:
    """What the placeholder fills in and how often it changes, or None when it is stable.

    The clock, the day and random ids by any word of the name; per-user data by
    the name's meaning: a person's identity (`user_id`, `customer.email`), or a
    field read off a user, session or request (`user.plan`,
    `pull_request.number`). A name ending in request content (`user_question`,
    `thread_context`) is the request itself, not who sent it.
    """
    for parts in names(expression):
        words = {word for part in parts for word in name_words(part)}
        if not words:
            continue
        if _TIME_WORDS & words:
            return "the time", "on every request"
        if _DAY_WORDS & words:
            return "the date", "every day"
        if _ID_WORDS & words:
            return "a random id", "on every request"
        last = name_words(parts[-1])
        if last and last[-1] in _CONTENT_WORDS:
            continue
        owners = {word for part in parts[:-1] for word in name_words(part)}
        if is_identity_name(parts) or _USER_WORDS & owners:
            return "per-user or per-request data", "for every user or request"
    return None


def _is_content(expression: str) -> bool:
    """Whether a placeholder fills in the request's own content (`{{ issue_context }}`)."""
    return any(
        _CONTENT_WORDS & set(name_words(part)) for parts in names(expression) for part in parts
    )


def _static_after(pieces: list[Piece], index: int, text: str) -> tuple[str, int]:
    """The static text rendered after piece `index` before the request's content (the part
    of the prompt a cache could still share), and the offset of its last visible character."""
    kept: list[str] = []
    last = pieces[index].end
    for piece in pieces[index + 1 :]:
        if piece.kind == "output" and _is_content(piece.expression):
            break
        if piece.kind == "text":
            chunk = text[piece.start : piece.end]
            kept.append(chunk)
            if chunk.strip():
                last = piece.start + len(chunk.rstrip())
    return "".join(kept), last


def _tokens(text: str) -> int:
    """Tokens of `text` with the SDK's offline cl100k_base tokenizer (about 4 characters
    a token where it cannot load), counted line by line."""
    tokenizer = local_tiktoken("cl100k_base")
    lines = text.splitlines(keepends=True)
    if tokenizer is None:
        return sum(-(-len(line) // 4) for line in lines)
    # line by line: text appended on a new line never lowers the count
    return sum(tokenizer.count(line) for line in lines)


class VolatilePlaceholderInPrompt(PromptRule):
    """A prompt file fills in a date, time, id or user data before static text.

    Prompt files (by default `prompts/**/*.{md,txt,j2,jinja}` and `*.prompt`) are
    read as the template they are: Jinja (`{{ ... }}`, `{% ... %}`), Mustache,
    Handlebars and Go templates (`{{ name }}`, `{{#section}}`, `{{ .Field }}`),
    `${name}` and `str.format` fields (`{name}`). In a YAML file (`prompts.yaml`,
    any `*.yaml` outside `.github/` by default) each string value that is a
    template (three lines or more holding a `{name}`, `{{ }}` or `{% %}`
    placeholder outside code, whatever its key) is read the same way, and its
    findings point at the value's line and column in the file; `${VAR}`
    interpolation, CI workflows and YAML files without templates are not read.
    Comments render nothing and are not read: `{# ... #}`, `{{! ... }}`,
    `{{/* ... */}}` and HTML comments `<!-- ... -->`.
    A placeholder counts when it names the clock (`now`, `date`,
    `timestamp`...), a random id (`uuid`, `nonce`) or a person's identity or a
    field of a user, session or request (`user_id`, `customer.email`,
    `pull_request.number`). Request content is not per-user data:
    `{{ user_question }}` is what the request asks.

    A placeholder is reported only where it breaks a cached prefix: when at
    least 16 tokens of static text (one KV-cache block at vLLM's default block
    size) follow it before the request's own content; the message
    says how many (with the SDK's offline `cl100k_base` tokenizer). A date that
    ends the file, or is followed only by the question being asked, costs
    nothing: no shared text follows it.

    Only a file's first such placeholder is reported: the prefix is broken
    from there on. Nothing is reported after a placeholder for the request's
    own content (`{{ issue_context }}`, `{{ review_comments }}`, `{question}`):
    the template is rendered per request from there on anyway. An
    `{% if date %}` tag only tests that the date is set; the `{{ date }}`
    inside it is the placeholder reported.

    ## Why it breaks caching
    Once rendered, the placeholder puts a value that changes per request (or
    per user) into text that is meant to be identical for everyone, so the
    static text after it is never served from cache.

    ## Example
    ```jinja
    You are the support agent for {{ product_name }}.
    Today is {{ current_date }}. The customer is {{ user.name }}.
    Follow the refund policy below and cite its section numbers.
    ...
    ```

    ## Use instead
    Keep the file constant and send the date and the user's name in the user
    message (or a `Segment.dynamic`):
    ```jinja
    You are the support agent for {{ product_name }}.
    Follow the refund policy below and cite its section numbers.
    ...
    ```
    """

    code = "PFX101"
    name = "volatile-placeholder-in-prompt"

    def check(self, context: PromptContext) -> Iterator[Finding]:
        """Report the first placeholder that names volatile or per-user data and is
        followed by static text, unless a placeholder for the request's content comes
        before it."""
        pieces = scan(context.text, is_jinja(context.text, context.filename))
        for index, piece in enumerate(pieces):
            if piece.kind not in ("output", "tag"):
                continue
            reason = _reason(piece.expression)
            if reason is None:
                if piece.kind == "output" and _is_content(piece.expression):
                    return
                continue
            what, period = reason
            if piece.kind == "tag" and _TEST.match(piece.expression) and what in _PRESENCE_TESTED:
                continue  # `{% if runtime_info.date %}` is true every day: the `{{ }}` changes
            static, last = _static_after(pieces, index, context.text)
            tokens = _tokens(static) if static.strip() else 0
            if tokens < MIN_SHARED_TOKENS:
                return  # nothing reusable follows it, nor any later placeholder
            kind = "tag" if piece.kind == "tag" else "placeholder"
            verb = "depends on" if kind == "tag" else "fills in"
            written = context.text[piece.start : piece.end]
            yield context.finding(
                self.code,
                piece.start,
                piece.end,
                f"{kind} `{written}` {verb} {what}, so the prompt changes {period} from here "
                f"and the {tokens} tokens of static text after it (to line "
                f"{context.position(last).row}) are not served from cache: keep the file "
                "constant and pass the value in the user message (or a dynamic segment)",
            )
            return
