"""A prompt: segments in provider order (tools, system, context, messages).

Construction checks the layout: stability never decreases along that order,
so the cacheable prefix (everything up to the last STATIC/VERSIONED segment)
is one unbroken run at the start. `next_turn` grows a conversation so that the
previous rendering is always a byte-exact prefix of the next one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .canonical import canonical_json, sha256_hex
from .errors import CanonicalError, LayoutError
from .segment import Role, Segment, Stability

__all__ = ["Part", "Prompt", "ToolSpec"]

Part = Literal["tools", "system", "context", "messages"]
ToolSpec = Mapping[str, Any]
MessageLike = Segment | Mapping[str, Any]


def _tool_segment(tool: ToolSpec | Segment) -> Segment:
    if isinstance(tool, Segment):
        return tool
    name = tool.get("name") or tool.get("function", {}).get("name")
    if not isinstance(name, str) or not name:
        raise CanonicalError(
            f"tool definition {canonical_json(dict(tool))[:80]} has no 'name': "
            "give every tool a unique name"
        )
    return Segment.static(dict(tool), role="system", name=name)


def _system_segment(item: str | Segment) -> Segment:
    return item if isinstance(item, Segment) else Segment.static(item, role="system")


def _context_segment(item: str | Segment) -> Segment:
    return item if isinstance(item, Segment) else Segment.session(item, role="user")


def _message_segment(item: MessageLike) -> Segment:
    if isinstance(item, Segment):
        return item
    role = item.get("role")
    content = item.get("content")
    if role not in ("user", "assistant", "system"):
        raise CanonicalError(f"message {dict(item)!r} needs role 'user', 'assistant' or 'system'")
    if not isinstance(content, str):
        raise CanonicalError(
            f"message content must be text, got {type(content).__name__}: "
            "wrap structured content in Segment.session(...) / Segment.dynamic(...)"
        )
    role_: Role = role
    return Segment.session(content, role=role_, cache_control=item.get("cache_control"))


def _as_tuple(items: Iterable[Any] | str | Segment | None) -> tuple[Any, ...]:
    if items is None:
        return ()
    if isinstance(items, (str, Segment, Mapping)):
        return (items,)
    return tuple(items)


@dataclass(frozen=True)
class Prompt:
    """An LLM request's input, laid out static-first.

    - `tools`: JSON tool schemas (dicts with a `name`); canonicalised and kept
      in name order unless `sort_tools=False`, so a list built from a set still
      renders identically;
    - `system`: text or segments (plain text counts as STATIC);
    - `context`: documents shared by a session (plain text counts as SESSION);
    - `messages`: the conversation; dicts `{"role", "content"}` count as SESSION
      history, the new question is usually `Segment.dynamic(...)`.
    - `name`: identifies the prompt for the runtime drift guard.

    Raises `LayoutError` if a segment is more stable than one before it.
    """

    tools: tuple[Segment, ...] = ()
    system: tuple[Segment, ...] = ()
    context: tuple[Segment, ...] = ()
    messages: tuple[Segment, ...] = ()
    name: str | None = None
    sort_tools: bool = field(default=True, repr=False)

    def __init__(
        self,
        *,
        tools: Iterable[ToolSpec | Segment] | None = None,
        system: Iterable[str | Segment] | str | Segment | None = None,
        context: Iterable[str | Segment] | str | Segment | None = None,
        messages: Iterable[MessageLike] | None = None,
        name: str | None = None,
        sort_tools: bool = True,
    ) -> None:
        tool_segments = tuple(_tool_segment(t) for t in _as_tuple(tools))
        if sort_tools:
            tool_segments = tuple(sorted(tool_segments, key=lambda s: (s.name or "", s.text)))
        names = [s.name for s in tool_segments]
        duplicates = sorted({n for n in names if n is not None and names.count(n) > 1})
        if duplicates:
            raise CanonicalError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        object.__setattr__(self, "tools", tool_segments)
        object.__setattr__(self, "system", tuple(_system_segment(s) for s in _as_tuple(system)))
        object.__setattr__(self, "context", tuple(_context_segment(s) for s in _as_tuple(context)))
        object.__setattr__(
            self, "messages", tuple(_message_segment(m) for m in _as_tuple(messages))
        )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "sort_tools", sort_tools)
        check_layout(self.parts())

    def parts(self) -> Iterator[tuple[Part, Segment]]:
        """Every segment with the part it belongs to, in provider order."""
        for segment in self.tools:
            yield "tools", segment
        for segment in self.system:
            yield "system", segment
        for segment in self.context:
            yield "context", segment
        for segment in self.messages:
            yield "messages", segment

    def segments(self) -> list[Segment]:
        """Every segment in provider order."""
        return [segment for _, segment in self.parts()]

    def tool_dicts(self) -> list[dict[str, Any]]:
        """The tool schemas as dicts, in render order."""
        return [json.loads(segment.text) for segment in self.tools]

    def static_segments(self) -> list[Segment]:
        """The leading run of STATIC and VERSIONED segments: the cacheable core."""
        run: list[Segment] = []
        for segment in self.segments():
            if segment.stability > Stability.VERSIONED:
                break
            run.append(segment)
        return run

    def render_text(self) -> str:
        """Provider-neutral canonical rendering; used for digests and prefix checks."""
        return "".join(_render_segment(part, s) for part, s in self.parts())

    def static_prefix_text(self) -> str:
        """The canonical rendering of `static_segments()` (a prefix of `render_text()`)."""
        count = len(self.static_segments())
        return "".join(_render_segment(p, s) for p, s in list(self.parts())[:count])

    @property
    def static_prefix_digest(self) -> str:
        """sha256 (hex) of the static prefix rendering (`static_prefix_text()`).

        Memoised by the static segments' own digests, so prompts built per
        request around the same held segments do not re-hash the prefix.
        """
        count = len(self.static_segments())
        parts = list(self.parts())[:count]
        key = tuple((part, segment.role, segment.digest) for part, segment in parts)
        with _prefix_digests_lock:
            digest = _prefix_digests.get(key)
        if digest is None:
            digest = sha256_hex("".join(_render_segment(p, s) for p, s in parts))
            with _prefix_digests_lock:
                if len(_prefix_digests) >= _PREFIX_DIGEST_MEMO:
                    _prefix_digests.pop(next(iter(_prefix_digests)))
                _prefix_digests[key] = digest
        return digest

    def next_turn(self, reply: str, question: str | Segment) -> Prompt:
        """The prompt for the next turn: the old question and `reply` join the history.

        The rendering of this prompt is guaranteed to be a byte-exact prefix of
        the rendering of the returned one.
        """
        history = [
            Segment.session(m.text, role=m.role, name=m.name)
            if m.stability > Stability.SESSION
            else m
            for m in self.messages
        ]
        history.append(Segment.session(reply, role="assistant"))
        new_question = question if isinstance(question, Segment) else Segment.dynamic(question)
        following = Prompt(
            tools=self.tools,
            system=self.system,
            context=self.context,
            messages=[*history, new_question],
            name=self.name,
            sort_tools=self.sort_tools,
        )
        if not following.render_text().startswith(self.render_text()):
            raise LayoutError(
                "next_turn would rewrite earlier history; pass the reply and the new question only"
            )
        return following


_PREFIX_DIGEST_MEMO = 4096
# (part, role, segment digest) of each static segment -> digest of their rendering.
_prefix_digests: dict[tuple[tuple[str, str, str], ...], str] = {}
_prefix_digests_lock = threading.Lock()


def _render_segment(part: Part, segment: Segment) -> str:
    return f"<|{part}:{segment.role}|>\n{segment.text}\n"


def check_layout(parts: Iterable[tuple[Part, Segment]]) -> None:
    """Raise `LayoutError` if a segment is more stable than one before it."""
    least_stable: tuple[Part, Segment] | None = None
    for part, segment in parts:
        if least_stable is not None and segment.stability < least_stable[1].stability:
            earlier_part, earlier = least_stable
            raise LayoutError(
                f"{part} {segment.label} ({segment.stability.name}) comes after "
                f"{earlier_part} {earlier.label} ({earlier.stability.name}): everything after "
                f"a {earlier.stability.name} segment is re-computed whenever it changes, so the "
                f"{segment.stability.name} segment would never be cached. Move {segment.label} "
                f"before {earlier.label}, or mark it {earlier.stability.name} if it really "
                "changes that often."
            )
        if least_stable is None or segment.stability > least_stable[1].stability:
            least_stable = (part, segment)
