"""A prompt: segments in provider order (tools, system, context, messages).

Construction checks the layout: stability never decreases along that order,
so the cacheable prefix (everything up to the last STATIC/VERSIONED segment)
is one unbroken run at the start. `next_turn` grows a conversation so that the
previous rendering is always a byte-exact prefix of the next one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import marshal
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .canonical import canonical_json, sha256_hex
from .content import ContentBlock, Dialect, Native, as_blocks, turn_content
from .errors import CanonicalError, LayoutError
from .segment import Role, Segment, Stability

__all__ = ["Part", "Prompt", "ToolSpec"]

Part = Literal["tools", "system", "context", "messages"]
ToolSpec = Mapping[str, Any]
MessageLike = Segment | Mapping[str, Any]


_TOOL_MEMO = 1024
# A tool definition's content -> its segment. Keyed by content, not by the dict:
# apps rebuild equal tool dicts per call, and a dict mutated in place has new
# content, so a stale form is never served.
_tool_segments: dict[bytes, Segment] = {}
_tool_lock = threading.Lock()
# marshal's version 0 writes every str the same way (no interning or reference
# flags), so equal plain data (dict, list, str, int, float, bool, None, in the
# order written) always gives equal bytes; it is several times faster than
# json.dumps and refuses every other type, subclasses included.
_MARSHAL_VERSION = 0


def _tool_key(tool: dict[str, Any]) -> bytes | None:
    """The tool's content as bytes, or None when it is not plain data."""
    try:
        return marshal.dumps(tool, _MARSHAL_VERSION)
    except ValueError:
        return None  # the canonical path raises the precise CanonicalError, or converts it


def _tool_segment(tool: ToolSpec | Segment) -> Segment:
    """`_new_tool_segment`, memoised by the definition's content."""
    if isinstance(tool, Segment) or not isinstance(tool, dict):
        return _new_tool_segment(tool)
    key = _tool_key(tool)
    if key is None:
        return _new_tool_segment(tool)
    segment = _tool_segments.get(key)
    if segment is None:
        segment = _new_tool_segment(tool)
        with _tool_lock:
            if len(_tool_segments) >= _TOOL_MEMO:
                _tool_segments.pop(next(iter(_tool_segments)), None)
            _tool_segments[key] = segment
    return segment


def _new_tool_segment(tool: ToolSpec | Segment) -> Segment:
    """A tool definition as a STATIC segment named by its function name or built-in type.

    Built-in tools (OpenAI `{"type": "web_search"}`, `file_search`,
    `code_interpreter`; Anthropic server tools such as
    `{"type": "web_search_20250305", "name": "web_search"}`) have no JSON
    schema; they are named by their `name` when they have one, else by
    `type`, and sent unchanged.
    """
    if isinstance(tool, Segment):
        return tool
    if not isinstance(tool, Mapping):
        raise CanonicalError(
            f"tool definition {tool!r} is not a dict: give the tool's JSON", value=tool
        )
    function = tool.get("function")
    name = tool.get("name") or (function.get("name") if isinstance(function, Mapping) else None)
    if name is None and isinstance(tool.get("type"), str) and tool["type"] != "function":
        name = tool["type"]
    if not isinstance(name, str) or not name:
        raise CanonicalError(
            f"tool definition {canonical_json(dict(tool))[:80]} has no 'name': "
            "give every function tool a unique name (built-in tools need their 'type')",
            value=tool,
        )
    return Segment.static(dict(tool), role="system", name=name)


def _system_segment(item: str | Segment | Mapping[str, Any]) -> Segment:
    """Text or an Anthropic system text block (`{"type": "text", "text", "cache_control"}`)."""
    if isinstance(item, Segment):
        return item
    if isinstance(item, Mapping):
        if item.get("type") != "text" or not isinstance(item.get("text"), str):
            raise CanonicalError(
                f"system block {canonical_json(dict(item))[:80]} is not a text block: system "
                "content is text (give a string, a Segment or {'type': 'text', 'text': ...})",
                value=item,
            )
        return Segment.static(item["text"], role="system", cache_control=item.get("cache_control"))
    return Segment.static(item, role="system")


def _context_segment(item: str | Segment) -> Segment:
    return item if isinstance(item, Segment) else Segment.session(item, role="user")


