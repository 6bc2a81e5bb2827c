"""Structured content: what a segment carries besides plain text.

Two kinds of block:

- portable blocks, rendered in each provider's own shape: `Text`, `Image`
  (base64 or URL), `Document` (PDF as base64 or URL, or plain text),
  `ToolCall` (the model asks for a tool) and `ToolResult` (the app's answer);
- `Native`: a provider's own block or message, exactly as the official SDK
  documents it (Anthropic `tool_use`, `image`, `document`, server tool
  blocks; an OpenAI Chat message with `tool_calls` or role "tool", an
  `image_url` part; a Responses `function_call`, `function_call_output`,
  `input_image`, `input_file` item). It is sent to its own API unaltered (the
  same dict, every field, the caller's base64 never re-encoded); another
  provider's renderer converts the common kinds (text, images, documents, tool
  calls and results) and names anything it cannot.

`as_blocks` reads what callers write (dicts in any provider's shape, objects of
the official SDKs such as `response.content` or `response.output` items,
portable blocks) into a tuple of blocks. `canonical_blocks` is the hashing
form: canonical JSON (sorted keys), so a digest does not depend on dict key
order; nothing is ever rendered from it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .canonical import canonical_json
from .errors import CanonicalError, RenderError

__all__ = [
    "ContentBlock",
    "Dialect",
    "Document",
    "Image",
    "Native",
    "Text",
    "ToolCall",
    "ToolResult",
    "as_blocks",
    "canonical_blocks",
    "is_block_list",
    "turn_content",
]

Dialect = Literal["anthropic", "chat", "responses"]

_ANTHROPIC_TYPES = frozenset(
    {
        "image",
        "document",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "search_result",
        "thinking",
        "redacted_thinking",
        # beta blocks (client.beta.messages), sent back exactly as the response had them
        "advisor_tool_result",
        "tool_addition",
        "tool_removal",
        "mcp_tool_listing",
        "fallback",
    }
)
# A type both Anthropic (beta) and OpenAI Responses document; told apart by shape.
_SHARED_TYPES = frozenset({"compaction"})
# Fields only an Anthropic beta `compaction` block has (OpenAI's item has type,
# encrypted_content and id).
_ANTHROPIC_COMPACTION_FIELDS = frozenset({"content", "signature", "tool_changes", "cache_control"})
# Fields the official SDKs add to parsed results (`.parse()`, `.stream()`) that
# are not part of the API; the SDKs drop them when a result is sent back.
_SDK_ONLY_FIELDS = frozenset({"parsed", "parsed_arguments", "parsed_output"})
_CHAT_TYPES = frozenset({"image_url", "input_audio", "file", "refusal"})
_RESPONSES_TYPES = frozenset(
    {
        "input_text",
        "input_image",
        "input_file",
        "input_audio",
        "output_text",
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "item_reference",
        "compaction",
    }
)
_KNOWN_TYPES = _ANTHROPIC_TYPES | _CHAT_TYPES | _RESPONSES_TYPES | {"text"}
# Responses content parts; every other Responses type is an input item of its own.
_RESPONSES_PARTS = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text"}
)


@dataclass(frozen=True)
class Text:
    """Plain text, sent exactly as given (a text block or part in every API)."""

    text: str


@dataclass(frozen=True)
class Image:
    """An image: base64 `data` with its `media_type`, or a `url`.

    `detail` ("low", "high", "auto") is OpenAI's; Anthropic has none.
    """

    data: str | None = None
    media_type: str | None = None
    url: str | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise CanonicalError(
                "Image needs exactly one of data=<base64> or url=<https://...>",
                value={"data": self.data, "url": self.url},
            )
        if self.data is not None and not self.media_type:
            raise CanonicalError(
                "Image(data=...) needs media_type='image/png' (or jpeg, gif, webp)",
                value=self.media_type,
            )


@dataclass(frozen=True)
class Document:
    """A document: a PDF as base64 `data` or a `url`, or plain `text`.

    `title` is shown to Anthropic models; `filename` names the file for OpenAI.
    """

    data: str | None = None
    url: str | None = None
    text: str | None = None
    media_type: str = "application/pdf"
    title: str | None = None
    filename: str | None = None

    def __post_init__(self) -> None:
        given = [value for value in (self.data, self.url, self.text) if value is not None]
        if len(given) != 1:
            raise CanonicalError(
                "Document needs exactly one of data=<base64>, url=... or text=...",
                value={"data": self.data, "url": self.url, "text": self.text},
            )


@dataclass(frozen=True)
class ToolCall:
    """The model's request to run tool `name` with `arguments`.

    `arguments` is a dict, or the JSON text a provider returned (OpenAI sends
    a string; it is passed back byte for byte).
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id or not self.name:
            raise CanonicalError(
                "ToolCall needs the provider's call id and the tool name",
                value={"id": self.id, "name": self.name},
            )
        if not isinstance(self.arguments, (str, Mapping)):
            raise CanonicalError(
                f"ToolCall {self.id} ({self.name}) has arguments of type "
                f"{type(self.arguments).__name__}: give a dict, or the JSON text the provider "
                "returned ({} for none)",
                value=self.arguments,
            )

    def argument_dict(self) -> dict[str, Any]:
        """The arguments as a dict (parsed when they are JSON text)."""
        if isinstance(self.arguments, str):
            try:
                parsed = json.loads(self.arguments or "{}")
            except ValueError as error:
                raise RenderError(
                    f"tool call {self.id} ({self.name}) has arguments {self.arguments[:60]!r}, "
                    f"which are not JSON ({error}): an API that takes them as an object "
                    "(Anthropic's tool_use input) needs them parsed; pass the call back to the "
                    "API that made it, or correct the text",
                    segment=f"tool call {self.id}",
                ) from None
            if not isinstance(parsed, dict):
                raise RenderError(
                    f"tool call {self.id} ({self.name}) has arguments {self.arguments[:60]!r}, "
                    "not a JSON object",
                    segment=f"tool call {self.id}",
                )
            return parsed
        return dict(self.arguments)

    def argument_text(self) -> str:
        """The arguments as JSON text (the provider's own text when it sent one; a dict's
        keys in the order written, as every other JSON sent)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return canonical_json(dict(self.arguments), sort_keys=False)


@dataclass(frozen=True)
class ToolResult:
    """The app's answer to the tool call `call_id`: text, or text and image blocks."""

    call_id: str
    content: str | tuple[Text | Image, ...] = ""
    is_error: bool = False

    def __post_init__(self) -> None:
        if not self.call_id:
            raise CanonicalError(
                "ToolResult needs the call_id of the ToolCall it answers", value=self.call_id
            )
        if not isinstance(self.content, str):
            if not isinstance(self.content, Iterable):
                raise CanonicalError(
                    f"ToolResult {self.call_id} has content of type "
                    f"{type(self.content).__name__}: give text, or Text and Image blocks "
                    '("" for an empty result)',
                    value=self.content,
                )
            object.__setattr__(self, "content", tuple(self.content))


