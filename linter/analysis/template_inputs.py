"""A prompt template's text, and the values given to it when it is rendered.

The template as what it renders (`scan`): two dialects, chosen per text.

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
PFX101 reads prompt files with it.

A render call (`TemplateInputs.rendering`): `TEXT.format(...)` /
`.format_map(mapping)`, `string.Template(TEXT).substitute(...)` /
`.safe_substitute(...)`, `jinja2.Template(TEXT).render(...)` (and an
environment's `from_string(TEXT)`), LangChain's `PromptTemplate(TEXT)` /
`.from_template(TEXT)` rendered with `.format(...)`, `.invoke({...})`,
`.format_messages(...)` or bound first with `.partial(...)` (a lambda bound
there is called at each render: its body is the value), and a chain whose
first step is the template (`(prompt | llm).invoke(...)`). A LangChain chat
template (`ChatPromptTemplate.from_messages([...])`) holding a system message
is read as its messages up to the closing user turns (`Template.chat`); a
call rendering it is a prompt of its own (`renders_chat`). The text is
known when the template resolves to one string constant (in place, through
names, module constants, joined with `+`). The values are bound to placeholders by keyword,
by position (`{}`, `{0}`), through `**mapping` and mapping arguments whose
keys the module shows (dict literals and `dict(...)`, `d["key"] = value`,
`d.update(...)`). Where both are known, only the values the text reads are
rendered (`rendered_values`) and the rendered text is laid out in order
(`rendered_pieces`) for `position`; otherwise every input may be rendered
anywhere (position unknown).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeGuard

import libcst as cst
import libcst.matchers as matchers

from ..dependencies import read_dependency
from .bindings import Env
from .documents import DocumentKind, document_text
from .shapes import ValueShapes
from .syntax import dotted_parts, string_value

__all__ = [
    "KEYWORDS",
    "UNBOUND",
    "Piece",
    "PieceKind",
    "Rendering",
    "Template",
    "TemplateInputs",
    "is_jinja",
    "names",
    "scan",
]

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


# --- render calls ---------------------------------------------------------------------

Dialect = Literal["format", "dollar", "jinja", "generic"]

# Methods rendering a template (or binding some of its placeholders first, `partial`).
RENDER_METHODS = frozenset({"format", "format_map", "substitute", "safe_substitute", "render"})
_PARTIAL = "partial"
# Methods that render only a template object (LangChain's), never any receiver.
_TEMPLATE_METHODS = frozenset(
    {"invoke", "ainvoke", "aformat", "format_messages", "aformat_messages", "format_prompt"}
)
# Methods whose first positional argument is the mapping of values.
_MAPPING_FIRST = frozenset(
    {"format_map", "substitute", "safe_substitute", "render", "invoke", "ainvoke"}
)
_DOLLAR = re.compile(r"\$(?:(\$)|([_A-Za-z][_A-Za-z0-9]*)|\{([_A-Za-z][_A-Za-z0-9]*)\})")
_MAX_DEPTH = 6
_MAX_FILE_BYTES = 256_000  # a prompt file larger than this is not read
_MAX_REPEATED_CHARS = 256_000  # a text repeated into more characters is not known
_MAX_PARENTS = 4  # folders above the module a relative prompt path is looked up in
_READ_METHODS = frozenset({"read_text", "read"})
# Calls that parse a YAML or JSON document from an open file or a text.
_DOCUMENT_LOADERS: dict[str, DocumentKind] = {
    "yaml.safe_load": "yaml",
    "yaml.load": "yaml",
    "yaml.full_load": "yaml",
    "yaml.unsafe_load": "yaml",
    "json.load": "json",
    "json.loads": "json",
}
_DOCUMENT_SOURCES = frozenset({"stream", "fp", "s"})  # the loaders' keywords for it
_CHAT_TEMPLATE = "ChatPromptTemplate"
# A chat template's message roles: its system messages are cached, a closing user turn
# is not reused, assistant turns are reused, and a placeholder is the history.
_CHAT_ROLES = {
    "system": "system",
    "developer": "system",
    "human": "user",
    "user": "user",
    "ai": "reused",
    "assistant": "reused",
    "placeholder": "history",
}
_CHAT_RENDER_METHODS = frozenset({"format", "partial"}) | _TEMPLATE_METHODS
_MESSAGE_CLASS_ROLES = (("System", "system"), ("Human", "user"), ("AI", "reused"))
# A placeholder the call binds no value to (rendered empty, or bound elsewhere).
UNBOUND = cst.Name("__unbound__")

PiecePart = str | cst.BaseExpression


@dataclass(frozen=True)
class Template:
    """A template whose text is known: its `dialect`, and the values a `.partial(...)`
    bound before it is rendered.

    `chat`: a chat template holding a system message (LangChain's
    `ChatPromptTemplate.from_messages`, or a `SystemMessagePromptTemplate` on its own);
    `text` is the system and assistant texts before
    its closing user turns, the part a later request can reuse. `history`: a
    conversation history (a placeholder) follows its system text; without one, the
    template is the whole conversation it renders, sent once."""

    text: str
    dialect: Dialect
    bound: tuple[tuple[str, cst.BaseExpression], ...] = ()
    chat: bool = False
    history: bool = False


@dataclass(frozen=True)
class Rendering:
    """A render call: the template (None when its text is not known), the value given
    for each placeholder name (positional ones as "0", "1", ...), and whether the
    call may give values the module does not show (`**mapping` of unknown keys)."""

    call: cst.Call
    template: Template | None
    inputs: dict[str, cst.BaseExpression]
    open: bool

    def values(self) -> dict[str, cst.BaseExpression]:
        """Every value given, a `.partial(...)`'s first, the call's own over them."""
        bound = dict(self.template.bound) if self.template is not None else {}
        return {**bound, **self.inputs}


def _format_fields(text: str) -> list[tuple[str, str | None]] | None:
    """`str.format` text as (literal, field root) pairs; None when it is not valid."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    found: list[tuple[str, str | None]] = []
    auto = 0
    for literal, field, _spec, _conversion in parsed:
        if field is None:
            found.append((literal, None))
            continue
        name = re.split(r"[.\[]", field, maxsplit=1)[0]
        if name == "":
            name, auto = str(auto), auto + 1
        found.append((literal, name))
    return found


