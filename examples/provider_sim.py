"""Simulated provider APIs for the examples' `--dry-run`, and a wire-body summary.

With `--dry-run` the official clients send their real HTTP requests to an
`httpx2.MockTransport` (anthropic 2.11 and openai 3.52 are built on httpx2).
The handlers below keep a prompt cache the way the providers document it and
answer with the usage payload the real API would send, so the CacheStats the
examples print are computed from a realistic exchange:

- Anthropic: entries are written at `cache_control` breakpoints (and at the
  last block in automatic mode); a read finds the longest earlier entry whose
  end lies within 20 blocks before a breakpoint; prefixes under the model's
  minimum are never cached.
- OpenAI: prompts of 1024+ tokens are cached implicitly per
  `prompt_cache_key`, hits in 128-token steps; with explicit
  `prompt_cache_breakpoint` markers, entries end exactly at the markers.

Token counts are cl100k_base estimates (the simulation needs lengths, not the
providers' exact tokenizers).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx2
from prefixkit.sdk import TiktokenTokenizer, model_info

__all__ = [
    "SimulatedAnthropic",
    "SimulatedOpenAI",
    "official_client",
    "recording_hook",
    "summarize_body",
]

_COUNTER = TiktokenTokenizer("cl100k_base")
_REPLY = "Based on the documents: the answer is in section 2 of the price list."


def _digest(blocks: list[str]) -> str:
    return hashlib.sha256(json.dumps(blocks).encode()).hexdigest()


class SimulatedAnthropic:
    """The Messages API with Anthropic's documented caching rules."""

    def __init__(self, lookback: int = 20) -> None:
        self.lookback = lookback
        self.entries: set[str] = set()
        self.bodies: list[dict[str, Any]] = []

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        blocks: list[tuple[str, dict[str, Any] | None]] = []
        for tool in body.get("tools", []):
            marker = tool.get("cache_control")
            blocks.append(
                (json.dumps({k: v for k, v in tool.items() if k != "cache_control"}), marker)
            )
        for block in body.get("system", []):
            blocks.append((block["text"], block.get("cache_control")))
        for message in body["messages"]:
            for block in message["content"]:
                blocks.append((message["role"] + ":" + block["text"], block.get("cache_control")))
        marks = [(i, m.get("ttl", "5m")) for i, (_, m) in enumerate(blocks) if m is not None]
        if "cache_control" in body:
            marks.append((len(blocks) - 1, body["cache_control"].get("ttl", "5m")))
        texts = [text for text, _ in blocks]
        counts = [_COUNTER.count(text) for text in texts]
        prefix = [sum(counts[: i + 1]) for i in range(len(counts))]
        info = model_info("anthropic", body["model"])
        minimum = info.min_cache_tokens if info and info.min_cache_tokens else 1024
        read_end = -1
        for end, _ in marks:
            for candidate in range(end, max(end - self.lookback, -1), -1):
                if _digest(texts[: candidate + 1]) in self.entries:
                    read_end = max(read_end, candidate)
                    break
        written = {"5m": 0, "1h": 0}
        last_written = read_end
        for end, ttl in marks:
            if end > last_written and prefix[end] >= minimum:
                start_tokens = prefix[last_written] if last_written >= 0 else 0
                written[ttl] += prefix[end] - start_tokens
                self.entries.add(_digest(texts[: end + 1]))
                last_written = end
        cached = prefix[read_end] if read_end >= 0 else 0
        total = prefix[-1] if prefix else 0
        creation = written["5m"] + written["1h"]
        usage = {
            "input_tokens": total - cached - creation,
            "output_tokens": _COUNTER.count(_REPLY),
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": creation,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }
        message = {
            "id": f"msg_sim{len(self.bodies):04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": _REPLY}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        return httpx2.Response(200, json=message)


class SimulatedOpenAI:
    """Chat Completions and Responses with OpenAI's documented caching rules."""

    def __init__(self) -> None:
        self.prompts: dict[str, list[list[int]]] = {}
        self.entries: set[tuple[str, int]] = set()
        self.bodies: list[dict[str, Any]] = []

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        chat = request.url.path.endswith("/chat/completions")
        messages = body["messages"] if chat else body["input"]
        ids = list(_COUNTER.encode(json.dumps(body.get("tools", []))))
        breakpoints: list[int] = []
        for message in messages:
            ids += _COUNTER.encode(f"<|{message['role']}|>")
            content = message["content"]
            parts = [{"text": content}] if isinstance(content, str) else content
            for part in parts:
                ids += _COUNTER.encode(part["text"])
                if "prompt_cache_breakpoint" in part:
                    breakpoints.append(len(ids))
        key = body.get("prompt_cache_key") or ""
        mode = body.get("prompt_cache_options", {}).get("mode")
        cached = written = 0
        if mode is None or mode == "implicit":
            for earlier in self.prompts.get(key, []):
                common = next(
                    (i for i, (a, b) in enumerate(zip(earlier, ids, strict=False)) if a != b),
                    min(len(earlier), len(ids)),
                )
                if common >= 1024:
                    cached = max(cached, 1024 + (common - 1024) // 128 * 128)
            self.prompts.setdefault(key, []).append(ids)
        if mode is not None:
            digests = [(key, hash(tuple(ids[:end]))) for end in breakpoints]
            hits = [end for end, d in zip(breakpoints, digests, strict=True) if d in self.entries]
            cached = max([cached, *hits])
            for end, d in zip(breakpoints, digests, strict=True):
                if d not in self.entries and end >= 1024:
                    self.entries.add(d)
            new_end = max([end for end in breakpoints if end >= 1024], default=0)
            written = max(new_end - cached, 0)
        output = _COUNTER.count(_REPLY)
        if chat:
            usage: dict[str, Any] = {
                "prompt_tokens": len(ids),
                "completion_tokens": output,
                "total_tokens": len(ids) + output,
                "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            }
            payload: dict[str, Any] = {
                "id": f"chatcmpl-sim{len(self.bodies):04d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": _REPLY},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
        else:
            usage = {
                "input_tokens": len(ids),
                "input_tokens_details": {
                    "cached_tokens": cached,
                    "cache_write_tokens": written,
                    "cache_write_tokens_details": {
                        "ttl_30m_tokens": written
                        if body.get("prompt_cache_options", {}).get("ttl", "30m") == "30m"
                        else 0,
                        "ttl_12h_tokens": written
                        if body.get("prompt_cache_options", {}).get("ttl") == "12h"
                        else 0,
                    },
                },
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": len(ids) + output,
            }
            payload = {
                "id": f"resp_sim{len(self.bodies):04d}",
                "object": "response",
                "created_at": int(time.time()),
                "status": "completed",
                "model": body["model"],
                "output": [
                    {
                        "type": "message",
                        "id": "msg_sim",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": _REPLY, "annotations": []}],
                    }
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            }
        return httpx2.Response(200, json=payload)


def recording_hook(bodies: list[dict[str, Any]]) -> Callable[[httpx2.Request], None]:
    """An httpx2 request hook that keeps each JSON body (for real API runs)."""

    def hook(request: httpx2.Request) -> None:
        request.read()
        bodies.append(json.loads(request.content))

    return hook


# provider -> (its client class, the API key variable, a dry-run key, its simulation)
_PROVIDERS: dict[str, tuple[str, str, str, Callable[[], Any]]] = {
    "anthropic": ("Anthropic", "ANTHROPIC_API_KEY", "sk-ant-dry-run", SimulatedAnthropic),
    "openai": ("OpenAI", "OPENAI_API_KEY", "sk-dry-run", SimulatedOpenAI),
}


def official_client(provider: str, dry_run: bool) -> tuple[Any, list[dict[str, Any]]] | None:
    """The official `provider` client ("anthropic" or "openai") and the list its
    request bodies are kept in: on the simulated API with `dry_run`, else on the
    real one. None (after saying which key to set) when there is no API key."""
    client_class, key_variable, dry_run_key, simulation = _PROVIDERS[provider]
    sdk = importlib.import_module(provider)
    make = getattr(sdk, client_class)
    if dry_run:
        simulated = simulation()
        http = sdk.DefaultHttpxClient(transport=simulated.transport())
        return make(api_key=dry_run_key, http_client=http, max_retries=0), simulated.bodies
    if os.environ.get(key_variable):
        bodies: list[dict[str, Any]] = []
        http = sdk.DefaultHttpxClient(event_hooks={"request": [recording_hook(bodies)]})
        return make(http_client=http), bodies
    print(f"set {key_variable} to call the API, or pass --dry-run", file=sys.stderr)
    return None


def summarize_body(body: dict[str, Any]) -> str:
    """Where the cache markers sit in a request body, one line per marker."""
    lines = [f"  model={body['model']}"]
    for key in ("prompt_cache_key", "prompt_cache_options", "cache_control", "cache_salt"):
        if key in body:
            lines.append(f"  {key}={json.dumps(body[key])}")
    for index, tool in enumerate(body.get("tools", [])):
        if "cache_control" in tool:
            lines.append(f"  tools[{index}] cache_control ttl={tool['cache_control'].get('ttl')}")
    for index, block in enumerate(body.get("system", [])):
        if isinstance(block, dict) and "cache_control" in block:
            head = block["text"][:40].replace("\n", " ")
            lines.append(
                f"  system[{index}] {head!r}... cache_control ttl={block['cache_control'].get('ttl')}"
            )
    for m, message in enumerate(body.get("messages", body.get("input", []))):
        content = message["content"]
        for p, part in enumerate(content if isinstance(content, list) else []):
            marker = part.get("cache_control") or part.get("prompt_cache_breakpoint")
            if marker:
                head = part["text"][:40].replace("\n", " ")
                lines.append(
                    f"  {message['role']}[{m}].content[{p}] {head!r}... {json.dumps(marker)}"
                )
    return "\n".join(lines)