@dataclass(frozen=True, eq=False)
class Native:
    """A provider's own block or message, sent unaltered to its `dialect`'s API.

    `level` is "block" for a content block (an Anthropic `tool_use`, a Chat
    `image_url` part) and "message" for a whole message or input item (a Chat
    message with `tool_calls`, a Responses `function_call`).
    """

    item: Mapping[str, Any]
    dialect: Dialect
    level: Literal["block", "message"] = "block"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Native)
            and (self.dialect, self.level) == (other.dialect, other.level)
            and canonical_json(self.item) == canonical_json(other.item)
        )

    def __hash__(self) -> int:
        return hash((self.dialect, self.level, canonical_json(self.item)))

    @property
    def kind(self) -> str:
        """The item's `type` (or `role` for a message without one)."""
        return str(self.item.get("type") or self.item.get("role") or "?")


ContentBlock = Text | Image | Document | ToolCall | ToolResult | Native


def _sdk_module(value: Any) -> str:
    """ "anthropic" or "openai" for an object of an official SDK, else ""."""
    module = type(value).__module__
    for sdk in ("anthropic", "openai"):
        if module == sdk or module.startswith(sdk + "."):
            return sdk
    return ""


def _as_exclude(spec: Any) -> dict[Any, Any]:
    if isinstance(spec, Mapping):
        return dict(spec)
    return dict.fromkeys(spec or (), True)


def _merged(one: dict[Any, Any], other: dict[Any, Any]) -> dict[Any, Any]:
    merged = dict(one)
    for key, value in other.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = True if value is True or merged.get(key) is True else value
    return merged


def _sdk_exclude(model: Any) -> dict[Any, Any]:
    """The pydantic `exclude` of the SDK-only fields of `model` and the models inside it."""
    fields = getattr(type(model), "model_fields", None)
    if not isinstance(fields, Mapping) or not _sdk_module(model):
        return {}
    exclude: dict[Any, Any] = {}
    for name in model.model_fields_set:
        if name in _SDK_ONLY_FIELDS:
            exclude[name] = True
            continue
        value = getattr(model, name, None)
        if isinstance(value, (list, tuple)):
            inner = {index: _sdk_exclude(item) for index, item in enumerate(value)}
            inner = {index: spec for index, spec in inner.items() if spec}
        else:
            inner = _sdk_exclude(value)
        if inner:
            exclude[name] = inner
    return exclude