def _layout(template: Template) -> list[str | tuple[str]] | None:
    """The template's text in order: fixed text as `str`, a placeholder as `(name,)`
    (its root name, positional ones as "0", "1", ...); None when it cannot be read."""
    text = template.text
    if template.dialect == "format":
        fields = _format_fields(text)
        if fields is None:
            return None
        out: list[str | tuple[str]] = []
        for literal, name in fields:
            out.append(literal)
            if name is not None:
                out.append((name,))
        return out
    if template.dialect == "dollar":
        out = []
        position = 0
        for match in _DOLLAR.finditer(text):
            out.append(text[position : match.start()])
            if match.group(1):
                out.append("$")
            else:
                out.append((match.group(2) or match.group(3),))
            position = match.end()
        out.append(text[position:])
        return out
    out = []
    for piece in scan(text, template.dialect == "jinja"):
        if piece.kind == "text":
            out.append(text[piece.start : piece.end])
        elif piece.kind == "output":
            roots = [parts[0] for parts in names(piece.expression)]
            out.append((roots[0],) if roots else "")
    return out


def placeholders(template: Template) -> frozenset[str]:
    """The names the template reads: its placeholders (and, in Jinja and the generic
    dialect, the names its tags test or loop over)."""
    if template.dialect in ("jinja", "generic"):
        return frozenset(
            parts[0]
            for piece in scan(template.text, template.dialect == "jinja")
            if piece.kind in ("output", "tag")
            for parts in names(piece.expression)
        )
    return frozenset(p[0] for p in _layout(template) or [] if isinstance(p, tuple))


def _last(names_: frozenset[str]) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in names_}


