"""Compare two recorded request bodies and show where the second stops reusing the first's cache.

    prefixkit explain first.json second.json
    prefixkit explain first.json second.json --block-size 16     # vLLM token-id prompts
    prefixkit explain a.json b.json --api anthropic               # when the shape is ambiguous

Each file holds one request body as sent: Anthropic Messages, OpenAI Chat
Completions or Responses, or vLLM (Chat, or Completions with token ids). The
bodies are read in their API's prefix order (model; tools; system or
instructions; then each message or input item), with cache markers left out
since they do not change what is cached. The cache key or salt
(`prompt_cache_key`, `cache_salt`) is compared on its own: under another key
nothing is shared. So are the settings the provider caches under (OpenAI's
reasoning effort, output format, verbosity and service tier; Anthropic's
`speed`, as the model, `tool_choice`, from the system prompt on, and
`thinking`, from the messages on). The first difference is printed with its label, the likely cause and a
short diff (each line cut to an excerpt around its first difference); for
token-id prompts with --block-size, the first KV-cache block that differs.

A second request that only appends to the first (the next turn) diverges
nowhere. One whose only difference is its latest message (the last one of
both bodies) keeps everything before it: a new question each request is
expected, not a cache breaker.

Exit codes: 0 the second request keeps the first one's whole prefix (or all
but its latest message), 1 they diverge (printed), 2 a file that cannot be
read, is not a JSON object, or is not a request body of a known API (or not
of the API given with --api), or two bodies of different APIs.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prefixkit.sdk import MissReason, UsageError

__all__ = ["Body", "Divergence", "configure", "divergence", "read_body", "run"]

Api = Literal["anthropic", "chat", "responses", "vllm_completions"]
APIS: tuple[Api, ...] = ("anthropic", "chat", "responses", "vllm_completions")
_NAMES: Mapping[Api, str] = {
    "anthropic": "Anthropic Messages",
    "chat": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
    "vllm_completions": "vLLM Completions",
}
_A_NAMES: Mapping[Api, str] = {
    "anthropic": "an Anthropic Messages body",
    "chat": "an OpenAI Chat Completions body",
    "responses": "an OpenAI Responses body",
    "vllm_completions": "a vLLM Completions body",
}
# Top-level fields that only some of the APIs have: a body read as another API
# would silently lose them (an Anthropic `system` read as Chat).
_FIELDS_OF: Mapping[str, frozenset[Api]] = {
    "system": frozenset({"anthropic"}),
    "anthropic_version": frozenset({"anthropic"}),
    "thinking": frozenset({"anthropic"}),
    "stop_sequences": frozenset({"anthropic"}),
    "messages": frozenset({"anthropic", "chat"}),
    "input": frozenset({"responses"}),
    "instructions": frozenset({"responses"}),
    "previous_response_id": frozenset({"responses"}),
    "text": frozenset({"responses"}),
    "reasoning": frozenset({"responses"}),
    "max_output_tokens": frozenset({"responses"}),
    "reasoning_effort": frozenset({"chat"}),
    "verbosity": frozenset({"chat"}),
    "max_completion_tokens": frozenset({"chat"}),
    "response_format": frozenset({"chat", "vllm_completions"}),
    "prompt": frozenset({"vllm_completions"}),
    "prompt_cache_key": frozenset({"chat", "responses"}),
    "cache_salt": frozenset({"chat", "responses", "vllm_completions"}),
}
# The fields a body of the API cannot do without (any one of them).
_REQUIRED: Mapping[Api, tuple[str, ...]] = {
    "anthropic": ("messages",),
    "chat": ("messages",),
    "responses": ("input", "instructions"),
    "vllm_completions": ("prompt",),
}
_KEYS = ("prompt_cache_key", "cache_salt")
_MARKERS = ("cache_control", "prompt_cache_breakpoint")
_NOT_SET = "(not set)"
_DIFF_LINES = 12
_LINE_CHARS = 120

Section = Literal["model", "tools", "system", "messages"]
_SECTIONS: tuple[Section, ...] = ("model", "tools", "system", "messages")


@dataclass(frozen=True)
class Setting:
    """A request setting the provider caches under: a change breaks the cache from `section` on.

    `section` "model" means from the very start (nothing is shared).
    """

    name: str
    path: tuple[str, ...]
    reason: MissReason
    section: Section


# Only what the providers document: OpenAI's diagnostics name text_format,
# reasoning_effort, verbosity and service_tier changes; Anthropic's a model or
# speed change (all), tool_choice (system and messages) and thinking (messages).
_SETTINGS: Mapping[Api, tuple[Setting, ...]] = {
    "anthropic": (
        Setting("speed", ("speed",), MissReason.MODEL, "model"),
        Setting("tool_choice", ("tool_choice",), MissReason.SETTINGS, "system"),
        Setting("thinking", ("thinking",), MissReason.SETTINGS, "messages"),
    ),
    "chat": (
        Setting("reasoning_effort", ("reasoning_effort",), MissReason.SETTINGS, "model"),
        Setting("response_format", ("response_format",), MissReason.SETTINGS, "model"),
        Setting("verbosity", ("verbosity",), MissReason.SETTINGS, "model"),
        Setting("service_tier", ("service_tier",), MissReason.SETTINGS, "model"),
    ),
    "responses": (
        Setting("reasoning.effort", ("reasoning", "effort"), MissReason.SETTINGS, "model"),
        Setting("text.format", ("text", "format"), MissReason.SETTINGS, "model"),
        Setting("text.verbosity", ("text", "verbosity"), MissReason.SETTINGS, "model"),
        Setting("service_tier", ("service_tier",), MissReason.SETTINGS, "model"),
    ),
    "vllm_completions": (),
}


@dataclass(frozen=True)
class Part:
    """One piece of a request in prefix order: its label, kind, section and canonical text."""

    label: str
    kind: str  # "model", "tool", "system", "message"
    text: str
    section: Section = "messages"


@dataclass(frozen=True)
class Body:
    """A request body read as its API's ordered parts (and token ids, for vLLM).

    `key` holds the cache key or salt fields that are set (name, value), and
    `settings` each cache-relevant setting's canonical value ("(not set)"
    when absent), in `_SETTINGS` order.
    """

    path: Path
    api: Api
    parts: tuple[Part, ...]
    token_ids: tuple[int, ...] = ()
    key: tuple[tuple[str, str], ...] = ()
    settings: tuple[str, ...] = ()


Where = Literal["part", "key", "setting", "tokens"]


@dataclass(frozen=True)
class Divergence:
    """Where the second body first differs from the first.

    `index` is the first part of the first body's prefix that is not reused
    (0: nothing is shared); `where` says what differs: a part, the cache key
    or salt, a setting, or the token ids. `latest_turn` is true when the only
    difference is the last message of both bodies (expected per request).
    """

    index: int
    label: str
    reason: MissReason
    before: str
    after: str
    block: int | None = None
    where: Where = "part"
    latest_turn: bool = False


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


def _tool_api(tool: Any) -> Api | None:
    """The API a tool definition's shape belongs to, when only one has it."""
    if not isinstance(tool, dict):
        return None
    if "input_schema" in tool:
        return "anthropic"
    if isinstance(tool.get("function"), dict):
        return "chat"
    if tool.get("type") == "function" and "parameters" in tool:
        return "responses"
    return None