def _plain(value: Any) -> Any:
    """A dict from an official SDK object (pydantic model), as the SDK sends it back.

    That is the SDKs' own request transform (`model_dump(mode="json",
    exclude_unset=True)` less the model's `__api_exclude__`), without the fields
    the SDKs add to parsed results (`parsed`, `parsed_arguments`,
    `parsed_output`), which are not part of any API.
    """
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        return value
    exclude = _merged(_as_exclude(getattr(value, "__api_exclude__", None)), _sdk_exclude(value))
    return dump(mode="json", by_alias=True, exclude_unset=True, exclude=exclude or None)


def _responses_item(value: Any) -> dict[str, Any]:
    """A Responses output item as the openai SDK sends it back as an input item.

    As the SDK's own tool runner replays output (`openai.lib.responses_tool_runner`):
    `created_by` (set by the server) is dropped, and a `function_call` without an
    `id` has none.
    """
    item = dict(_plain(value))
    item.pop("created_by", None)
    if item.get("type") == "function_call" and item.get("id") is None:
        item.pop("id", None)
    return item


_CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def _reply_kind(value: Any) -> str | None:
    """What a whole reply (not a single block) is, or None when `value` is not one.

    "message": an Anthropic `Message` (`messages.create`, `.parse`, a stream's
    final message, the beta ones); "chat": an OpenAI Chat message
    (`completion.choices[0].message`); "completion": a whole `ChatCompletion`;
    "response": an OpenAI Responses `Response`. Dicts of those shapes (a
    `model_dump()`) count too.
    """
    item = _plain(value) if _sdk_module(value) else value
    if not isinstance(item, Mapping):
        return None
    if item.get("object") == "chat.completion" and isinstance(item.get("choices"), list):
        return "completion"
    if item.get("object") == "response" and isinstance(item.get("output"), list):
        return "response"
    if (
        item.get("type") == "message"
        and item.get("role") == "assistant"
        and isinstance(item.get("content"), list)
        and "stop_reason" in item
    ):
        return "message"
    if _sdk_module(value) == "openai" and type(value).__module__.startswith("openai.types.chat"):
        return "chat" if item.get("role") in _CHAT_ROLES else None
    # a dict: only the shape of a Chat reply (a message's model_dump() always has
    # "refusal"), so a list of role/content dicts given as data stays data
    if (
        "type" not in item
        and item.get("role") == "assistant"
        and ("refusal" in item or "tool_calls" in item)
    ):
        return "chat"
    return None


def _reply_blocks(value: Any, index: int) -> list[ContentBlock]:
    """The blocks of a whole reply (see `_reply_kind`), converted as its SDK sends them."""
    kind = _reply_kind(value)
    is_object = bool(_sdk_module(value))
    if kind == "message":
        content = value.content if is_object else value["content"]
        return list(as_blocks(content, dialect="anthropic"))
    if kind == "response":
        output = value.output if is_object else value["output"]
        return [
            Native(copy.deepcopy(_responses_item(item)), "responses", "message") for item in output
        ]
    if kind == "completion":
        choices = value.choices if is_object else value["choices"]
        if len(choices) != 1:
            raise CanonicalError(
                f"content {index} is a ChatCompletion with {len(choices)} choices: pass the "
                "message of the choice you keep (completion.choices[i].message)",
                value=len(choices),
                path=f"$[{index}].choices",
            )
        choice = choices[0]
        return _reply_blocks(choice.message if is_object else choice["message"], index)
    item = _plain(value)
    return [Native(copy.deepcopy(dict(item)), "chat", "message")]


def turn_content(value: Any) -> Any:
    """What a turn holds, read from what a caller passes as a whole turn.

    Text stays text. A whole reply of an official client (an Anthropic
    `Message`, an OpenAI Chat message or `ChatCompletion`, a Responses
    `Response`, from `create`, `parse` or a stream's final result, or their
    `model_dump()`) becomes its blocks, converted as its SDK sends them back.
    Any other iterable becomes a list (of blocks); another mapping is returned
    as it is (JSON data). Any other object of an official SDK is refused with a
    `CanonicalError` rather than serialised: pydantic models iterate as
    (field, value) pairs, which would be sent as text.
    """
    if isinstance(value, str):
        return value
    if _reply_kind(value) is not None:
        return _reply_blocks(value, 0)
    if _sdk_module(value):
        if isinstance(_plain(value), Mapping) and _plain(value).get("type") in _KNOWN_TYPES:
            return [value]
        raise CanonicalError(
            f"{type(value).__name__} is not a turn: pass the reply itself (an Anthropic "
            "Message or its .content, completion.choices[0].message, a Response or its "
            ".output), or its text",
            value=type(value).__name__,
        )
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        return value
    return list(value)


