"""The OpenAI half of `prefixkit.testing.providers.MockProvider`: Chat Completions,
Completions (vLLM's token-id endpoint) and Responses, with OpenAI's prompt caching
simulated (see that module's docstring)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prefixkit.sdk import model_info, provider_limits

from .mock_bodies import (
    UNKNOWN_MODEL_MIN_TOKENS,
    Answer,
    _BadRequest,
    _counter,
    _digest,
    _optional_list,
    _optional_str,
    _options,
    _pieces,
    _require,
    _streamed,
)
from .openai_answers import (
    CREATED,
    Reply,
    chat_completion,
    chat_events,
    completion,
    completion_events,
    response_object,
    responses_events,
)

__all__ = ["CHAT_USAGE", "RESPONSES_USAGE", "OpenAIMock"]

CHAT_USAGE: dict[str, Any] = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
"""A Chat Completions usage payload: 1,920 of 2,006 prompt tokens cached."""

RESPONSES_USAGE: dict[str, Any] = {
    "input_tokens": 2006,
    "input_tokens_details": {
        "cached_tokens": 1792,
        "cache_write_tokens": 128,
        "cache_write_tokens_details": {"ttl_30m_tokens": 128, "ttl_12h_tokens": 0},
    },
    "output_tokens": 300,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 2306,
}
"""A Responses usage payload: 1,792 input tokens cached, 128 written with a 30m TTL."""

_STEP = 128  # OpenAI's implicit hits grow in steps of 128 tokens


class OpenAIMock:
    """The mock's OpenAI routes (a part of `MockProvider`)."""

    chat_usage: Mapping[str, Any] | None
    responses_usage: Mapping[str, Any] | None
    reply: str
    _openai_prompts: dict[tuple[str, ...], list[list[int]]]
    _openai_entries: set[str]
    _stored_responses: dict[str, list[Any]]  # response id -> its conversation's items
    _conversation_items: dict[str, list[Any]]  # conversation id -> its items

    def _chat(self, body: dict[str, Any], number: int) -> Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        _options(body, "chat")
        prompt = _openai_prompt(body, _require(body, "messages", list), "messages")
        if self.chat_usage is not None:
            usage = copy.deepcopy(dict(self.chat_usage))
        else:
            cached, written = self._openai_cache(body, prompt)
            usage = _completion_usage(len(prompt.ids), cached, written, self.reply)
        tier = _served_tier(body)
        if stream:  # OpenAI names the tier in every chunk
            events = chat_events(body, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))
            return [
                (name, {**data, "service_tier": tier} if isinstance(data, dict) else data)
                for name, data in events
            ]
        answer = chat_completion(model, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))
        return {**answer, "service_tier": tier}

    def _completions(self, body: dict[str, Any], number: int) -> Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        prompt = _require(body, "prompt", (str, list))
        if isinstance(prompt, str):
            ids = _counter().encode(prompt)
        elif all(isinstance(token, int) and not isinstance(token, bool) for token in prompt):
            ids = list(prompt)
        else:
            raise _BadRequest(
                "prompt must be a string or a list of token ids (this mock answers one "
                "prompt per request)",
                "prompt",
            )
        if self.chat_usage is not None:
            usage = copy.deepcopy(dict(self.chat_usage))
        else:
            cached, written = self._openai_cache(body, _OpenAIPrompt(ids, []))
            usage = _completion_usage(len(ids), cached, written, self.reply)
        if stream:
            return completion_events(body, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))
        return completion(model, f"mock{number:04d}", usage, Reply(_pieces(self.reply)))

    def _conversations(self, body: dict[str, Any], number: int) -> Answer:
        """`POST /conversations`: a new conversation, holding `items` if given."""
        items = _optional_list(body, "items")
        ident = f"conv_mock{number:04d}"
        self._conversation_items[ident] = list(items)
        return {"id": ident, "object": "conversation", "created_at": CREATED, "metadata": {}}

    def _server_history(self, body: dict[str, Any]) -> tuple[list[Any], str | None]:
        """The items the server keeps before this request's input, and the conversation id."""
        previous = body.get("previous_response_id")
        conversation = body.get("conversation")
        if isinstance(conversation, dict):
            conversation = conversation.get("id")
        if previous is not None and conversation is not None:
            raise _BadRequest(
                "previous_response_id and conversation cannot be used together",
                "previous_response_id",
            )
        if previous is not None:
            if not isinstance(previous, str) or previous not in self._stored_responses:
                raise _BadRequest(
                    f"Previous response with id '{previous}' not found.", "previous_response_id"
                )
            return list(self._stored_responses[previous]), None
        if conversation is not None:
            if not isinstance(conversation, str):
                raise _BadRequest("conversation: expected an id or {id}", "conversation")
            # lenient: an id the mock never made starts an empty conversation
            return list(self._conversation_items.get(conversation, [])), conversation
        return [], None

    def _responses(self, body: dict[str, Any], number: int) -> Answer:
        model = _require(body, "model", str)
        stream = _streamed(body)
        ttl = _options(body, "responses").get("ttl", "30m")
        items = _require(body, "input", (str, list))
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        history, conversation = self._server_history(body)
        # the whole conversation as the model reads it: what the server keeps, then the input
        items = [*history, *items]
        kept = list(items)
        instructions = body.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise _BadRequest("instructions must be a string", "instructions")
            items = [{"role": "system", "content": instructions}, *items]
        prompt = _openai_prompt(body, items, "input")
        if self.responses_usage is not None:
            usage = copy.deepcopy(dict(self.responses_usage))
        else:
            cached, written = self._openai_cache(body, prompt)
            output = _counter().count(self.reply)
            usage = {
                "input_tokens": len(prompt.ids),
                "input_tokens_details": {
                    "cached_tokens": cached,
                    "cache_write_tokens": written,
                    "cache_write_tokens_details": {
                        "ttl_30m_tokens": written if ttl == "30m" else 0,
                        "ttl_12h_tokens": written if ttl == "12h" else 0,
                    },
                },
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": len(prompt.ids) + output,
            }
        reply = Reply(_pieces(self.reply))
        response = response_object(model, f"mock{number:04d}", usage, reply)
        # instructions are not kept: a continuing request sends its own, as with OpenAI
        kept += response["output"]
        if body.get("store", True) is not False:
            self._stored_responses[response["id"]] = kept
        if conversation is not None:
            self._conversation_items[conversation] = kept
        response = {**response, "service_tier": _served_tier(body)}
        if stream:
            return responses_events(response, reply)
        return response

    def _openai_cache(self, body: dict[str, Any], prompt: _OpenAIPrompt) -> tuple[int, int]:
        """(cached, written) tokens of `prompt`, updating the simulated cache."""
        model = _require(body, "model", str)
        key = (model, _optional_str(body, "prompt_cache_key"), _optional_str(body, "cache_salt"))
        info = model_info("openai", model)
        minimum = (info.min_cache_tokens if info else None) or (
            provider_limits("openai").min_cache_tokens or UNKNOWN_MODEL_MIN_TOKENS
        )
        mode = _options(body).get("mode")
        ids = prompt.ids
        cached = written = 0
        if mode is None or mode == "implicit":
            for earlier in self._openai_prompts.get(key, []):
                common = next(
                    (i for i, (a, b) in enumerate(zip(earlier, ids, strict=False)) if a != b),
                    min(len(earlier), len(ids)),
                )
                if common >= minimum:
                    cached = max(cached, minimum + (common - minimum) // _STEP * _STEP)
            self._openai_prompts.setdefault(key, []).append(ids)
        if mode is not None:
            digests = [_digest([*key, *map(str, ids[:end])]) for end in prompt.breakpoints]
            hits = [
                end
                for end, d in zip(prompt.breakpoints, digests, strict=True)
                if d in self._openai_entries
            ]
            cached = max([cached, *hits])
            for end, d in zip(prompt.breakpoints, digests, strict=True):
                if end >= minimum:
                    self._openai_entries.add(d)
            new_end = max([end for end in prompt.breakpoints if end >= minimum], default=0)
            written = max(new_end - cached, 0)
        return cached, written


@dataclass(frozen=True)
class _OpenAIPrompt:
    """An OpenAI request as token ids, and where its explicit breakpoints end."""

    ids: list[int]
    breakpoints: list[int]


def _openai_prompt(body: dict[str, Any], items: list[Any], field: str) -> _OpenAIPrompt:
    """`items` (chat `messages`, Responses `input`) after the tools, as token ids."""
    counter = _counter()
    _optional_list(body, "tools")
    ids = list(counter.encode(json.dumps(body.get("tools", []))))
    breakpoints: list[int] = []
    for m, item in enumerate(items):
        if not isinstance(item, dict):
            raise _BadRequest(f"{field}.{m}: expected an object", field)
        if not isinstance(item.get("role"), str):
            # a Responses item that is not a message (function_call, reasoning, ...); a
            # function_call_output's output parts may carry breakpoints (not tokens)
            output = item.get("output")
            marked = isinstance(output, list) and any(
                isinstance(part, dict) and "prompt_cache_breakpoint" in part for part in output
            )
            if marked and isinstance(output, list):
                item = {
                    **item,
                    "output": [
                        {k: v for k, v in part.items() if k != "prompt_cache_breakpoint"}
                        if isinstance(part, dict)
                        else part
                        for part in output
                    ],
                }
            ids += counter.encode(json.dumps(item))
            if marked:
                breakpoints.append(len(ids))
            continue
        ids += counter.encode(f"<|{item['role']}|>")
        content = item.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content or []
        if not isinstance(parts, list):
            raise _BadRequest(f"{field}.{m}.content: expected a string or a list", field)
        for p, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _BadRequest(f"{field}.{m}.content.{p}: expected an object", field)
            text = part.get("text")
            if not isinstance(text, str):
                text = json.dumps({k: v for k, v in part.items() if k != "prompt_cache_breakpoint"})
            ids += counter.encode(text)
            if "prompt_cache_breakpoint" in part:
                breakpoints.append(len(ids))
        if "tool_calls" in item:
            ids += counter.encode(json.dumps(item["tool_calls"]))
    return _OpenAIPrompt(ids, breakpoints)


def _served_tier(body: dict[str, Any]) -> str:
    """The tier OpenAI names in its answer: the one asked for, ``default`` for ``auto``."""
    asked = body.get("service_tier")
    return asked if isinstance(asked, str) and asked != "auto" else "default"


def _completion_usage(prompt_tokens: int, cached: int, written: int, reply: str) -> dict[str, Any]:
    output = _counter().count(reply)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output,
        "total_tokens": prompt_tokens + output,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
    }
