"""A prompt template read as what it renders: static text, placeholders, tags and comments.

Two dialects, chosen per file:

- Jinja (a `.j2`/`.jinja`/`.jinja2` file, or one using `{% ... %}` or `{# ... #}`),
  read as jinja2's lexer reads it: `{{ ... }}` outputs, `{% ... %}` tags (a
  `{% raw %}` block is text), `{# ... #}` comments; string literals inside a
  delimiter may hold the closing delimiter. `{name}` and `${name}` are text there.
- Everything else: Mustache / Handlebars / Go templates (`{{ name }}`,
  `{{{ name }}}`, `{{& name}}`; `{{#section}}`, `{{^section}}`, `{{/section}}`,
  `{{> partial}}`, `{{ if .Date }}`...`{{ end }}` are tags; `{{! ... }}` and
  `{{/* ... */}}` comments), shell and GitHub expressions (`${name}`,
  `${{ expr }}`) and `str.format` fields (`{name}`, `{name!r:>10}`). A `{{`
  not opening an expression (`{{"a": 1}}`) is an escaped brace: text.

In both, an HTML comment (`<!-- ... -->`) documents the template: it is a comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Piece", "is_jinja", "names", "scan"]

PieceKind = Literal["text", "output", "tag", "comment"]

_JINJA_SUFFIXES = (".j2", ".jinja", ".jinja2")
_JINJA_MARKERS = re.compile(r"\{%[-+]?\s*[A-Za-z_]|(?<!\{)\{#")
_HTML_COMMENT = ("<!--", "-->")
_HTML_COMMENTS = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_QUOTE = re.compile("[\"']")
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_DOTTED = re.compile(r"(?<![\w.])[.$]?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_FORMAT_FIELD = re.compile(r"\{([A-Za-z_][\w.]*)(?:![rsa])?(?::[^{}]*)?\}(?!\})")
_EXPRESSION_START = re.compile(r"[-~]?\s*[A-Za-z_.$(]")
# Words that open a block in the generic dialect (Go templates, Handlebars without `#`).
_BLOCK_WORDS = frozenset(
    {"if", "else", "elif", "range", "with", "end", "each", "unless", "for", "block", "define"}
)
# Template keywords: never a name the template reads.
KEYWORDS = frozenset(
    {
        *_BLOCK_WORDS,
        "endif",
        "in",
        "endfor",
        "not",
        "and",
        "or",
        "is",
        "set",
        "endset",
        "endblock",
        "include",
        "import",
        "from",
        "as",
        "extends",
        "macro",
        "endmacro",
        "call",
        "endcall",
        "filter",
        "endfilter",
        "raw",
        "endraw",
        "template",
        "true",
        "false",
        "none",
        "True",
        "False",
        "None",
        "nil",
        "loop",
    }
)


@dataclass(frozen=True, slots=True)
class Piece:
    """A span of the template: `text` is rendered as written, `output` fills in
    `expression`, a `tag` controls what is rendered by it, a `comment` renders nothing."""

    kind: PieceKind
    start: int
    end: int
    expression: str = ""


def is_jinja(text: str, filename: str) -> bool:
    """Whether the file is a Jinja template (by its suffix, or by Jinja-only syntax)."""
    if filename.endswith(_JINJA_SUFFIXES):
        return True
    # what an HTML comment holds says nothing about the template's own syntax
    return _JINJA_MARKERS.search(_HTML_COMMENTS.sub("", text)) is not None


def scan(text: str, jinja: bool) -> list[Piece]:
    """The template's pieces in order; text pieces are merged where nothing separates them."""
    pieces: list[Piece] = []
    position = 0
    text_start = 0

    def emit(piece: Piece) -> None:
        nonlocal text_start
        if text_start < piece.start:
            pieces.append(Piece("text", text_start, piece.start))
        pieces.append(piece)
        text_start = piece.end

    step = _jinja_piece if jinja else _generic_piece
    while position < len(text):
        found = step(text, position)
        if found is None:
            break
        piece, resume = found
        if piece is not None:
            emit(piece)
        position = resume
    if text_start < len(text):
        pieces.append(Piece("text", text_start, len(text)))
    return pieces


def _closing(text: str, start: int, closer: str) -> int:
    """Where `closer` ends after `start`, skipping string literals (the text's end if never)."""
    close = text.find(closer, start)
    position = start
    while close >= 0:
        quote = _QUOTE.search(text, position, close)
        if quote is None:
            return close + len(closer)
        literal = _STRING.match(text, quote.start())
        position = literal.end() if literal else quote.start() + 1
        if position > close:  # the closer was inside the string
            close = text.find(closer, position)
    return len(text)


def _inner(text: str, start: int, end: int, opener: int, closer: int) -> str:
    """The expression between delimiters, without Jinja's whitespace-control marks."""
    return text[start + opener : end - closer].strip().strip("-+~").strip()