_ROLE_OF: Mapping[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "user",
}
_BLOCK_MESSAGE_KEYS = frozenset({"role", "content"})


def _item_role(item: Mapping[str, Any]) -> Role:
    """The role of a Responses input item without one: calls are the model's, outputs the app's."""
    kind = str(item.get("type", ""))
    if kind.endswith("_output") or kind in ("mcp_approval_response", "item_reference"):
        return "user"
    return "assistant"


def _native_dialect(item: Mapping[str, Any], blocks: tuple[ContentBlock, ...]) -> Dialect:
    if "type" in item or any(isinstance(b, Native) and b.dialect == "responses" for b in blocks):
        return "responses"
    if any(isinstance(b, Native) and b.dialect == "anthropic" for b in blocks):
        return "anthropic"
    return "chat"


def _message_segment(raw: MessageLike) -> Segment:
    """A conversation message as a SESSION segment (history is shared by the next requests).

    Text content is kept exactly as given. A list of blocks becomes a
    structured segment; a message the renderers cannot rebuild from its
    blocks alone (an OpenAI Chat message with `tool_calls` or role "tool", a
    Responses item such as `function_call`, a message with fields besides
    role and content) is kept whole as a `Native` message and sent unaltered
    to its own API.
    """
    if isinstance(raw, Segment):
        return raw
    dump = getattr(raw, "model_dump", None)
    item: Mapping[str, Any] = (
        dump(mode="json", by_alias=True, exclude_unset=True) if callable(dump) else raw
    )
    if not isinstance(item, Mapping):
        raise CanonicalError(f"message {raw!r} is not a dict or a Segment", value=raw)
    role = item.get("role")
    content = item.get("content")
    marker = item.get("cache_control")
    if role is None and isinstance(item.get("type"), str):
        native = Native(copy.deepcopy(dict(item)), "responses", "message")
        return Segment.session([native], role=_item_role(item))
    if not isinstance(role, str) or role not in _ROLE_OF:
        raise CanonicalError(
            f"message {canonical_json(dict(item))[:80]} needs role 'user', 'assistant', "
            "'system', 'developer' or 'tool' (or a Responses item 'type')",
            value=role,
            path="$.role",
        )
    role_ = _ROLE_OF[role]
    if isinstance(content, str) and set(item) <= {"role", "content", "cache_control"}:
        if role == "tool" or role == "developer":
            native = Native(copy.deepcopy(dict(item)), "chat", "message")
            return Segment.session([native], role=role_)
        return Segment.session(content, role=role_, cache_control=marker)
    blocks = as_blocks(content) if isinstance(content, (list, tuple)) else ()
    if set(item) <= _BLOCK_MESSAGE_KEYS and blocks and role in ("user", "assistant", "system"):
        return Segment.session(list(blocks), role=role_)
    if content is not None and not isinstance(content, (str, list, tuple)):
        raise CanonicalError(
            f"message content must be text or a list of blocks, got {type(content).__name__}",
            value=content,
            path="$.content",
        )
    native = Native(copy.deepcopy(dict(item)), _native_dialect(item, blocks), "message")
    return Segment.session([native], role=role_)


def _as_tuple(items: Iterable[Any] | str | Segment | None) -> tuple[Any, ...]:
    if items is None:
        return ()
    if type(items) is list or type(items) is tuple:  # the usual case, without an ABC check
        return tuple(items)
    if isinstance(items, (str, Segment, Mapping)):
        return (items,)
    return tuple(items)


