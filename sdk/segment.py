"""Segments: pieces of a prompt labelled by how often they change.

`Stability` orders them: STATIC (never changes: instructions, tool schemas)
< VERSIONED (changes only with a release: a pinned prompt version, a policy
text) < SESSION (shared by one conversation or tenant: retrieved documents,
the conversation so far) < DYNAMIC (new with every request: the latest
question). A cacheable prefix is everything up to the last stable segment, so
segments must appear in that order.

Only what must be byte-stable is canonicalised: STATIC and VERSIONED text
(and tool definitions) go through `canonical_text`. SESSION and DYNAMIC text
is the caller's data and is sent exactly as given (decomposed Unicode, trailing
tabs of a TSV row, Markdown hard breaks all kept); it is byte-stable as long as
the caller keeps the same string, which `Prompt.next_turn` does.

A segment holds either text or structured content blocks (`content`: images,
documents, tool calls and results, provider-native blocks). Structured
segments hash their blocks' canonical JSON (`text` is that hashing form, never
sent); renderers send the blocks themselves.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .canonical import canonical_json, canonical_text, sha256_hex
from .content import ContentBlock, as_blocks, canonical_blocks, is_block_list, turn_content
from .errors import CanonicalError, LayoutError

__all__ = ["Role", "Segment", "Stability", "token_count"]

Role = Literal["system", "user", "assistant"]
_ROLES: tuple[str, ...] = ("system", "user", "assistant")


class Stability(enum.IntEnum):
    """How often a segment changes; lower values belong earlier in a prompt."""

    STATIC = 0
    VERSIONED = 1
    SESSION = 2
    DYNAMIC = 3


Content = str | Mapping[str, Any] | list[Any] | tuple[Any, ...]


def _split(content: Content) -> tuple[str, tuple[ContentBlock, ...]]:
    """Text (a JSON value is serialised canonically, key order kept) or content blocks."""
    if isinstance(content, str):
        return content, ()
    if content is None or isinstance(content, (bool, int, float)):
        raise CanonicalError(
            f"segment content is {type(content).__name__}: give text, a list of content "
            "blocks or a JSON document (a dict or a list); leave out a segment with nothing "
            "to send",
            value=content,
        )
    content = turn_content(content)
    if is_block_list(content):
        return "", as_blocks(content)
    return canonical_json(content, sort_keys=False), ()


@dataclass(frozen=True)
class Segment:
    """A piece of a prompt with a stability tier: text, or content blocks.

    Create segments with the constructors (`Segment.static`, `.versioned`,
    `.session`, `.dynamic`). Content is text, a JSON value (dicts and lists of
    data are serialised canonically, keys in the order written), or a list of content blocks (`Text`,
    `Image`, `Document`, `ToolCall`, `ToolResult`, `Native`, provider block dicts,
    official SDK objects), kept in `blocks`. STATIC and VERSIONED text is canonicalised
    (see `canonical`); SESSION and DYNAMIC text is kept as given. `role`
    matters for segments in `Prompt.messages`. `cache_control` is a caller's
    own Anthropic-style marker (`{"type": "ephemeral", "ttl": "5m"}`);
    renderers count it against the provider's limit and never drop it. It is
    refused on DYNAMIC segments: they change every request, so a marker there
    writes an entry no later request can read.

    `padding` (static segments only) is whitespace appended after
    canonicalisation, so `text` ends with it; `align_static_prefix` sets it to
    end a static prefix on a KV-cache block boundary. `digest` is the sha256
    of `text` (of the blocks' canonical JSON for a structured segment).
    """

    text: str
    stability: Stability
    role: Role = "user"
    name: str | None = None
    version: str | None = None
    cache_control: Mapping[str, str] | None = None
    padding: str = ""
    blocks: tuple[ContentBlock, ...] = ()
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise CanonicalError(
                f"segment role {self.role!r} is not one of {', '.join(_ROLES)}", value=self.role
            )
        if self.padding.strip(" \t\n"):
            raise CanonicalError(
                f"segment padding {self.padding[:20]!r} holds more than spaces, tabs and "
                "newlines: "
                "padding must be semantically inert whitespace",
                value=self.padding,
            )
        if self.cache_control is not None and self.stability == Stability.DYNAMIC:
            raise LayoutError(
                f"cache_control on DYNAMIC {self.label}: its content is new with every "
                "request, so a cache entry ending there is written and never read; drop the "
                "marker (prefixkit marks the end of the stable tiers itself), or make the "
                "segment SESSION if it is shared by later requests",
                label=self.label,
            )
        if self.blocks:
            if self.padding:
                raise CanonicalError(
                    "a segment of content blocks cannot carry padding", value=self.padding
                )
            object.__setattr__(self, "blocks", tuple(self.blocks))
            object.__setattr__(self, "text", canonical_blocks(self.blocks))
        elif self.stability <= Stability.VERSIONED:
            # Padding goes after canonicalisation (which would strip it), so re-creating
            # a segment from its own text and padding gives the same bytes.
            object.__setattr__(self, "text", canonical_text(self.text) + self.padding)
        elif self.padding:
            raise CanonicalError(
                f"padding on {self.stability.name} {self.label}: only the static prefix is padded",
                value=self.padding,
            )
        elif not isinstance(self.text, str):
            raise CanonicalError(
                f"expected text (str), got {type(self.text).__name__}: convert it first",
                value=self.text,
            )
        try:
            digest = sha256_hex(self.text)
        except UnicodeEncodeError as error:
            raise CanonicalError(
                f"the text holds a lone surrogate ({self.text[error.start]!r} at character "
                f"{error.start}), which no API accepts (text cut inside a character of a "
                "UTF-16 source): remove or replace it, e.g. "
                "text.encode('utf-8', 'replace').decode()",
                value=self.text[max(0, error.start - 20) : error.end + 20],
            ) from None
        object.__setattr__(self, "digest", digest)

    @functools.cached_property
    def label(self) -> str:
        """A short name for messages: `name@version`, the name, or the text's start."""
        if self.name is not None:
            return f"{self.name}@{self.version}" if self.version else self.name
        head = self.text[:40].replace("\n", " ")
        return f"{self.stability.name.lower()} segment {head!r}"

    @classmethod
    def static(
        cls,
        content: Content,
        *,
        role: Role = "system",
        name: str | None = None,
        version: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment that never changes (instructions, schemas, fixed examples)."""
        text, blocks = _split(content)
        return cls(text, Stability.STATIC, role, name, version, cache_control, blocks=blocks)

    @classmethod
    def versioned(
        cls,
        content: Content,
        *,
        version: str,
        role: Role = "system",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment that changes only with a release (give its version)."""
        text, blocks = _split(content)
        return cls(text, Stability.VERSIONED, role, name, version, cache_control, blocks=blocks)

    @classmethod
    def session(
        cls,
        content: Content,
        *,
        role: Role = "user",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment shared by one session: retrieved documents, earlier turns."""
        text, blocks = _split(content)
        return cls(text, Stability.SESSION, role, name, None, cache_control, blocks=blocks)

    @classmethod
    def dynamic(
        cls,
        content: Content,
        *,
        role: Role = "user",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment new with every request (the latest question)."""
        text, blocks = _split(content)
        return cls(text, Stability.DYNAMIC, role, name, None, cache_control, blocks=blocks)


class _Counting(Protocol):
    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


def token_count(segment: Segment, tokenizer: _Counting) -> int:
    """`tokenizer.count(segment.text)`, kept on the segment per tokenizer name.

    A segment's text never changes, so its count by one vocabulary never does;
    renderers count every segment of every request, and most segments (tools,
    system, documents) are the same objects each time.
    """
    counts: dict[str, int] = segment.__dict__.setdefault("_token_counts", {})
    name = tokenizer.name
    count = counts.get(name)
    if count is None:
        count = counts[name] = tokenizer.count(segment.text)
    return count
