"""Content blocks in each provider's wire shape, and the pairing of tool calls with results.

Portable blocks (`Text`, `Image`, `Document`, `ToolCall`, `ToolResult`) are
rendered in the shape each official SDK documents:

| block | Anthropic Messages | OpenAI Chat | OpenAI Responses |
|---|---|---|---|
| Text | `text` | `text` part | `input_text` part |
| Image | `image` (base64 / url source) | `image_url` part (data URL) | `input_image` |
| Document | `document` (base64 / url / text source) | `file` part (`file_data`) | `input_file` |
| ToolCall | `tool_use` | assistant `tool_calls` | `function_call` item |
| ToolResult | `tool_result` | role "tool" message | `function_call_output` item |

A `Native` block of the provider being rendered is sent as it is (a shallow
copy when a breakpoint is added to it); one of another provider is first read
back into portable blocks (`portable`), and a kind that has no equivalent is a
`RenderError` naming it. `check_tool_pairs` enforces what every API requires:
each result answers an earlier call, and every call is answered before the
model's next turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .content import ContentBlock, Dialect, Document, Image, Native, Text, ToolCall, ToolResult
from .errors import RenderError

__all__ = ["check_tool_pairs", "portable", "tool_ids"]

_API_NAMES: Mapping[Dialect, str] = {
    "anthropic": "Anthropic Messages",
    "chat": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
}


def _split_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a `data:` URL, else None."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head, data


def _image_from_url(url: str, detail: str | None = None) -> Image:
    split = _split_data_url(url)
    if split is not None:
        return Image(data=split[1], media_type=split[0], detail=detail)
    return Image(url=url, detail=detail)


def _text_parts(content: Any) -> tuple[Text | Image, ...] | str:
    if isinstance(content, str) or content is None:
        return content or ""
    parts: list[Text | Image] = []
    for part in content:
        converted = portable(Native(part, "anthropic")) if isinstance(part, Mapping) else None
        for block in converted or ():
            if isinstance(block, (Text, Image)):
                parts.append(block)
    return tuple(parts)


def _anthropic_portable(item: Mapping[str, Any]) -> tuple[ContentBlock, ...] | None:
    kind = item.get("type")
    found = item.get("source")
    source: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if kind in ("text", "input_text", "output_text") and isinstance(item.get("text"), str):
        return (Text(item["text"]),)
    if kind == "image":
        if source.get("type") == "base64":
            return (Image(data=source.get("data"), media_type=source.get("media_type")),)
        if source.get("type") == "url":
            return (Image(url=source.get("url")),)
    if kind == "document":
        title = item.get("title")
        if source.get("type") == "base64":
            media = source.get("media_type", "application/pdf")
            return (Document(data=source.get("data"), media_type=media, title=title),)
        if source.get("type") == "url":
            return (Document(url=source.get("url"), title=title),)
        if source.get("type") == "text":
            return (Document(text=source.get("data"), media_type="text/plain", title=title),)
    if kind == "tool_use":
        return (ToolCall(item["id"], item["name"], item.get("input") or {}),)
    if kind == "tool_result":
        content = _text_parts(item.get("content"))
        return (ToolResult(item["tool_use_id"], content, bool(item.get("is_error"))),)
    return None


def _chat_portable(item: Mapping[str, Any], level: str) -> tuple[ContentBlock, ...] | None:
    if level == "message":
        blocks: list[ContentBlock] = []
        if item.get("role") == "tool":
            content = item.get("content")
            text = (
                content
                if isinstance(content, str)
                else "".join(p.get("text", "") for p in content or ())
            )
            return (ToolResult(item["tool_call_id"], text),)
        content = item.get("content")
        if isinstance(content, str) and content:
            blocks.append(Text(content))
        elif isinstance(content, list):
            for part in content:
                converted = _chat_portable(part, "block")
                if converted is None:
                    return None
                blocks.extend(converted)
        for call in item.get("tool_calls") or ():
            function = call.get("function", {})
            blocks.append(ToolCall(call["id"], function["name"], function.get("arguments", "")))
        return tuple(blocks)
    kind = item.get("type")
    if kind == "text":
        return (Text(item["text"]),)
    if kind == "image_url":
        image = item.get("image_url") or {}
        return (_image_from_url(image["url"], image.get("detail")),)
    if kind == "file":
        file = item.get("file") or {}
        split = _split_data_url(str(file.get("file_data", "")))
        if split is not None:
            return (Document(data=split[1], media_type=split[0], filename=file.get("filename")),)
    return None


def _responses_portable(item: Mapping[str, Any], level: str) -> tuple[ContentBlock, ...] | None:
    kind = item.get("type")
    if kind in ("input_text", "output_text"):
        return (Text(item["text"]),)
    if kind == "input_image" and isinstance(item.get("image_url"), str):
        return (_image_from_url(item["image_url"], item.get("detail")),)
    if kind == "input_file":
        if isinstance(item.get("file_url"), str):
            return (Document(url=item["file_url"], filename=item.get("filename")),)
        split = _split_data_url(str(item.get("file_data", "")))
        if split is not None:
            return (Document(data=split[1], media_type=split[0], filename=item.get("filename")),)
    if kind == "function_call":
        return (ToolCall(item["call_id"], item["name"], item.get("arguments", "")),)
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        return (ToolResult(item["call_id"], text),)
    if level == "message" and isinstance(item.get("role"), str):
        content = item.get("content")
        if isinstance(content, str):
            return (Text(content),)
        blocks: list[ContentBlock] = []
        for part in content or ():
            converted = _responses_portable(part, "block")
            if converted is None:
                return None
            blocks.extend(converted)
        return tuple(blocks)
    return None


def portable(native: Native) -> tuple[ContentBlock, ...] | None:
    """`native` as portable blocks, or None when it has no equivalent elsewhere."""
    try:
        if native.dialect == "anthropic":
            return _anthropic_portable(native.item)
        if native.dialect == "chat":
            return _chat_portable(native.item, native.level)
        return _responses_portable(native.item, native.level)
    except (KeyError, TypeError) as error:
        raise RenderError(
            f"{_API_NAMES[native.dialect]} {native.kind} item is missing {error}: "
            f"{json.dumps(native.item)[:120]}",
            provider=native.dialect,
        ) from error


def converted(block: ContentBlock, dialect: Dialect) -> tuple[ContentBlock, ...]:
    """`block` itself, or a foreign native block read back into portable blocks."""
    if not isinstance(block, Native) or block.dialect == dialect:
        return (block,)
    both_text = block.dialect != "responses" and dialect != "responses"
    if both_text and block.kind == "text" and set(block.item) <= {"type", "text", "cache_control"}:
        return (Text(block.item["text"]),)
    found = portable(block)
    if found is None:
        raise RenderError(
            f"{_API_NAMES[block.dialect]} block {block.kind!r} has no {_API_NAMES[dialect]} "
            f"equivalent: render this prompt for {_API_NAMES[block.dialect]}, or give the "
            "content as prefixkit.sdk blocks (Text, Image, Document, ToolCall, "
            "ToolResult), which render for every provider",
            provider=dialect,
            segment=block.kind,
        )
    return found


def tool_ids(block: ContentBlock) -> tuple[list[tuple[str, str]], list[str]]:
    """The (id, name) of the tool calls and the ids answered by the results in `block`."""
    if isinstance(block, ToolCall):
        return [(block.id, block.name)], []
    if isinstance(block, ToolResult):
        return [], [block.call_id]
    if not isinstance(block, Native):
        return [], []
    item = block.item
    kind = item.get("type")
    if block.dialect == "anthropic":
        if kind == "tool_use":
            return [(str(item.get("id")), str(item.get("name")))], []
        if kind == "tool_result":
            return [], [str(item.get("tool_use_id"))]
    elif block.dialect == "chat" and block.level == "message":
        calls = [
            (str(call.get("id")), str(call.get("function", {}).get("name")))
            for call in item.get("tool_calls") or ()
        ]
        answered = [str(item["tool_call_id"])] if item.get("role") == "tool" else []
        return calls, answered
    elif block.dialect == "responses":
        if kind == "function_call":
            return [(str(item.get("call_id")), str(item.get("name")))], []
        if kind == "function_call_output":
            return [], [str(item.get("call_id"))]
    return [], []


def check_tool_pairs(turns: Sequence[tuple[str, Iterable[ContentBlock]]], api: str) -> None:
    """Raise `RenderError` unless every tool result answers an earlier call and every call
    is answered before the model's next turn (and before the request ends).

    `turns` are (role, blocks) of the conversation in order.
    """
    pending: dict[str, str] = {}
    seen: set[str] = set()
    previous_role = ""
    for role, blocks in turns:
        if role == "assistant" and previous_role != "assistant" and pending:
            _unanswered(pending, api, "before the model's next turn")
        for block in blocks:
            calls, answered = tool_ids(block)
            for call_id, name in calls:
                pending[call_id] = name
                seen.add(call_id)
            for call_id in answered:
                if call_id not in seen:
                    raise RenderError(
                        f"tool result for call {call_id!r} answers no earlier tool call: {api} "
                        "needs the assistant turn with that call first; keep the model's reply "
                        "(with its tool calls) in the history before the results",
                        segment=f"tool result {call_id}",
                    )
                pending.pop(call_id, None)
        previous_role = role
    if pending:
        _unanswered(pending, api, "at the end of the request")


def _unanswered(pending: Mapping[str, str], api: str, where: str) -> None:
    calls = ", ".join(f"{name} ({call_id})" for call_id, name in pending.items())
    raise RenderError(
        f"tool call(s) {calls} have no result {where}: {api} requires an answer to every call; "
        "append a ToolResult (or the provider's result block) for each",
        segment=", ".join(f"tool call {call_id}" for call_id in pending),
    )