class TemplateInputs(ValueShapes):
    """Render calls over one module (see the module docstring)."""

    def rendering(self, call: cst.Call, env: Env) -> Rendering | None:
        """`call` read as a render call, or None when it renders no template."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method not in RENDER_METHODS and method not in _TEMPLATE_METHODS and method != _PARTIAL:
            return None
        template = self.template_of(func.value, env, 0)
        is_object = template is not None and self._object_template(func.value, env)
        if method in _TEMPLATE_METHODS and not is_object:
            return None  # `llm.invoke(messages)`: not a template
        if not is_object and method not in ("format", "format_map"):
            template = None  # a string has only `.format` and `.format_map`
        inputs: dict[str, cst.BaseExpression] = {}
        is_open = False
        position = 0
        for arg in call.args:
            if arg.star == "**":
                is_open |= not self._mapping(arg.value, env, inputs)
            elif arg.star == "*":
                is_open = True
            elif arg.keyword is not None:
                value = arg.value
                inputs[arg.keyword.value] = _partial_value(value) if method == _PARTIAL else value
            elif method in _MAPPING_FIRST and position == 0:
                is_open |= not self._mapping(arg.value, env, inputs)
                position += 1
            else:
                inputs[str(position)] = arg.value
                position += 1
        return Rendering(call, template, inputs, is_open)

    def renders_chat(self, call: cst.Call, env: Env) -> bool:
        """Whether `call` renders a chat template holding a system message, or binds its
        values (`.partial(...)`): what it is given reaches that system message."""
        return self._rendered_chat(call, env) is not None

    def renders_conversation(self, call: cst.Call, env: Env) -> bool:
        """Whether `call` renders a chat template that is the whole conversation (no
        history follows its system text: only the closing user turns)."""
        template = self._rendered_chat(call, env)
        return template is not None and not template.history

    def _rendered_chat(self, call: cst.Call, env: Env) -> Template | None:
        """The chat template holding a system message that `call` renders or binds."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _CHAT_RENDER_METHODS:
            return None
        found = self.rendering(call, env)
        if found is None or found.template is None or not found.template.chat:
            return None
        return found.template

    def rendered_values(
        self, call: cst.Call, env: Env
    ) -> tuple[list[cst.BaseExpression], bool] | None:
        """The values a render call may put into its text, and whether their places are
        known: the ones its placeholders read when the text and the inputs are known,
        else every argument (placed anywhere); None when `call` renders no template."""
        found = self.rendering(call, env)
        if found is None:
            return None
        if found.template is None or found.open or _layout(found.template) is None:
            return [arg.value for arg in call.args], False
        read = placeholders(found.template)
        return [value for name, value in found.values().items() if name in read], True

    def rendered_pieces(self, call: cst.Call, env: Env) -> list[PiecePart] | None:
        """The text a render call produces, in order: fixed text as `str`, each placeholder
        as the value bound to it (`UNBOUND` when none is); None when not known."""
        found = self.rendering(call, env)
        if found is None or found.template is None or found.open:
            return None
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == _PARTIAL
            and not found.template.chat
        ):
            return None  # a template, not text (a chat template's values are laid out)
        layout = _layout(found.template)
        if layout is None:
            return None
        values = found.values()
        return [part if isinstance(part, str) else values.get(part[0], UNBOUND) for part in layout]

    # the template -------------------------------------------------------------------
    def template_of(self, node: cst.BaseExpression, env: Env, depth: int) -> Template | None:
        """The template `node` evaluates to, when it is one and its text is known."""
        if depth > _MAX_DEPTH:
            return None
        values = self.resolve(node, env)
        if isinstance(node, cst.Name) and any(_rebinds(value, node) for value, _ in values):
            return self._rebound(node, values, depth)
        found: list[Template | None] = []
        for value, value_env in values:
            text = string_value(value)
            if text is not None:
                found.append(Template(text, "format"))
            elif isinstance(value, (cst.Subscript, cst.Name)) or _got(value) is not None:
                text = self._kept_text(value, value_env, depth)
                found.append(Template(text, "format") if text is not None else None)
            elif isinstance(value, cst.Call):
                read = self._file_text(value, value_env)
                if read is not None:
                    found.append(Template(read, "format"))
                else:
                    found.append(self._constructed(value, value_env, depth))
            elif isinstance(value, cst.BinaryOperation) and _piped(value):
                # `prompt | llm`: the chain's input is the template's
                found.append(self.template_of(value.left, value_env, depth + 1))
            elif isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
                # `template or DEFAULT_PROMPT`: the default, when the other side is a value
                # given from outside (a parameter) whose text is not known
                sides = [
                    self.template_of(side, value_env, depth + 1)
                    for side in (value.left, value.right)
                ]
                known = [template for template in sides if template is not None]
                found.append(known[0] if len(known) == 1 else None)
            elif isinstance(value, cst.Attribute) and self.attribute_values(value):
                # `self.template`: what the class assigns it
                for assigned in self.attribute_values(value):
                    found.append(self.template_of(assigned, Env(value_env.root), depth + 1))
            else:
                found.append(None)
        if len(found) != 1:
            return None
        return found[0]

    def _rebound(
        self, name: cst.Name, values: list[tuple[cst.BaseExpression, Env]], depth: int
    ) -> Template | None:
        """`prompt = prompt.partial(...)`: the template the name held first, with the values
        each such rebinding binds (the name read as after all of them)."""
        first = [(value, env) for value, env in values if not _rebinds(value, name)]
        if len(first) != 1:
            return None
        template = self.template_of(first[0][0], first[0][1], depth + 1)
        if template is None:
            return None
        for value, _env in values:
            if isinstance(value, cst.Call) and _rebinds(value, name):
                template = _partially_bound(template, value)
                if template is None:
                    return None
        return template

    def _constructed(self, call: cst.Call, env: Env, depth: int) -> Template | None:
        """The template a call builds: `string.Template(TEXT)`, `jinja2.Template(TEXT)`,
        `env.from_string(TEXT)`, `PromptTemplate(TEXT)`, `X.from_template(TEXT)`, or
        `template.partial(...)` (its values bound)."""
        func = call.func
        names_ = self.qualified_names(func)
        last = _last(names_) | {(dotted_parts(func) or [""])[-1]}
        if isinstance(func, cst.Attribute) and func.attr.value == _PARTIAL:
            inner = self.template_of(func.value, env, depth + 1)
            if inner is None or not self._object_template(func.value, env):
                return None
            return _partially_bound(inner, call)
        if isinstance(func, cst.Attribute) and func.attr.value == "get_template":
            return self._loaded(call, env)
        if any(name.endswith(_CHAT_TEMPLATE) for name in last) or (
            isinstance(func, cst.Attribute)
            and func.attr.value == "from_messages"
            and (dotted_parts(func.value) or [""])[-1].endswith(_CHAT_TEMPLATE)
        ):
            return self._chat(call, env)
        text_arg = self._argument(call, "template", 0)
        if text_arg is None:
            return None
        dialect: Dialect
        if "string.Template" in names_:
            dialect = "dollar"
        elif names_ & {"jinja2.Template", "jinja2.environment.Template"} or (
            isinstance(func, cst.Attribute) and func.attr.value == "from_string"
        ):
            dialect = "jinja"
        elif any(name.endswith("PromptTemplate") for name in last) or (
            isinstance(func, cst.Attribute)
            and func.attr.value == "from_template"
            and (dotted_parts(func.value) or [""])[-1].endswith("PromptTemplate")
        ):
            dialect = _langchain_dialect(call)
        else:
            return None
        text = self._text(text_arg, env)
        if text is None:
            return None
        # a system message's template (`SystemMessagePromptTemplate.from_template(...)`):
        # rendered, it is a system message on its own, what follows it not known here
        owner = (dotted_parts(func.value) or [""])[-1] if isinstance(func, cst.Attribute) else ""
        system = any(n.startswith("SystemMessage") for n in {*last, owner})
        return Template(text, dialect, chat=system)

    def _chat(self, call: cst.Call, env: Env) -> Template | None:
        """`ChatPromptTemplate.from_messages([...])` / `ChatPromptTemplate([...])`: the
        messages before the closing user turns, when one is a system message and every
        message's text is known."""
        messages = self._argument(call, "messages", 0)
        listings = self.resolve(messages, env) if messages is not None else []
        if len(listings) != 1:
            return None
        listing, listing_env = listings[0]
        if not isinstance(listing, (cst.List, cst.Tuple)):
            return None
        dialect = _langchain_dialect(call)
        kept: list[str] = []
        user_turns: list[str] = []  # kept only when a reused message follows them
        has_system = history = False
        for element in listing.elements:
            if isinstance(element, cst.StarredElement):
                return None
            message = self._chat_message(element.value, listing_env, dialect)
            if message is None:
                return None
            role, text = message
            if role == "user":
                user_turns.append(text)
                continue
            kept += user_turns
            user_turns = []
            if role == "history":
                history |= has_system
                continue
            kept.append(text)
            has_system |= role == "system"
        if not has_system:
            return None
        return Template("\n".join(kept), dialect, chat=True, history=history)

    def _chat_message(
        self, node: cst.BaseExpression, env: Env, dialect: Dialect
    ) -> tuple[str, str] | None:
        """A chat template's message as (role: system, user or reused, its template text):
        a `(role, text)` tuple, a bare string (a user turn), `MessagesPlaceholder(name)`
        (the history),
        `SystemMessagePromptTemplate.from_template(text)` and its human and AI kin, a
        `SystemMessage(content=text)` (fixed text); None when not known."""
        if isinstance(node, cst.Tuple) and len(node.elements) == 2:
            role = _CHAT_ROLES.get(string_value(node.elements[0].value) or "")
            text = self._text(node.elements[1].value, env)
            return (role, text) if role is not None and text is not None else None
        text = string_value(node)
        if text is not None:
            return "user", text
        if not isinstance(node, cst.Call):
            return None
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "from_template":
            kind = (dotted_parts(func.value) or [""])[-1]
            argument = self._argument(node, "template", 0)
            text = self._text(argument, env) if argument is not None else None
        else:
            kind = (dotted_parts(func) or [""])[-1]
            if kind == "MessagesPlaceholder":
                name = self._argument(node, "variable_name", 0)
                variable = string_value(name) if name is not None else None
                return ("history", variable) if variable is not None else None
            argument = self._argument(node, "content", 0)
            text = self._text(argument, env) if argument is not None else None
            if text is not None and dialect == "format":
                text = text.replace("{", "{{").replace("}", "}}")  # a message, not a template
            elif not kind.endswith("PromptTemplate"):
                text = None
        role = next((r for prefix, r in _MESSAGE_CLASS_ROLES if kind.startswith(prefix)), None)
        return (role, text) if role is not None and text is not None else None

    def _loaded(self, call: cst.Call, env: Env) -> Template | None:
        """`environment.get_template("system.j2")`, the environment's loader a
        `FileSystemLoader(folder)` the code names: that file, as Jinja."""
        name = self._argument(call, "name", 0)
        if name is None or not isinstance(call.func, cst.Attribute):
            return None
        relative = self._path(name, env, 0)
        folders: set[Path | None] = set()
        for environment, environment_env in self.resolve(call.func.value, env):
            loader = (
                self._argument(environment, "loader", 0)
                if isinstance(environment, cst.Call)
                else None
            )
            for value, value_env in self.resolve(loader, environment_env) if loader else []:
                folder = (
                    self._argument(value, "searchpath", 0) if isinstance(value, cst.Call) else None
                )
                folders.add(self._path(folder, value_env, 0) if folder is not None else None)
        if relative is None or len(folders) != 1:
            return None
        root = folders.pop()
        text = self._read(root / relative) if root is not None else None
        return Template(text, "jinja") if text is not None else None

    def _object_template(self, node: cst.BaseExpression, env: Env) -> bool:
        """Whether `node` evaluates to a template object (not a plain string), or to a
        chain whose first step is one (`prompt | llm`)."""
        return all(
            isinstance(value, cst.Call)
            or (_piped(value) and self._object_template(value.left, value_env))
            for value, value_env in self.resolve(node, env)
        )

    def constant_text(self, name: cst.Name) -> str | None:
        """The text a module-level name holds, when the module shows it (see `_text`)."""
        return self._text(name, Env(None))

    def _text(self, node: cst.BaseExpression, env: Env, depth: int = 0) -> str | None:
        """The text `node` evaluates to: string constants (through names, joined by `+`)
        and prompt files the code names."""
        if depth > _MAX_DEPTH:
            return None
        texts: set[str | None] = set()
        for value, value_env in self.resolve(node, env):
            if _got(value) is not None:
                texts.add(self._kept_text(value, value_env, depth))
            elif isinstance(value, cst.Call):
                texts.add(self._file_text(value, value_env))
            elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                left = self._text(value.left, value_env, depth + 1)
                right = self._text(value.right, value_env, depth + 1)
                texts.add(left + right if left is not None and right is not None else None)
            elif isinstance(value, cst.BinaryOperation) and isinstance(
                value.operator, cst.Multiply
            ):
                texts.add(self._repeated(value, value_env, depth))
            elif isinstance(value, (cst.Subscript, cst.Name)):
                texts.add(self._kept_text(value, value_env, depth))
            else:
                texts.add(string_value(value))
        return texts.pop() if len(texts) == 1 else None

    def text(self, node: cst.BaseExpression, env: Env) -> str | None:
        """The text `node` evaluates to where the module shows it (see `_text`)."""
        return self._text(node, env)

    def _repeated(self, node: cst.BinaryOperation, env: Env, depth: int) -> str | None:
        """`"=" * 40`, `RULE * 3`: a text repeated an integer literal's number of times."""
        for text_side, count_side in ((node.left, node.right), (node.right, node.left)):
            if isinstance(count_side, cst.Integer):
                text = self._text(text_side, env, depth + 1)
                count = int(count_side.evaluated_value)
                if text is not None and len(text) * count <= _MAX_REPEATED_CHARS:
                    return text * count
        return None

    # prompt files -------------------------------------------------------------------
    def module_path(self) -> Path | None:
        """The linted module's file (None: prompt files are not read)."""
        return None

    def imported_text(self, name: cst.Name) -> str | None:
        """The text of a constant `name` imports from another module of the project
        (None: not followed here)."""
        return None

    def _kept_text(self, node: cst.BaseExpression, env: Env, depth: int) -> str | None:
        """The text kept elsewhere that `node` reads: a string value of a document the
        module loads (`PROMPTS["planner"]["system"]`, `PROMPTS.get("planner")`), or an
        imported constant."""
        if isinstance(node, cst.Name):
            return self.imported_text(node)
        found = self._document_item(node, env, depth)
        return document_text(*found) if found is not None else None

    def _document_item(
        self, node: cst.BaseExpression, env: Env, depth: int
    ) -> tuple[str, DocumentKind, tuple[str | int, ...]] | None:
        """The document text, its kind and the key path `node` reads in it, when the
        code names the file and every key."""
        if depth > _MAX_DEPTH:
            return None
        read = (node.value, _literal_key(node)) if isinstance(node, cst.Subscript) else _got(node)
        if read is not None:
            mapping, key = read
            inner = self._document_item(mapping, env, depth + 1) if key is not None else None
            return (inner[0], inner[1], (*inner[2], key)) if inner and key is not None else None
        if isinstance(node, cst.Call) and not self.functions_called(node):
            loaded = self._loaded_document(node, env)
            return (*loaded, ()) if loaded is not None else None
        values = (
            [(value, Env(env.root)) for value in self.attribute_values(node)]
            if isinstance(node, cst.Attribute)
            else [v for v in self.resolve(node, env) if v[0] is not node]
        )
        found = {self._document_item(value, value_env, depth + 1) for value, value_env in values}
        return found.pop() if len(found) == 1 else None

    def _loaded_document(self, call: cst.Call, env: Env) -> tuple[str, DocumentKind] | None:
        """`yaml.safe_load(open(P))`, `json.loads(Path(P).read_text())`, ...: the text
        of the file the code names, and how it is parsed."""
        kinds = {_DOCUMENT_LOADERS.get(name) for name in self.qualified_names(call.func)}
        kinds.discard(None)
        source = next(
            (
                arg.value
                for arg in call.args
                if not arg.star and (arg.keyword is None or arg.keyword.value in _DOCUMENT_SOURCES)
            ),
            None,
        )
        if len(kinds) != 1 or source is None:
            return None
        texts: set[str | None] = set()
        for value, value_env in self.resolve(source, env):
            if isinstance(value, cst.Call):
                opened = self._opened(value, value_env)
                texts.add(self._read(opened) if opened else self._file_text(value, value_env))
            elif isinstance(value, cst.Name):
                opened = self._with_opened(value)
                texts.add(self._read(opened) if opened is not None else None)
            else:
                texts.add(None)
        text = texts.pop() if len(texts) == 1 else None
        kind = kinds.pop()
        return (text, kind) if text is not None and kind is not None else None

    def _opened(self, call: cst.Call, env: Env) -> Path | None:
        """The path `open(P)` or `Path(P).open()` opens, when the code names it."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "open":
            return self._path(func.value, env, 0)
        if "builtins.open" not in self.qualified_names(func):
            return None
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            return None
        return self._path(call.args[0].value, env, 0)

    def _with_opened(self, name: cst.Name) -> Path | None:
        """`with open(P) as f:`: the path the file `name` reads was opened from."""
        scope = self.scopes.get(name)
        targets = [getattr(a, "node", None) for a in self.assignments(name)]
        if scope is None or len(targets) != 1:
            return None
        # a function's body, or the module (a global scope keeps no node: the module is
        # looked up among the scoped nodes, only for a loader given a bare name)
        body = getattr(scope, "node", None) or next(
            (node for node in self.scopes if isinstance(node, cst.Module)), None
        )
        for item in matchers.findall(body, matchers.WithItem()) if body is not None else ():
            if (
                isinstance(item, cst.WithItem)
                and item.asname is not None
                and item.asname.name is targets[0]
                and isinstance(item.item, cst.Call)
            ):
                return self._opened(item.item, Env(None))
        return None

    def _file_text(self, call: cst.Call, env: Env) -> str | None:
        """The text of the prompt file a call reads from a path the code names:
        `Path(P).read_text()`, `open(P).read()`."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _READ_METHODS:
            return None
        opened = func.value
        if isinstance(opened, cst.Call) and "builtins.open" in self.qualified_names(opened.func):
            if not opened.args or opened.args[0].keyword is not None:
                return None
            path = self._path(opened.args[0].value, env, 0)
        elif func.attr.value == "read_text":
            path = self._path(opened, env, 0)
        else:
            return None
        return self._read(path)

    def _read(self, path: Path | None) -> str | None:
        if path is None:
            return None
        module = self.module_path()
        if module is None:
            return None
        candidates = (
            [path]
            if path.is_absolute()
            else [
                folder / path for folder in [module.parent, *module.parent.parents][:_MAX_PARENTS]
            ]
        )
        for candidate in candidates:
            try:
                if not candidate.is_file() or candidate.stat().st_size > _MAX_FILE_BYTES:
                    continue
            except OSError:
                continue
            return read_dependency(candidate)
        return None

    def _path(self, node: cst.BaseExpression, env: Env, depth: int) -> Path | None:
        """The path an expression names: string constants, `__file__`, `Path(...)`, `/`,
        `os.path.join`, `.parent`, `os.path.dirname`, `.resolve()` (through names)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, cst.Name) and node.value == "__file__":
            return self.module_path()
        text = string_value(node)
        if text is not None:
            return Path(text)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
            left = self._path(node.left, env, depth + 1)
            right = self._path(node.right, env, depth + 1)
            return left / right if left is not None and right is not None else None
        if isinstance(node, cst.Attribute) and node.attr.value == "parent":
            inner = self._path(node.value, env, depth + 1)
            return inner.parent if inner is not None else None
        if isinstance(node, cst.Call):
            names_ = self.qualified_names(node.func)
            args = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "resolve",
                "absolute",
            ):
                return self._path(node.func.value, env, depth + 1)
            if names_ & {"pathlib.Path", "os.path.join", "pathlib.PurePath"} and args:
                parts = [self._path(arg, env, depth + 1) for arg in args]
                if any(part is None for part in parts):
                    return None
                return Path(*[part for part in parts if part is not None])
            if "os.path.dirname" in names_ and len(args) == 1:
                inner = self._path(args[0], env, depth + 1)
                return inner.parent if inner is not None else None
            if "os.path.abspath" in names_ and len(args) == 1:
                return self._path(args[0], env, depth + 1)
            return None
        if isinstance(node, cst.Name):
            values = [v for v in self.resolve(node, env) if v[0] is not node]
            found = {self._path(value, value_env, depth + 1) for value, value_env in values}
            return found.pop() if len(found) == 1 else None
        return None

    @staticmethod
    def _argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
        return positional[position] if position < len(positional) else None

    # the values -----------------------------------------------------------------------
    def _mapping(
        self,
        node: cst.BaseExpression,
        env: Env,
        into: dict[str, cst.BaseExpression],
        depth: int = 0,
    ) -> bool:
        """Add the entries of the mapping `node` evaluates to (dict literals and `dict(...)`,
        through names and local helpers, with `d["key"] = value` and `d.update(...)`);
        False when the module does not show all its keys (a parameter, a call's result,
        an unknown spread)."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(node, cst.Dict):
            known = True
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    key = string_value(element.key)
                    if key is None:
                        known = False
                    else:
                        into[key] = element.value
                else:
                    known &= self._mapping(element.value, env, into, depth + 1)
            return known
        if isinstance(node, (cst.BooleanOperation, cst.IfExp)):
            sides = (
                (node.left, node.right)
                if isinstance(node, cst.BooleanOperation)
                else (
                    node.body,
                    node.orelse,
                )
            )
            return all([self._mapping(side, env, into, depth + 1) for side in sides])
        if isinstance(node, cst.Name):
            return self._named_mapping(node, env, into, depth)
        if isinstance(node, cst.Call):
            if "builtins.dict" in self.qualified_names(node.func):
                known = True
                for arg in node.args:
                    if arg.keyword is not None:
                        into[arg.keyword.value] = arg.value
                    else:
                        known &= self._mapping(arg.value, env, into, depth + 1)
                return known
            functions = [(f, m) for f, m in self.functions_called(node) if id(f) not in env.calling]
            if not functions:
                return False
            known = True
            for function, method in functions:
                inner = self.bind(function, node, method, env)
                returned = self.index.returns.get(id(function), [])
                known &= bool(returned) and all(
                    [self._mapping(value, inner, into, depth + 1) for value in returned]
                )
            return known
        return False

    def _named_mapping(
        self, node: cst.Name, env: Env, into: dict[str, cst.BaseExpression], depth: int
    ) -> bool:
        known = False
        for assignment in self.assignments(node):
            target = getattr(assignment, "node", None)
            if isinstance(target, cst.Param):
                bound = env.bindings.get(id(target))
                if bound is None:
                    return False
                known = self._mapping(bound[0], bound[1], into, depth + 1)
            elif isinstance(target, cst.Name):
                for source in self.index.values.get(id(target), []):
                    if source.kind != "assign" or source.value is None:
                        return False
                    if not self._mapping(source.value, env, into, depth + 1):
                        return False
                    known = True
            else:
                return False
        for key, value, _key_node in self.item_writes(node):
            into[key] = value
        for assignment in self.assignments(node):
            for access in getattr(assignment, "references", ()):
                for mutation in self.index.mutations.get(id(access.node), []):
                    if mutation.method != "update":
                        continue
                    for arg in mutation.call.args:
                        if arg.keyword is not None:
                            into[arg.keyword.value] = arg.value
                        elif not self._mapping(arg.value, env, into, depth + 1):
                            return False
        return known