def _next(text: str, position: int, openers: tuple[str, ...]) -> tuple[int, str] | None:
    """The first of `openers` at or after `position` (the longest at the same place)."""
    best: tuple[int, str] | None = None
    for opener in openers:
        at = text.find(opener, position)
        if at >= 0 and (
            best is None or at < best[0] or (at == best[0] and len(opener) > len(best[1]))
        ):
            best = (at, opener)
    return best


def _comment(text: str, at: int, closer: str, opener_length: int = 0) -> tuple[Piece, int]:
    """The comment opened at `at`, to its `closer` (searched from `opener_length` after
    `at`) or to the end of `text`."""
    end = text.find(closer, at + opener_length)
    end = len(text) if end < 0 else end + len(closer)
    return Piece("comment", at, end), end


def _jinja_piece(text: str, position: int) -> tuple[Piece | None, int] | None:
    found = _next(text, position, ("{{", "{%", "{#", _HTML_COMMENT[0]))
    if found is None:
        return None
    at, opener = found
    if opener == _HTML_COMMENT[0]:
        return _comment(text, at, _HTML_COMMENT[1])
    if opener == "{#":
        return _comment(text, at, "#}", 2)
    closer = "}}" if opener == "{{" else "%}"
    end = _closing(text, at + 2, closer)
    expression = _inner(text, at, end, 2, 2)
    if opener == "{{":
        return Piece("output", at, end, expression), end
    if re.fullmatch(r"raw", expression):
        # the block's body is text up to {% endraw %}
        endraw = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}").search(text, end)
        resume = len(text) if endraw is None else endraw.start()
        tag = Piece("tag", at, end, expression)
        return tag, max(resume, end)
    return Piece("tag", at, end, expression), end


def _generic_piece(text: str, position: int) -> tuple[Piece | None, int] | None:
    found = _next(text, position, ("{{{", "{{", "${{", "${", "{", _HTML_COMMENT[0]))
    if found is None:
        return None
    at, opener = found
    if opener == _HTML_COMMENT[0]:
        return _comment(text, at, _HTML_COMMENT[1])
    if opener == "{{{":
        end = _closing(text, at + 3, "}}}")
        return Piece("output", at, end, _inner(text, at, end, 3, 3)), end
    if opener in ("{{", "${{"):
        inside = at + len(opener)
        body = text[inside:].lstrip(" \t-~")
        if body.startswith("!") or body.startswith("/*"):
            return _comment(text, at, "*/}}" if body.startswith("/*") else "}}", len(opener))
        if body[:1] in ("#", "^", "/", ">"):
            end = _closing(text, inside, "}}")
            expression = _inner(text, at, end, len(opener), 2)
            # a closing `{{/x}}` or a partial renders no value of its own
            expression = "" if body[:1] in ("/", ">") else expression.lstrip("#^").strip()
            return Piece("tag", at, end, expression), end
        if body.startswith("&"):
            end = _closing(text, inside, "}}")
            return Piece("output", at, end, _inner(text, at, end, len(opener), 2)[1:]), end
        if _EXPRESSION_START.match(text, inside) is None:
            return None, at + 2  # an escaped brace (`{{"a": 1}}` in a format string)
        end = _closing(text, inside, "}}")
        expression = _inner(text, at, end, len(opener), 2)
        first = expression.split(maxsplit=1)[0] if expression.split() else ""
        kind: PieceKind = "tag" if first in _BLOCK_WORDS else "output"
        return Piece(kind, at, end, expression), end
    if opener == "${":
        end = text.find("}", at + 2)
        if end < 0 or "{" in text[at + 2 : end] or not text[at + 2 : end].strip():
            return None, at + 2
        return Piece("output", at, end + 1, text[at + 2 : end].strip()), end + 1
    field = _FORMAT_FIELD.match(text, at)
    if field is None or (at > 0 and text[at - 1] in "{$"):
        return None, at + 1
    return Piece("output", at, field.end(), field.group(1)), field.end()


def names(expression: str) -> list[list[str]]:
    """The dotted names an expression reads, each as parts.

    String literals, keywords, filters (`| date`), tests (`is defined`) and
    keyword-argument names (`default=`) are left out; a Go template's leading
    dot (`.CurrentDate`) is dropped.
    """
    code = _STRING.sub('""', expression)
    found: list[list[str]] = []
    for match in _DOTTED.finditer(code):
        before = code[: match.start()].rstrip()
        after = code[match.end() :].lstrip()
        if before.endswith("|") or re.search(r"\bis(?:\s+not)?$", before):
            continue  # a filter or a test, not a value
        if after.startswith("=") and not after.startswith("=="):
            continue  # a keyword argument's name
        parts = match.group(0).lstrip(".$").split(".")
        if parts and parts[0] and parts[0] not in KEYWORDS:
            found.append(parts)
    return found
