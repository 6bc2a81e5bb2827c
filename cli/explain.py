"""Compare two recorded request bodies and show where the second stops reusing the first's cache.

    prefixkit explain first.json second.json
    prefixkit explain first.json second.json --block-size 16     # vLLM token-id prompts
    prefixkit explain a.json b.json --api anthropic               # when the shape is ambiguous

Each file holds one request body as sent: Anthropic Messages, OpenAI Chat
Completions or Responses, or vLLM (Chat, or Completions with token ids). The
bodies are read in their API's prefix order (model; tools; system or
instructions; then each message or input item; the cache key or salt), with
cache markers left out since they do not change what is cached. The first part
that differs is printed with its label, the likely cause and a short diff; for
token-id prompts with --block-size, the first KV-cache block that differs. A
second request that only appends to the first (the next turn) diverges nowhere.

Exit codes: 0 the second request keeps the first one's whole prefix, 1 they
diverge (printed), 2 a file that cannot be read, is not a JSON object, or is
not a request body of a known API, or two bodies of different APIs.
"""

from __future__ import annotations

import argparse
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prefixkit.sdk import MissReason, UsageError

__all__ = ["Body", "Divergence", "configure", "divergence", "read_body", "run"]

Api = Literal["anthropic", "chat", "responses", "vllm_completions"]
APIS: tuple[Api, ...] = ("anthropic", "chat", "responses", "vllm_completions")
_MARKERS = ("cache_control", "prompt_cache_breakpoint")
_DIFF_LINES = 12


@dataclass(frozen=True)
class Part:
    """One piece of a request in prefix order: its label, kind and canonical text."""

    label: str
    kind: str  # "model", "tool", "system", "message", "key", "tokens"
    text: str


@dataclass(frozen=True)
class Body:
    """A request body read as its API's ordered parts (and token ids, for vLLM)."""

    path: Path
    api: Api
    parts: tuple[Part, ...]
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Divergence:
    """Where the second body first differs from the first."""

    index: int
    label: str
    reason: MissReason
    before: str
    after: str
    block: int | None = None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _MARKERS}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(_plain(value), indent=1, sort_keys=False, ensure_ascii=False)


def _detect(body: dict[str, Any], path: Path) -> Api:
    if "input" in body or "instructions" in body:
        return "responses"
    prompt = body.get("prompt")
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return "vllm_completions"
    messages = body.get("messages")
    if isinstance(messages, list):
        tools: list[Any] = body["tools"] if isinstance(body.get("tools"), list) else []
        anthropic_tools = any(isinstance(t, dict) and "input_schema" in t for t in tools)
        if "system" in body or anthropic_tools or "anthropic_version" in body:
            return "anthropic"
        return "chat"  # OpenAI Chat and vLLM's chat endpoint (a bare body reads the same)
    raise UsageError(
        f"{path}: not a request body prefixkit knows: expected Anthropic Messages or OpenAI "
        "Chat (`messages`), Responses (`input`), or vLLM Completions (`prompt` token ids); "
        f"found keys {sorted(body)}",
        argument="body",
        value=str(path),
    )