def _literal_key(node: cst.Subscript) -> str | int | None:
    """`["system"]` / `[0]`: the key a subscript reads, when it is written in place."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return _key_value(node.slice[0].slice.value)


def _key_value(value: cst.BaseExpression) -> str | int | None:
    """A key written in place: an integer or a string literal."""
    if isinstance(value, cst.Integer):
        return int(value.evaluated_value)
    return string_value(value)


def _got(node: cst.BaseExpression) -> tuple[cst.BaseExpression, str | int | None] | None:
    """`PROMPTS.get("system")` / `.get("system", default)`: the mapping a `get` call reads
    and its key (None when the key is not written in place). A document holding the key
    gives its value, as `["system"]` does; one without it gives no text."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return None
    args = node.args
    if node.func.attr.value != "get" or not 1 <= len(args) <= 2:
        return None
    if any(arg.star or arg.keyword is not None for arg in args):
        return None
    return node.func.value, _key_value(args[0].value)


def _rebinds(value: cst.BaseExpression, name: cst.Name) -> bool:
    """Whether `value` is `name.partial(...)` (assigned back to `name`)."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == _PARTIAL
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == name.value
    )


def _partially_bound(template: Template, partial: cst.Call) -> Template | None:
    """`template` with the values a `.partial(...)` call binds (None: one is positional)."""
    bound: dict[str, cst.BaseExpression] = dict(template.bound)
    for arg in partial.args:
        if arg.keyword is None:
            return None
        bound[arg.keyword.value] = _partial_value(arg.value)
    return replace(template, bound=tuple(bound.items()))


def _partial_value(value: cst.BaseExpression) -> cst.BaseExpression:
    """What a `.partial(...)` value renders: a lambda is called each time the template is
    rendered (its body), anything else is the value itself."""
    return value.body if isinstance(value, cst.Lambda) else value


def _piped(node: cst.BaseExpression) -> TypeGuard[cst.BinaryOperation]:
    """Whether `node` chains runnables with `|` (LangChain's `prompt | llm`)."""
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr)


def _langchain_dialect(call: cst.Call) -> Dialect:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "template_format":
            value = string_value(arg.value)
            if value == "jinja2":
                return "jinja"
            if value == "mustache":
                return "generic"
    return "format"
