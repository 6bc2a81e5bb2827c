"""Where a value sits in the cached prefix: what follows it, and whether anything reusable does.

A volatile or per-user value breaks caching by what follows it in the cached
prefix. `following_text` lays out the text a cached segment holds (`+`
chains, f-strings, string constants, `TEMPLATE.format(...)`, constants
reached through names) and counts the fixed text and the other values after
the last piece carrying a taint. `sent_once_at_end` says whether the value
ends a prompt that is sent once with only the user turn after it (nothing
reusable follows: the finding would cost nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from .bindings import Env
from .cached_segments import CachedSegment, one_shot
from .syntax import string_value
from .taint import Taint, TaintAnalysis

__all__ = ["Following", "following_text", "sent_once_at_end"]

_TAIL_CHARS = 12  # fixed text this short after a value (punctuation, a newline) is its end
_CHARS_PER_TOKEN = 4  # a rough count for English prose
# a `%` conversion: `%s`, `%(name)s`, `%5.2f`, `%%`
_CONVERSION = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?P<spec>[diouxXeEfFgGcrsa%])"
)


@dataclass(frozen=True)
class Following:
    """What follows a volatile value in its segment's text: fixed characters and other
    values; `piece`, the expression that puts the value there (an f-string's expression,
    the argument a template's placeholder takes, an operand of `+` or `%`)."""

    chars: int
    values: int
    piece: cst.BaseExpression | None = None

    @property
    def at_end(self) -> bool:
        """Whether the value ends the text (only a few characters of fixed text after it)."""
        return self.values == 0 and self.chars < _TAIL_CHARS

    def describe(self) -> str:
        """`about 40 tokens of fixed text follow it in that text`."""
        tokens = max(1, round(self.chars / _CHARS_PER_TOKEN))
        more = f" and {self.values} other value(s)" if self.values else ""
        plural = "" if tokens == 1 else "s"
        return f"about {tokens} token{plural} of fixed text{more} follow it in that text"


def _pieces(
    node: cst.BaseExpression, analysis: TaintAnalysis, env: Env
) -> list[str | cst.BaseExpression] | None:
    """The parts of a text in order, fixed text as `str` (None for shapes not followed):
    `+` chains, f-strings, string constants and templates rendered (`template_inputs`)."""
    text = string_value(node)
    if text is not None:
        return [text]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left = _pieces(node.left, analysis, env) or [node.left]
        right = _pieces(node.right, analysis, env) or [node.right]
        return [*left, *right]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        repeated = analysis.text(node, env)  # `"=" * 40`
        return [repeated] if repeated is not None else None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return _interpolated(node, analysis, env)
    if isinstance(node, cst.FormattedString):
        return [
            part.value if isinstance(part, cst.FormattedStringText) else part.expression
            for part in node.parts
            if isinstance(part, (cst.FormattedStringText, cst.FormattedStringExpression))
        ]
    if isinstance(node, cst.Call):
        # a template rendered (`TEMPLATE.format(...)`, `.substitute`, `.render`, ...)
        return analysis.rendered_pieces(node, env)
    return None


def _built(
    value: cst.BaseExpression, analysis: TaintAnalysis, env: Env
) -> list[str | cst.BaseExpression] | None:
    """The parts of the whole text `value` is built into: with the statements before and
    after it when it is one value of a text built over statements (`system = RULES`,
    `system += f"... {now}"`, `system += TOOLS`), else its own."""
    chain = analysis.index.text_chains.get(id(value), [value])
    pieces: list[str | cst.BaseExpression] = []
    for part in chain:
        laid_out = _pieces(part, analysis, env)
        if laid_out is None:
            if part is value:
                return None
            laid_out = [part]  # a value added whose text is not followed
        pieces += laid_out
    return pieces


def _interpolated(
    node: cst.BinaryOperation, analysis: TaintAnalysis, env: Env
) -> list[str | cst.BaseExpression] | None:
    """`TEMPLATE % value`, `% (a, b)` or `% {"key": value}` laid out at the template's
    conversions (None when the text, or which value fills a conversion, is not known)."""
    text = analysis.text(node.left, env)
    if text is None:
        return None
    right = node.right
    named: dict[str, cst.BaseExpression] = {}
    if isinstance(right, cst.Dict):
        for element in right.elements:
            key = string_value(element.key) if isinstance(element, cst.DictElement) else None
            if key is None:
                return None
            named[key] = element.value
    given = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
    if isinstance(right, cst.Tuple) and any(
        isinstance(e, cst.StarredElement) for e in right.elements
    ):
        return None
    pieces: list[str | cst.BaseExpression] = []
    position = 0
    start = 0
    for match in _CONVERSION.finditer(text):
        pieces.append(text[start : match.start()])
        start = match.end()
        if match.group("spec") == "%":
            pieces.append("%")
            continue
        key = match.group("key")
        if key is not None:
            if key not in named:
                return None
            pieces.append(named[key])
        elif named or position >= len(given):
            return None
        else:
            pieces.append(given[position])
            position += 1
    pieces.append(text[start:])
    return pieces


def _constant(
    piece: str | cst.BaseExpression, analysis: TaintAnalysis, env: Env
) -> str | cst.BaseExpression:
    """A piece as fixed text when it is one (a constant through names), else itself."""
    if isinstance(piece, str):
        return piece
    text = analysis.text(piece, env)
    return text if text is not None else piece


def _carries(node: cst.BaseExpression, env: Env, taint: Taint, analysis: TaintAnalysis) -> bool:
    """Whether `node` carries the value `taint` stands for: the same origin, however often
    it changes where it is read (a clock read per call in a function called at import is
    read once per process)."""
    return any(
        found.kind == taint.kind and found.origin is taint.origin
        for found in analysis.taints(node, env)
    )


def _stored(
    value: cst.BaseExpression, env: Env, taint: Taint, analysis: TaintAnalysis
) -> list[tuple[cst.BaseExpression, Env]]:
    """`self.<attr>` as the values its class assigns it that carry `taint`
    (`self.system = RULES + f"... {started}"` in `__init__`); any other value as itself."""
    if not isinstance(value, cst.Attribute):
        return [(value, env)]
    stored = [
        (resolved, resolved_env)
        for field in analysis.attribute_values(value)
        for resolved, resolved_env in analysis.resolve(field, Env(None))
        if _carries(resolved, resolved_env, taint, analysis)
    ]
    return stored or [(value, env)]


def following_text(
    segment: CachedSegment, taint: Taint, analysis: TaintAnalysis
) -> Following | None:
    """What follows `taint` in the segment's text (the most, over the values it may have);
    None when the text's shape is not followed, or when the value ends a text that
    another module puts into the prompt (what follows it there is not laid out)."""
    values = [
        field
        for value, env in analysis.resolve(segment.node, Env(segment.function))
        for field in _stored(value, env, taint, analysis)
    ]
    found: Following | None = None
    for value, env in values:
        if not _carries(value, env, taint, analysis):
            continue  # another value the segment may hold (`SYSTEM` bound twice)
        pieces = _built(value, analysis, env)
        if pieces is None:
            return None
        carrying = [
            position
            for position, piece in enumerate(pieces)
            if not isinstance(piece, str) and _carries(piece, env, taint, analysis)
        ]
        if not carrying:
            return None
        rest = [_constant(piece, analysis, env) for piece in pieces[carrying[-1] + 1 :]]
        placed = pieces[carrying[-1]]
        following = Following(
            sum(len(piece.strip()) for piece in rest if isinstance(piece, str)),
            sum(1 for piece in rest if not isinstance(piece, str)),
            placed if isinstance(placed, cst.BaseExpression) else None,
        )
        if found is None or (following.chars, following.values) > (found.chars, found.values):
            found = following
    if found is not None and found.at_end and segment.elsewhere:
        return None
    return found


def sent_once_at_end(
    following: Following | None,
    segment: CachedSegment,
    parents: Mapping[cst.CSTNode, cst.CSTNode],
    analysis: TaintAnalysis,
) -> bool:
    """Whether a value that `following` places at the end of the segment's text ends a
    prompt sent once with only the user turn after it (`cached_segments.one_shot`)."""
    if following is None or not following.at_end:
        return False
    # a chat template without a history is the whole conversation: only user turns follow
    node = segment.node
    env = Env(segment.function)
    whole = isinstance(node, cst.Call) and analysis.renders_conversation(node, env)
    return whole or one_shot(segment, parents, analysis)