def _tool_apis(body: dict[str, Any]) -> set[Api]:
    tools = body.get("tools")
    found = {_tool_api(t) for t in tools} if isinstance(tools, list) else set()
    return {api for api in found if api is not None}


def _looks_like(body: dict[str, Any]) -> Api | None:
    """The API a body's fields say it was sent to; None when they say none."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return "vllm_completions"
    if "input" in body or "instructions" in body:
        return "responses"
    if isinstance(body.get("messages"), list):
        anthropic: frozenset[Api] = frozenset({"anthropic"})
        only_anthropic = any(_FIELDS_OF.get(k) == anthropic for k in body)
        if only_anthropic or "anthropic" in _tool_apis(body):
            return "anthropic"
        return "chat"  # OpenAI Chat and vLLM's chat endpoint (a bare body reads the same)
    return None


def _detect(body: dict[str, Any], path: Path) -> Api:
    found = _looks_like(body)
    if found is None:
        raise UsageError(
            f"{path}: not a request body prefixkit knows: expected Anthropic Messages or "
            "OpenAI Chat (`messages`), Responses (`input`), or vLLM Completions (`prompt` "
            f"token ids); found keys {sorted(body)}",
            argument="body",
            value=str(path),
        )
    return found


def _system_messages(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") in ("system", "developer") for m in messages
    )


def _listed(names: list[str], word: str) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def _check_fits(body: dict[str, Any], api: Api, path: Path, chosen: bool) -> None:
    """Refuse a body with fields `api` does not have, or without the ones it needs."""
    foreign = [f"`{k}`" for k in body if k in _FIELDS_OF and api not in _FIELDS_OF[k]]
    foreign += [f"`tools` of {_NAMES[other]}'s shape" for other in sorted(_tool_apis(body) - {api})]
    if api == "anthropic" and _system_messages(body):
        foreign.append("`messages` with the role system or developer")
    missing = [] if any(k in body for k in _REQUIRED[api]) else list(_REQUIRED[api])
    if not foreign and not missing:
        return
    problems = []
    if foreign:
        problems.append(f"has {_listed(foreign, 'and')}, which {_NAMES[api]} does not have")
    if missing:
        names = _listed([f"`{k}`" for k in missing], "or")
        problems.append(f"lacks {names}, which {_NAMES[api]} requires")
    looks = _looks_like(body)
    if looks is not None and looks != api:
        fix = f"it looks like {_A_NAMES[looks]}: pass --api {looks}, or leave --api out"
    elif chosen:
        fix = "pass the --api of the API it was sent to, or leave --api out"
    else:
        fix = "it mixes the fields of two APIs: pass the body exactly as sent to one API"
    read_as = f"read as {_NAMES[api]}" + (f" (--api {api})" if chosen else "")
    raise UsageError(
        f"{path}: {read_as}, the body {', and '.join(problems)}; {fix}",
        argument="--api" if chosen else "file",
        value=api if chosen else str(path),
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
    parts = [Part("model", "model", str(body.get("model")), "model")]
    parts += [
        Part(f"tools[{i}] {_tool_name(tool)}", "tool", _text(tool), "tools")
        for i, tool in enumerate(_list(body, "tools", path))
    ]
    if api == "anthropic":
        system = body.get("system")
        blocks = [system] if isinstance(system, str) else _list(body, "system", path)
        parts += [Part(f"system[{i}]", "system", _text(b), "system") for i, b in enumerate(blocks)]
    if api == "responses" and body.get("instructions") is not None:
        parts.append(Part("instructions", "system", _text(body["instructions"]), "system"))
    if api == "vllm_completions":
        return tuple(parts)  # the prompt is compared as token ids
    key = "input" if api == "responses" else "messages"
    items = body.get(key)
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items
    for i, item in enumerate(items if isinstance(items, list) else []):
        role = item.get("role") or item.get("type") if isinstance(item, dict) else None
        kind = "system" if role in ("system", "developer") else "message"
        parts.append(Part(f"{key}[{i}] ({role})", kind, _text(item)))
    return tuple(parts)


def _cache_key(body: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    extra: dict[str, Any] = body["extra_body"] if isinstance(body.get("extra_body"), dict) else {}
    found = ((name, body.get(name, extra.get(name))) for name in _KEYS)
    return tuple((name, str(value)) for name, value in found if value is not None)


def _setting(body: dict[str, Any], path: tuple[str, ...]) -> str:
    value: Any = body
    for step in path:
        value = value.get(step) if isinstance(value, dict) else None
    return _NOT_SET if value is None else json.dumps(_plain(value), sort_keys=True)


def read_body(path: Path, api: Api | None = None) -> Body:
    """A recorded request body from `path`, read as `api` (detected when None).

    Raises `UsageError` for a file that is not a JSON object, a body of no
    known API, or one with fields `api` does not have (or without those it needs).
    """
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
    _check_fits(body, kind, path, chosen=api is not None)
    token_ids: tuple[int, ...] = ()
    if kind == "vllm_completions":
        ids = body.get("prompt")
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
            raise UsageError(
                f"{path}: a vLLM Completions body has `prompt` as a list of token ids",
                argument="file",
                value=str(path),
            )
        token_ids = tuple(ids)
    settings = tuple(_setting(body, s.path) for s in _SETTINGS[kind])
    return Body(path, kind, _parts(body, kind, path), token_ids, _cache_key(body), settings)


def _reason(before: Part, after: Part, first: Body, second: Body) -> MissReason:
    if before.kind == "model":
        return MissReason.MODEL
    if before.kind == "tool" or after.kind == "tool":
        old = sorted(p.text for p in first.parts if p.kind == "tool")
        new = sorted(p.text for p in second.parts if p.kind == "tool")
        return MissReason.TOOLS_ORDER if old == new else MissReason.TOOLS
    if before.kind == "system" or after.kind == "system":
        return MissReason.SYSTEM
    return MissReason.MESSAGES


_ABSENT = Part("", "", "")


def _part_divergence(first: Body, second: Body) -> Divergence | None:
    """The first part that differs, aligned by section: an extra tool is named as itself."""
    for index, (before, after) in enumerate(zip(first.parts, second.parts, strict=False)):
        if before == after:
            continue
        rank_before = _SECTIONS.index(before.section)
        rank_after = _SECTIONS.index(after.section)
        if rank_after < rank_before:  # the second body has a part the first lacks here
            before = Part(after.label, after.kind, "", after.section)
        elif rank_before < rank_after:  # the first body has a part the second lacks
            after = Part(before.label, before.kind, "", before.section)
        reason = _reason(before, after, first, second)
        latest = (
            index == len(first.parts) - 1 == len(second.parts) - 1
            and before.kind == after.kind == "message"
            and before.label == after.label
        )
        return Divergence(index, before.label, reason, before.text, after.text, latest_turn=latest)
    if len(second.parts) < len(first.parts):
        gone = first.parts[len(second.parts)]
        reason = _reason(gone, _ABSENT, first, second)
        return Divergence(len(second.parts), gone.label, reason, gone.text, "")
    return None


def _start_of(body: Body, section: Section) -> int:
    """The index of the first part of `section` or a later one (the end when none)."""
    rank = _SECTIONS.index(section)
    return next(
        (i for i, p in enumerate(body.parts) if _SECTIONS.index(p.section) >= rank),
        len(body.parts),
    )


def _token_divergence(first: Body, second: Body, block_size: int | None) -> Divergence | None:
    same = 0
    for old, new in zip(first.token_ids, second.token_ids, strict=False):
        if old != new:
            break
        same += 1
    if same >= len(first.token_ids):
        return None
    return Divergence(
        same,
        f"token {same}",
        MissReason.MESSAGES,
        str(list(first.token_ids[same : same + 16])),
        str(list(second.token_ids[same : same + 16])),
        same // block_size if block_size else None,
        where="tokens",
    )


def divergence(first: Body, second: Body, block_size: int | None = None) -> Divergence | None:
    """Where `second` stops keeping `first`'s prefix; None when it keeps all of it.

    A different cache key or salt diverges at the very start (requests under
    another key share nothing; vLLM hashes the salt into the first block); a
    changed setting from the section the provider caches it with; otherwise the
    first differing part, or for vLLM Completions the first differing token.
    """
    if first.api != second.api:
        raise UsageError(
            f"{first.path} is {_A_NAMES[first.api]} and {second.path} "
            f"{_A_NAMES[second.api]}: compare two requests of the same API",
            argument="file",
            value=str(second.path),
        )
    found: list[tuple[int, int, Divergence]] = []  # (index, tie order, divergence)
    part = _part_divergence(first, second)
    if part is not None:
        found.append((part.index, 0 if part.index == 0 else 3, part))
    if first.key != second.key:
        old, new = dict(first.key), dict(second.key)
        name = next(n for n in _KEYS if old.get(n) != new.get(n))
        block = 0 if name == "cache_salt" else None
        before, after = old.get(name, _NOT_SET), new.get(name, _NOT_SET)
        key = Divergence(0, name, MissReason.CACHE_KEY, before, after, block, where="key")
        found.append((0, 1, key))
    for setting, before, after in zip(
        _SETTINGS[first.api], first.settings, second.settings, strict=True
    ):
        if before != after:
            index = _start_of(first, setting.section)
            changed = Divergence(
                index, setting.name, setting.reason, before, after, where="setting"
            )
            found.append((index, 2, changed))
    if found:
        return min(found, key=lambda entry: entry[:2])[2]
    if first.token_ids:
        return _token_divergence(first, second, block_size)
    return None


_ADVICE: dict[MissReason, str] = {
    MissReason.MODEL: "each model has its own cache: keep one model per conversation",
    MissReason.CACHE_KEY: "the cache key or salt differs: requests share a cache only "
    "under the same key (OpenAI routes by the key; vLLM hashes the salt into the first "
    "block), so nothing is shared",
    MissReason.SETTINGS: "a setting the provider caches under changed: keep it fixed for "
    "the conversation",
    MissReason.TOOLS_ORDER: "the same tools in another order: sort them (prefixkit's Prompt "
    "does by default)",
    MissReason.TOOLS: "the tool list changed: every tool is part of the cached prefix",
    MissReason.SYSTEM: "the system prompt changed: keep volatile values (dates, ids, names) "
    "out of it",
    MissReason.MESSAGES: "an earlier message changed: append to the history, never rewrite it",
}


def _shared_length(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share (a binary search of slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _clip(line: str, at: int | None) -> str:
    """`line`, or an excerpt of it around character `at` with its length when too long."""
    if len(line) <= _LINE_CHARS:
        return line
    centre = at or 0
    start = max(0, min(centre - _LINE_CHARS // 4, len(line) - _LINE_CHARS))
    end = start + _LINE_CHARS
    excerpt = ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")
    where = f", first difference at character {at}" if at is not None else ""
    return f"{excerpt} ({len(line)} characters{where})"


def _span(start: int, stop: int) -> str:
    """A unified diff's line range, as difflib writes it."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _short_diff(before: str, after: str, first: Path, second: Path) -> list[str]:
    """A unified diff of the differing part: at most `_DIFF_LINES` lines, each kept short."""
    old, new = before.splitlines(), after.splitlines()
    lines = [f"--- {first}", f"+++ {second}"]
    for group in difflib.SequenceMatcher(None, old, new).get_grouped_opcodes(1):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines.append(f"@@ -{_span(i1, i2)} +{_span(j1, j2)} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [" " + _clip(line, None) for line in old[a1:a2]]
                continue
            removed, added = old[a1:a2], new[b1:b2]
            paired = [_shared_length(o, n) for o, n in zip(removed, added, strict=False)]
            for k, line in enumerate(removed):
                lines.append("-" + _clip(line, paired[k] if k < len(paired) else None))
            for k, line in enumerate(added):
                lines.append("+" + _clip(line, paired[k] if k < len(paired) else None))
        if len(lines) > _DIFF_LINES:
            break
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], "... (more diff lines)"]
    return lines


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the `prefixkit explain` arguments."""
    parser.add_argument("first", type=Path, help="the earlier request body (JSON)")
    parser.add_argument("second", type=Path, help="the later request body (JSON)")
    parser.add_argument(
        "--api",
        choices=APIS,
        default=None,
        help="read both bodies as this API (default: recognised from their keys); a body "
        "with fields the API does not have is refused",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="vLLM's KV-cache block size, to name the first differing block of token ids",
    )


def _location(found: Divergence, first: Body) -> str:
    where = f"block {found.block} ({found.label})" if found.block is not None else found.label
    prefix = f"the {first.api} prefix"
    if found.where == "setting":
        where = f"the setting {where}"
    if found.where in ("key", "setting") and found.index == 0:
        return f"{where}, at the very start of {prefix}: nothing is shared"
    if found.where == "setting":
        at = f"part {found.index} of {prefix}"
        if found.index < len(first.parts):
            at += f" ({first.parts[found.index].label}) on"
        return f"{where}, which breaks the cache from {at}"
    if found.where == "tokens":
        return f"{where} of the {first.api} prompt"
    return f"{where}, part {found.index} of {prefix}"


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
    diff = _short_diff(found.before, found.after, first.path, second.path)
    if found.latest_turn:
        print(
            f"the latest turn differs: {found.label}, part {found.index} of the {first.api} "
            "prefix (expected per request: not a cache breaker)"
        )
        print(
            f"{second.path} keeps the whole prefix of {first.path} before it: "
            "the cache can serve it"
        )
        print("\n".join(diff))
        return 0
    print(f"first divergence: {_location(found, first)}")
    print(f"likely cause: {found.reason}: {_ADVICE[found.reason]}")
    print("\n".join(diff))
    return 1
