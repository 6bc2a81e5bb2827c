"""Prompt templates kept as string values of a YAML or JSON file (`prompts.yaml`).

A string value is a prompt template by what it is, whatever its key: text of at
least three lines (in the value, or in the file for folded and quoted text) holding a
template placeholder (`{name}`, `{{ name }}`, `{% tag %}`). `${VAR}` and
`${{ expr }}` interpolation (shell scripts, compose files, CI workflows) is not a
template placeholder here, nor is one shown as code (Markdown code spans and fences,
reST literal blocks: release notes and docs that show templates), and mapping keys,
numbers and short strings are not prompts. Each template is linted as a prompt file's text is; `Placement` puts its
characters back at their line and column in the file, through block scalars
(`|`, `>`), folding, quotes and escapes. A file that does not parse holds no
template: nothing is reported, as for any other file that is not a prompt.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .analysis.template_inputs import is_jinja, scan
from .finding import Position

if TYPE_CHECKING:
    import yaml

__all__ = ["STRUCTURED_SUFFIXES", "Placement", "PromptValue", "position_in", "prompt_values"]

STRUCTURED_SUFFIXES = frozenset({".yaml", ".yml", ".json"})
_MIN_LINES = 3
_STRING_TAG = "tag:yaml.org,2002:str"
# a double-quoted scalar's one-character escapes, as YAML defines them
_ESCAPES = {
    "0": "\0",
    "a": "\x07",
    "b": "\x08",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\x0b",
    "f": "\x0c",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_FENCES = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)
_CODE_SPANS = re.compile(r"(`+)[^`\n]+?\1")
_DIRECTIVE = re.compile(r"\s*\.\. (?:code|code-block|sourcecode)::")


def position_in(text: str, offset: int) -> Position:
    """The 1-based row and column of a character offset in `text`."""
    row = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Position(row, column)


@dataclass(frozen=True)
class Placement:
    """Where a string value's characters are in the file that holds it: the scalar
    written in YAML `style` from `start` (its content's first character) to `end`."""

    file_text: str
    value: str
    start: int
    end: int
    style: str | None

    @functools.cached_property
    def offsets(self) -> tuple[int, ...]:
        """`offsets[i]` is the file offset of the value's character `i` (whitespace sits
        just after the character before it), `offsets[len(value)]` just after the last;
        worked out once a finding needs it. Where the characters cannot be followed, all
        are placed at the value's start."""
        found = _offsets(self.value, self.file_text, self.start, self.end, self.style)
        return found or (self.start,) * (len(self.value) + 1)

    def position(self, offset: int) -> Position:
        """The row and column in the file of the value's character `offset`."""
        return position_in(self.file_text, self.offsets[offset])


@dataclass(frozen=True)
class PromptValue:
    """A prompt template held by a string value, and where its text is in the file."""

    text: str
    placement: Placement


def prompt_values(text: str) -> list[PromptValue]:
    """The prompt templates among the string values of a YAML or JSON document's text,
    in file order; none when it does not parse."""
    if "{" not in text:
        return []  # no placeholder, so no template: not worth parsing
    found: list[PromptValue] = []
    for document in _documents(text):
        for node in _string_values(document):
            value = _prompt_value(node, text)
            if value is not None:
                found.append(value)
    return found


def _documents(text: str) -> list[yaml.Node]:
    """The documents' node trees (marks count characters), or none when it does not parse."""
    import yaml  # here, not at import: most runs meet no YAML file holding a `{`

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser if built
    try:
        return [node for node in yaml.compose_all(text, Loader=loader) if node is not None]
    except (yaml.YAMLError, RecursionError):
        return []


def _string_values(root: yaml.Node) -> Iterator[yaml.ScalarNode]:
    """The string scalars of a document that are values (not mapping keys), each once."""
    from yaml import MappingNode, ScalarNode, SequenceNode  # loaded by `_documents`

    stack = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue  # an alias of a node already read
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            if node.tag == _STRING_TAG:
                yield node
        elif isinstance(node, MappingNode):
            stack.extend(value for _, value in reversed(node.value))
        elif isinstance(node, SequenceNode):
            stack.extend(reversed(node.value))


def _prompt_value(node: yaml.ScalarNode, text: str) -> PromptValue | None:
    value: str = node.value
    start = _content_start(text, node.start_mark.index, node.style)
    end = node.end_mark.index
    long_enough = (
        len(value.strip().splitlines()) >= _MIN_LINES
        or text[start:end].strip().count("\n") >= _MIN_LINES - 1
    )
    if not (long_enough and _has_placeholder(value)):
        return None
    return PromptValue(value, Placement(text, value, start, end, node.style))


def _has_placeholder(value: str) -> bool:
    """Whether the text's prose fills in a template placeholder other than `${...}`
    interpolation (text that shows templates as code documents them: release notes)."""
    prose = _prose(value)
    for piece in scan(prose, is_jinja(prose, "")):
        if piece.kind not in ("output", "tag"):
            continue
        if not prose.startswith("$", piece.start) and prose[piece.start - 1 : piece.start] != "$":
            return True
    return False


def _prose(value: str) -> str:
    """The text without its code: Markdown fences and code spans, reST literal blocks
    (the indented lines after a line ending in `::` or a `.. code-block::`)."""
    value = _CODE_SPANS.sub(" ", _FENCES.sub("\n", value))
    kept: list[str] = []
    literal_indent: int | None = None
    for line in value.splitlines():
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None and (not line.strip() or indent > literal_indent):
            continue
        literal = line.rstrip().endswith("::") or _DIRECTIVE.match(line) is not None
        literal_indent = indent if literal else None
        kept.append(line)
    return "\n".join(kept)


def _content_start(text: str, start: int, style: str | None) -> int:
    """Where a scalar's content starts: after a block scalar's header line, after a
    quote, or at a plain scalar's first character."""
    if style in ("|", ">"):
        newline = text.find("\n", start)
        return len(text) if newline < 0 else newline + 1
    if style in ('"', "'"):
        return start + 1
    return start


def _offsets(
    value: str, text: str, start: int, end: int, style: str | None
) -> tuple[int, ...] | None:
    """Each character's offset in `text`, then the end's (see `Placement`), or None
    when the value's characters cannot be found in order between `start` and `end`."""
    offsets: list[int] = []
    position = start
    after = start  # just after the last character placed
    for char in value:
        if char.isspace():
            offsets.append(after)  # folded, escaped or indented: where the text stands
            continue
        found = _find(char, text, position, end, style)
        if found is None:
            return None
        at, width = found
        offsets.append(at)
        position = at + width
        after = at + 1
    offsets.append(after)
    return tuple(offsets)


def _find(
    char: str, text: str, position: int, end: int, style: str | None
) -> tuple[int, int] | None:
    """Where the next source of the visible `char` is (its offset and how many source
    characters write it), passing over whitespace, line breaks and escapes that write
    only whitespace; None when something else comes first."""
    while position < end:
        written = text[position]
        if style == '"' and written == "\\":
            produced, width = _escape(text, position)
            if produced == char:
                return position, width
            if produced.strip():
                return None
            position += width
        elif style == "'" and char == "'" and text.startswith("''", position):
            return position, 2
        elif written == char:
            return position, 1
        elif written.isspace():
            position += 1
        else:
            return None
    return None


def _escape(text: str, position: int) -> tuple[str, int]:
    """What the escape at `text[position]` (a backslash) writes, and its width; an
    escaped line break writes nothing."""
    code = text[position + 1 : position + 2]
    if code in _ESCAPES:
        return _ESCAPES[code], 2
    if code in _HEX_ESCAPES:
        digits = text[position + 2 : position + 2 + _HEX_ESCAPES[code]]
        try:
            return chr(int(digits, 16)), 2 + len(digits)
        except ValueError:
            return "", 2
    return "", 2
