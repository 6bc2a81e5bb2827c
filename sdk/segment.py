"""Segments: pieces of a prompt labelled by how often they change.

`Stability` orders them: STATIC (never changes: instructions, tool schemas)
< VERSIONED (changes only with a release: a pinned prompt version, a policy
text) < SESSION (shared by one conversation or tenant: retrieved documents,
the conversation so far) < DYNAMIC (new with every request: the latest
question). A cacheable prefix is everything up to the last stable segment, so
segments must appear in that order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .canonical import canonical_json, canonical_text, sha256_hex
from .errors import CanonicalError

__all__ = ["Role", "Segment", "Stability"]

Role = Literal["system", "user", "assistant"]
_ROLES: tuple[str, ...] = ("system", "user", "assistant")


class Stability(enum.IntEnum):
    """How often a segment changes; lower values belong earlier in a prompt."""

    STATIC = 0
    VERSIONED = 1
    SESSION = 2
    DYNAMIC = 3


def _content_text(content: str | Mapping[str, Any] | list[Any]) -> str:
    if isinstance(content, str):
        return canonical_text(content)
    return canonical_json(content)


@dataclass(frozen=True)
class Segment:
    """A piece of canonical text with a stability tier.

    Create segments with the constructors (`Segment.static`, `.versioned`,
    `.session`, `.dynamic`): they canonicalise text (see `canonical`) and JSON
    content (dicts and lists are serialised with sorted keys). `role` matters
    for segments in `Prompt.messages`. `cache_control` is a caller's own
    Anthropic-style marker (`{"type": "ephemeral", "ttl": "5m"}`); renderers
    count it against the provider's limit and never drop it.

    `padding` is whitespace appended after canonicalisation, so `text` ends with
    it; `align_static_prefix` sets it to end a static prefix on a KV-cache block
    boundary. `digest` is the sha256 of `text`.
    """

    text: str
    stability: Stability
    role: Role = "user"
    name: str | None = None
    version: str | None = None
    cache_control: Mapping[str, str] | None = None
    padding: str = ""
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise CanonicalError(f"segment role {self.role!r} is not one of {', '.join(_ROLES)}")
        if self.padding.strip(" \t\n"):
            raise CanonicalError(
                f"segment padding {self.padding[:20]!r} holds more than spaces, tabs and "
                "newlines: "
                "padding must be semantically inert whitespace"
            )
        # Padding goes after canonicalisation (which would strip it), so re-creating a
        # segment from its own text and padding gives the same bytes.
        object.__setattr__(self, "text", canonical_text(self.text) + self.padding)
        object.__setattr__(self, "digest", sha256_hex(self.text))

    @property
    def label(self) -> str:
        """A short name for messages: `name@version`, the name, or the text's start."""
        if self.name is not None:
            return f"{self.name}@{self.version}" if self.version else self.name
        head = self.text[:40].replace("\n", " ")
        return f"{self.stability.name.lower()} segment {head!r}"

    @classmethod
    def static(
        cls,
        content: str | Mapping[str, Any] | list[Any],
        *,
        role: Role = "system",
        name: str | None = None,
        version: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment that never changes (instructions, schemas, fixed examples)."""
        return cls(_content_text(content), Stability.STATIC, role, name, version, cache_control)

    @classmethod
    def versioned(
        cls,
        content: str | Mapping[str, Any] | list[Any],
        *,
        version: str,
        role: Role = "system",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment that changes only with a release (give its version)."""
        return cls(_content_text(content), Stability.VERSIONED, role, name, version, cache_control)

    @classmethod
    def session(
        cls,
        content: str | Mapping[str, Any] | list[Any],
        *,
        role: Role = "user",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment shared by one session: retrieved documents, earlier turns."""
        return cls(_content_text(content), Stability.SESSION, role, name, None, cache_control)

    @classmethod
    def dynamic(
        cls,
        content: str | Mapping[str, Any] | list[Any],
        *,
        role: Role = "user",
        name: str | None = None,
        cache_control: Mapping[str, str] | None = None,
    ) -> Segment:
        """A segment new with every request (the latest question)."""
        return cls(_content_text(content), Stability.DYNAMIC, role, name, None, cache_control)