def _dialect_of_block(block: Mapping[str, Any], sdk: str = "") -> Dialect | None:
    kind = block.get("type")
    if kind in _SHARED_TYPES:
        anthropic = sdk == "anthropic" or (
            sdk != "openai" and bool(_ANTHROPIC_COMPACTION_FIELDS & set(block))
        )
        return "anthropic" if anthropic else "responses"
    if kind in _ANTHROPIC_TYPES:
        return "anthropic"
    if kind in _CHAT_TYPES:
        return "chat"
    if kind in _RESPONSES_TYPES:
        return "responses"
    return None


def _is_plain_text(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and set(block) <= {"type", "text"}


def _is_block(item: Any) -> bool:
    if isinstance(item, (Text, Image, Document, ToolCall, ToolResult, Native)):
        return True
    if _reply_kind(item) is not None:
        return True
    plain = _plain(item)
    return isinstance(plain, Mapping) and plain.get("type") in _KNOWN_TYPES


def is_block_list(content: Any) -> bool:
    """Whether `content` is a list of content blocks (not JSON data to serialise)."""
    if isinstance(content, (str, bytes, Mapping)) or not isinstance(content, Iterable):
        return False
    items = list(content)
    return bool(items) and all(_is_block(item) for item in items)


def as_blocks(
    content: Iterable[Any], *, dialect: Dialect | None = None
) -> tuple[ContentBlock, ...]:
    """Blocks from portable blocks, provider dicts or official SDK objects.

    A dict is kept whole as a `Native` block of the provider whose shape it
    has (a plain `{"type": "text", "text": ...}` becomes `Text`; a text block
    with more fields, such as citations or a caller's `cache_control`, stays
    native, in `dialect` when given). Official SDK objects are converted as
    their SDK sends them back (see `_plain`); a whole reply among the items (an
    Anthropic `Message`, a Chat message, a `Response`) gives its blocks. Dicts
    are deep-copied, so later changes to the caller's objects cannot change a
    segment.
    """
    blocks: list[ContentBlock] = []
    for index, raw in enumerate(content):
        if isinstance(raw, (Text, Image, Document, ToolCall, ToolResult, Native)):
            blocks.append(raw)
            continue
        if _reply_kind(raw) is not None:
            blocks.extend(_reply_blocks(raw, index))
            continue
        sdk = _sdk_module(raw)
        item = _responses_item(raw) if sdk == "openai" else _plain(raw)
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            raise CanonicalError(
                f"content block {index} is {type(raw).__name__}, not a block: give a dict with "
                "a 'type' (a provider's block) or a prefixkit.sdk block (Text, Image, "
                "Document, ToolCall, ToolResult)",
                value=raw,
                path=f"$[{index}]",
            )
        if _is_plain_text(item):
            if not isinstance(item["text"], str):
                raise CanonicalError(
                    f"content block {index}: 'text' must be a string",
                    value=item["text"],
                    path=f"$[{index}].text",
                )
            blocks.append(Text(item["text"]))
            continue
        if dialect == "anthropic" and item["type"] in _SHARED_TYPES:
            sdk = "anthropic"
        found = _dialect_of_block(item, sdk)
        if found is None and item.get("type") == "text":
            found = dialect or ("responses" if sdk == "openai" else "anthropic")
        if found is None:
            raise CanonicalError(
                f"content block {index} has type {item['type']!r}, which no supported API "
                "documents: check the spelling, or send it as text",
                value=item["type"],
                path=f"$[{index}].type",
            )
        level: Literal["block", "message"] = (
            "message" if found == "responses" and item["type"] not in _RESPONSES_PARTS else "block"
        )
        blocks.append(Native(copy.deepcopy(dict(item)), found, level))
    return tuple(blocks)


def _canonical(block: ContentBlock) -> Any:
    if isinstance(block, Native):
        return {"native": block.dialect, "level": block.level, "item": block.item}
    if isinstance(block, ToolResult):
        content = (
            block.content
            if isinstance(block.content, str)
            else [_canonical(part) for part in block.content]
        )
        return {"tool_result": block.call_id, "content": content, "is_error": block.is_error}
    if isinstance(block, ToolCall):
        return {"tool_call": block.id, "name": block.name, "arguments": block.arguments}
    values = {key: value for key, value in vars(block).items() if value is not None}
    return {type(block).__name__.lower(): values}


def canonical_blocks(blocks: Iterable[ContentBlock]) -> str:
    """The hashing form of `blocks`: canonical JSON, independent of dict key order."""
    return canonical_json([_canonical(block) for block in blocks])