@dataclass(frozen=True)
class Prompt:
    """An LLM request's input, laid out static-first.

    - `tools`: JSON tool schemas (dicts with a `name`) and built-in tools
      (dicts with a `type`, such as `{"type": "web_search"}`); canonicalised
      and kept in name order unless `sort_tools=False`, so a list built from
      a set still renders identically;
    - `system`: text or segments (plain text counts as STATIC);
    - `context`: documents shared by a session (plain text counts as SESSION);
    - `messages`: the conversation; dicts `{"role", "content"}` count as SESSION
      history, the new question is usually `Segment.dynamic(...)`. Content
      may be text (kept as given) or blocks in any provider's documented
      shape, and whole provider messages (Chat `tool_calls` and role "tool"
      messages, Responses `function_call` / `function_call_output` items)
      are accepted and sent unaltered to their own API (the portable blocks
      are `Text`, `Image`, `Document`, `ToolCall`, `ToolResult`; `Native`
      holds a provider's own).
    - `name`: identifies the prompt for the static-prefix guard (`StaticPrefixGuard`).

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
        system: Iterable[str | Segment | Mapping[str, Any]] | str | Segment | None = None,
        context: Iterable[str | Segment] | str | Segment | None = None,
        messages: Iterable[MessageLike] | None = None,
        name: str | None = None,
        sort_tools: bool = True,
    ) -> None:
        tool_segments = tuple(_tool_segment(t) for t in _as_tuple(tools))
        if sort_tools:
            tool_segments = tuple(sorted(tool_segments, key=lambda s: (s.name or "", s.text)))
        names = [s.name for s in tool_segments if s.name is not None]
        duplicates = (
            sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(names) else []
        )
        if duplicates:
            raise CanonicalError(
                f"tool names must be unique; repeated: {', '.join(duplicates)}", value=duplicates
            )
        object.__setattr__(self, "tools", tool_segments)
        object.__setattr__(self, "system", tuple(_system_segment(s) for s in _as_tuple(system)))
        object.__setattr__(self, "context", tuple(_context_segment(s) for s in _as_tuple(context)))
        object.__setattr__(
            self, "messages", tuple(_message_segment(m) for m in _as_tuple(messages))
        )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "sort_tools", sort_tools)
        parts: tuple[tuple[Part, Segment], ...] = (
            *(("tools", s) for s in self.tools),
            *(("system", s) for s in self.system),
            *(("context", s) for s in self.context),
            *(("messages", s) for s in self.messages),
        )
        check_layout(parts)
        static = next(
            (i for i, (_, s) in enumerate(parts) if s.stability > Stability.VERSIONED), len(parts)
        )
        # Derived once: a Prompt is immutable, and renderers walk it several times.
        object.__setattr__(self, "_parts", parts)
        object.__setattr__(
            self, "_static_key", tuple((part, s.role, s.digest) for part, s in parts[:static])
        )

    def parts(self) -> Iterator[tuple[Part, Segment]]:
        """Every segment with the part it belongs to, in provider order."""
        parts: tuple[tuple[Part, Segment], ...] = self.__dict__["_parts"]
        return iter(parts)

    def segments(self) -> list[Segment]:
        """Every segment in provider order."""
        return [segment for _, segment in self.parts()]

    def tool_dicts(self) -> list[dict[str, Any]]:
        """The tool schemas as dicts, in render order."""
        return [json.loads(segment.text) for segment in self.tools]

    def static_segments(self) -> list[Segment]:
        """The leading run of STATIC and VERSIONED segments: the cacheable core."""
        parts: tuple[tuple[Part, Segment], ...] = self.__dict__["_parts"]
        return [segment for _, segment in parts[: len(self.__dict__["_static_key"])]]

    def render_text(self) -> str:
        """Provider-neutral canonical rendering; used for digests and prefix checks."""
        return "".join(_render_segment(part, s) for part, s in self.parts())

    def static_prefix_text(self) -> str:
        """The canonical rendering of `static_segments()` (a prefix of `render_text()`).

        Memoised by the static segments' digests: prompts built per request
        around the same held segments get the same string object back, so
        nothing re-joins or re-hashes it.
        """
        key: _StaticKey = self.__dict__["_static_key"]
        with _prefix_lock:
            text = _prefix_texts.get(key)
        if text is None:
            text = "".join(_render_segment(p, s) for p, s in self.static_parts())
            with _prefix_lock:
                if len(_prefix_texts) >= _PREFIX_TEXT_MEMO:
                    _prefix_texts.pop(next(iter(_prefix_texts)))
                _prefix_texts[key] = text
        return text

    def static_parts(self) -> list[tuple[Part, Segment]]:
        """`parts()` of the static segments only."""
        parts: tuple[tuple[Part, Segment], ...] = self.__dict__["_parts"]
        return list(parts[: len(self.__dict__["_static_key"])])

    @property
    def static_prefix_digest(self) -> str:
        """sha256 (hex) of the static prefix rendering (`static_prefix_text()`).

        Memoised by the static segments' own digests, so prompts built per
        request around the same held segments do not re-hash the prefix.
        """
        key: _StaticKey = self.__dict__["_static_key"]
        with _prefix_lock:
            digest = _prefix_digests.get(key)
        if digest is None:
            digest = sha256_hex("".join(_render_segment(p, s) for p, s in self.static_parts()))
            with _prefix_lock:
                if len(_prefix_digests) >= _PREFIX_DIGEST_MEMO:
                    _prefix_digests.pop(next(iter(_prefix_digests)))
                _prefix_digests[key] = digest
        return digest

    def next_turn(
        self,
        reply: str | Segment | Iterable[Any],
        question: str | Segment | Iterable[Any] | None,
    ) -> Prompt:
        """The prompt for the next turn: the old question and `reply` join the history.

        `reply` is the assistant's text, or its content blocks (Anthropic's
        `message.content`, a `ToolCall`, ...); `question` is the next user
        text, a segment, or blocks (the `ToolResult`s answering the reply's
        tool calls), a message dict (``{"role": "user", "content": ...}``, read as
        `Prompt(messages=...)` reads one), or None to add the reply alone. The rendering of this
        prompt is guaranteed to be a byte-exact prefix of the rendering of the
        returned one.
        """
        history = [
            dataclasses.replace(m, stability=Stability.SESSION)
            if m.stability > Stability.SESSION
            else m
            for m in self.messages
        ]
        history.append(
            reply
            if isinstance(reply, Segment)
            else Segment.session(turn_content(reply), role="assistant")
        )
        added: list[Segment] = []
        if isinstance(question, Segment):
            added.append(question)
        elif isinstance(question, Mapping) and "role" in question:
            # a message, as `Prompt(messages=...)` reads one: the latest turn, so DYNAMIC
            message = _message_segment(question)
            added.append(dataclasses.replace(message, stability=Stability.DYNAMIC))
        elif question is not None:
            added.append(Segment.dynamic(turn_content(question)))
        following = Prompt(
            tools=self.tools,
            system=self.system,
            context=self.context,
            messages=[*history, *added],
            name=self.name,
            sort_tools=self.sort_tools,
        )
        if not following.render_text().startswith(self.render_text()):
            before = list(self.parts())
            position = next(
                (
                    index
                    for index, (old, new) in enumerate(zip(before, following.parts(), strict=False))
                    if _render_segment(*old) != _render_segment(*new)
                ),
                len(before) - 1,
            )
            raise LayoutError(
                "next_turn would rewrite earlier history; pass the reply and the new question only",
                label=before[position][1].label,
                position=position,
            )
        return following


_PREFIX_DIGEST_MEMO = 4096
_PREFIX_TEXT_MEMO = 256
_StaticKey = tuple[tuple[str, str, str], ...]
# (part, role, segment digest) of each static segment -> their rendering, and its digest.
_prefix_digests: dict[_StaticKey, str] = {}
_prefix_texts: dict[_StaticKey, str] = {}
_prefix_lock = threading.Lock()


def _render_segment(part: Part, segment: Segment) -> str:
    return f"<|{part}:{segment.role}|>\n{segment.text}\n"


def check_layout(parts: Iterable[tuple[Part, Segment]]) -> None:
    """Raise `LayoutError` if a segment is more stable than one before it."""
    least_stable: tuple[int, Part, Segment] | None = None
    for position, (part, segment) in enumerate(parts):
        if least_stable is not None and segment.stability < least_stable[2].stability:
            earlier_position, earlier_part, earlier = least_stable
            raise LayoutError(
                f"{part} {segment.label} ({segment.stability.name}) comes after "
                f"{earlier_part} {earlier.label} ({earlier.stability.name}): everything after "
                f"a {earlier.stability.name} segment is re-computed whenever it changes, so the "
                f"{segment.stability.name} segment would never be cached. Move {segment.label} "
                f"before {earlier.label}, or mark it {earlier.stability.name} if it really "
                "changes that often.",
                label=segment.label,
                position=position,
                earlier_label=earlier.label,
                earlier_position=earlier_position,
            )
        if least_stable is None or segment.stability > least_stable[2].stability:
            least_stable = (position, part, segment)