def _list(body: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(
            f"{path}: `{key}` must be a list, not {type(value).__name__}",
            argument=key,
            value=str(path),
        )
    return value


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        return str(name or tool.get("type") or "?")
    return "?"


def _parts(body: dict[str, Any], api: Api, path: Path) -> tuple[Part, ...]:
    parts = [Part("model", "model", str(body.get("model")))]
    parts += [
        Part(f"tools[{i}] {_tool_name(tool)}", "tool", _text(tool))
        for i, tool in enumerate(_list(body, "tools", path))
    ]
    if api == "anthropic":
        system = body.get("system")
        blocks = [system] if isinstance(system, str) else _list(body, "system", path)
        parts += [Part(f"system[{i}]", "system", _text(b)) for i, b in enumerate(blocks)]
    if api == "responses" and body.get("instructions") is not None:
        parts.append(Part("instructions", "system", _text(body["instructions"])))
    key = "input" if api == "responses" else "messages"
    items = body.get(key)
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items
    for i, item in enumerate(items if isinstance(items, list) else []):
        role = item.get("role") or item.get("type") if isinstance(item, dict) else None
        kind = "system" if role in ("system", "developer") else "message"
        parts.append(Part(f"{key}[{i}] ({role})", kind, _text(item)))
    extra: dict[str, Any] = body["extra_body"] if isinstance(body.get("extra_body"), dict) else {}
    for name in ("prompt_cache_key", "cache_salt"):
        value = body.get(name, extra.get(name))
        if value is not None:
            parts.append(Part(name, "key", str(value)))
    return tuple(parts)


def read_body(path: Path, api: Api | None = None) -> Body:
    """A recorded request body from `path`, read as `api` (detected when None)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(
            f"{path}: cannot read the file ({error}): pass a request body saved as JSON",
            argument="file",
            value=str(path),
        ) from error
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path}: not JSON ({error}): pass the request body exactly as sent",
            argument="file",
            value=str(path),
        ) from error
    if not isinstance(body, dict):
        raise UsageError(
            f"{path}: a request body is a JSON object, not {type(body).__name__}",
            argument="file",
            value=str(path),
        )
    kind = api or _detect(body, path)
    if kind == "vllm_completions":
        ids = body.get("prompt")
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
            raise UsageError(
                f"{path}: a vLLM Completions body has `prompt` as a list of token ids",
                argument="file",
                value=str(path),
            )
        model = Part("model", "model", str(body.get("model")))
        return Body(path, kind, (model,), tuple(ids))
    return Body(path, kind, _parts(body, kind, path))


def _reason(before: Part, after: Part, first: Body, second: Body) -> MissReason:
    if before.kind == "model":
        return MissReason.MODEL
    if before.kind == "key" or after.kind == "key":
        return MissReason.CACHE_KEY
    if before.kind == "tool" or after.kind == "tool":
        old = sorted(p.text for p in first.parts if p.kind == "tool")
        new = sorted(p.text for p in second.parts if p.kind == "tool")
        return MissReason.TOOLS_ORDER if old == new else MissReason.TOOLS
    if before.kind == "system" or after.kind == "system":
        return MissReason.SYSTEM
    return MissReason.MESSAGES


def divergence(first: Body, second: Body, block_size: int | None = None) -> Divergence | None:
    """Where `second` stops keeping `first`'s prefix; None when it keeps all of it."""
    if first.api != second.api:
        raise UsageError(
            f"{first.path} is a {first.api} body and {second.path} a {second.api} body: compare "
            "two requests of the same API",
            argument="file",
            value=str(second.path),
        )
    for index, (before, after) in enumerate(zip(first.parts, second.parts, strict=False)):
        if before != after:
            reason = _reason(before, after, first, second)
            return Divergence(index, before.label, reason, before.text, after.text)
    if len(second.parts) < len(first.parts):
        gone = first.parts[len(second.parts)]
        reason = MissReason.TOOLS if gone.kind == "tool" else MissReason.MESSAGES
        return Divergence(len(second.parts), gone.label, reason, gone.text, "")
    if first.token_ids:
        same = 0
        for old, new in zip(first.token_ids, second.token_ids, strict=False):
            if old != new:
                break
            same += 1
        if same < len(first.token_ids):
            block = same // block_size if block_size else None
            return Divergence(
                same,
                f"token {same}",
                MissReason.MESSAGES,
                str(list(first.token_ids[same : same + 16])),
                str(list(second.token_ids[same : same + 16])),
                block,
            )
    return None


_ADVICE: dict[MissReason, str] = {
    MissReason.MODEL: "each model has its own cache: keep one model per conversation",
    MissReason.CACHE_KEY: "the cache key or salt differs: requests share a cache only "
    "under the same key",
    MissReason.TOOLS_ORDER: "the same tools in another order: sort them (prefixkit's Prompt "
    "does by default)",
    MissReason.TOOLS: "the tool list changed: every tool is part of the cached prefix",
    MissReason.SYSTEM: "the system prompt changed: keep volatile values (dates, ids, names) "
    "out of it",
    MissReason.MESSAGES: "an earlier message changed: append to the history, never rewrite it",
}


def _short_diff(before: str, after: str, first: Path, second: Path) -> list[str]:
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), str(first), str(second), lineterm="", n=1
        )
    )
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more diff lines)"]
    return lines


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit explain` arguments."""
    parser.add_argument("first", type=Path, help="the earlier request body (JSON)")
    parser.add_argument("second", type=Path, help="the later request body (JSON)")
    parser.add_argument(
        "--api",
        choices=APIS,
        default=None,
        help="read both bodies as this API (default: recognised from their keys)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="vLLM's KV-cache block size, to name the first differing block of token ids",
    )


def run(args: argparse.Namespace) -> int:
    """Print where the second body diverges; 0 when it keeps the first's prefix, else 1."""
    if args.block_size is not None and args.block_size < 1:
        raise UsageError(
            f"--block-size must be at least 1, got {args.block_size}",
            argument="--block-size",
            value=args.block_size,
        )
    first, second = read_body(args.first, args.api), read_body(args.second, args.api)
    found = divergence(first, second, args.block_size)
    if found is None:
        print(
            f"{second.path} keeps the whole prefix of {first.path} ({first.api}): "
            "the cache can serve it"
        )
        return 0
    where = f"block {found.block} ({found.label})" if found.block is not None else found.label
    print(f"first divergence: {where}, part {found.index} of the {first.api} prefix")
    print(f"likely cause: {found.reason}: {_ADVICE[found.reason]}")
    for line in _short_diff(found.before, found.after, first.path, second.path):
        print(line)
    return 1
