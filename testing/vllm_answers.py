"""vLLM 0.32's generation answers, for the fake replica, in vLLM's shapes.

* `Answer`: a single-prompt generation (Completions, Chat Completions, Responses, Anthropic
  Messages; SageMaker's ``/invocations`` is one of the first two) whole or streamed, its
  ``usage`` from the prompt's `Prefill` (what the prefix cache held and took);
* the APIs with several prompts to a request: the prompts of a request and the answer.
  Batched Chat Completions (``/v1/chat/completions/batch``: a conversation a prompt),
  generative scoring (``/generative_scoring``: the query with each item) and structured
  decisions (``/v1/systemone``: a question a prompt). A body these cannot be read from is
  `Refused`. The fake reads no probabilities: every label is equally likely.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .anthropic_answers import anthropic_message, anthropic_usage, message_events
from .openai_answers import (
    CREATED,
    Reply,
    chat_completion,
    chat_events,
    completion,
    completion_events,
    response_object,
    responses_events,
    sse,
)
from .vllm_http import Refused

__all__ = [
    "Answer",
    "Prefill",
    "batch_chat_completion",
    "batch_conversations",
    "decision_conversations",
    "generative_scores",
    "openai_usage",
    "scoring_prompts",
    "structured_decision",
]


@dataclass(frozen=True)
class Prefill:
    """One prompt looked up in the prefix cache: its blocks, the tokens read from the cache
    (`cached`) and written to it (`created`), the seconds its prefill takes."""

    ids: list[int]
    hashes: list[int]
    cached: int
    created: int
    seconds: float


def openai_usage(prefills: Sequence[Prefill], output: int) -> dict[str, Any]:
    """The OpenAI ``usage`` of `prefills` and `output` tokens, cached tokens included."""
    prompt = sum(len(p.ids) for p in prefills)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": sum(p.cached for p in prefills)},
    }


class Answer:
    """One generation's answer in the shape of its API (`api`: ``completions``, ``chat``,
    ``responses`` or ``messages``), whole or as server-sent events."""

    def __init__(
        self,
        api: str,
        body: dict[str, Any],
        model: str,
        prefill: Prefill,
        reply: Reply,
        number: int,
    ) -> None:
        self.api = api
        self.body = {**body, "model": model}  # vLLM names its model when the body does not
        self.model = model
        self.prefill = prefill
        self.reply = reply
        self.ident = f"fake{number}"

    def usage(self) -> dict[str, Any]:
        prompt, cached, output = len(self.prefill.ids), self.prefill.cached, len(self.reply.pieces)
        if self.api == "messages":
            return anthropic_usage(prompt, cached, self.prefill.created, output)
        if self.api == "responses":
            return {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + output,
            }
        return openai_usage([self.prefill], output)

    def whole(self) -> dict[str, Any]:
        shape = {
            "completions": completion,
            "chat": chat_completion,
            "responses": response_object,
            "messages": anthropic_message,
        }[self.api]
        return shape(self.model, self.ident, self.usage(), self.reply)

    def events(self) -> list[bytes]:
        """The server-sent events of the streamed answer, in order."""
        if self.api == "messages":
            return sse(message_events(self.whole(), self.reply))
        if self.api == "responses":
            return sse(responses_events(self.whole(), self.reply))
        if self.api == "chat":
            return sse(chat_events(self.body, self.ident, self.usage(), self.reply))
        return sse(completion_events(self.body, self.ident, self.usage(), self.reply))


Conversation = list[dict[str, Any]]


def batch_conversations(body: dict[str, Any]) -> list[Conversation]:
    """The conversations of a batched Chat Completions request, in order."""
    conversations = body.get("messages")
    if not (
        isinstance(conversations, list)
        and conversations
        and all(isinstance(c, list) and c for c in conversations)
    ):
        raise Refused(400, "messages must be a non-empty list of conversations", param="messages")
    if body.get("stream"):
        raise Refused(400, "Streaming is not supported for batch chat completions", param="stream")
    return conversations


def batch_chat_completion(
    model: str, ident: str, usage: dict[str, Any], replies: Sequence[Reply]
) -> dict[str, Any]:
    """One ``chat.completion`` with a choice per conversation, indexed as sent."""
    return {
        "id": f"chatcmpl-{ident}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": index,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
            for index, reply in enumerate(replies)
        ],
        "usage": usage,
    }


def scoring_prompts(body: dict[str, Any], tokenize: Callable[[str], list[int]]) -> list[list[int]]:
    """The token ids of each prompt of a generative scoring request: the query, then the
    item (the item first with ``item_first``); text is tokenized, token ids kept."""
    query, items = body.get("query"), body.get("items")
    if not (isinstance(query, str | list) and isinstance(items, list) and items):
        raise Refused(400, "query (text or token ids) and items (a list) are required")

    def ids(part: Any) -> list[int]:
        return list(part) if isinstance(part, list) else tokenize(str(part))

    if body.get("item_first"):
        return [ids(item) + ids(query) for item in items]
    return [ids(query) + ids(item) for item in items]


def generative_scores(
    model: str, ident: str, usage: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """The score of each item of request `body`: the probability of the first label."""
    labels = body.get("label_token_ids")
    score = 1.0 / len(labels) if isinstance(labels, list) and labels else 0.0
    return {
        "id": f"genscore-{ident}",
        "object": "list",
        "created": CREATED,
        "model": model,
        "data": [
            {"index": i, "object": "score", "score": score} for i in range(len(body["items"]))
        ],
        "usage": usage,
    }


def decision_conversations(body: dict[str, Any]) -> list[Conversation]:
    """A conversation per question of a structured decision request: the instructions as
    the system message, the state and the question as the user's."""
    questions = body.get("questions")
    if "state" not in body or not (
        isinstance(questions, dict)
        and questions
        and all(isinstance(q, dict) and "type" in q for q in questions.values())
    ):
        raise Refused(400, "state and questions (id -> question with a type) are required")
    state = body["state"] if isinstance(body["state"], str) else json.dumps(body["state"])
    instructions = body.get("instructions")
    system = [{"role": "system", "content": instructions}] if instructions else []
    return [
        [*system, {"role": "user", "content": f"{state}\n{json.dumps(question)}"}]
        for question in questions.values()
    ]


def structured_decision(
    model: str, ident: str, input_tokens: int, body: dict[str, Any]
) -> dict[str, Any]:
    """The answer to each question of request `body`, one token read for each."""
    questions: dict[str, Any] = body["questions"]
    return {
        "id": f"decision-{ident}",
        "object": "structured_decision",
        "created": CREATED,
        "model": model,
        "answers": {
            qid: {"type": question["type"], "probabilities": {}, "confidence": 0.0}
            for qid, question in questions.items()
        },
        "usage": {"input_tokens": input_tokens, "output_tokens": len(questions)},
        "diagnostics": {qid: {"label_mass": 1.0, "argmax_is_label": True} for qid in questions},
    }
