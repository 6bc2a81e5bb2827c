"""What the router's in-process prompt tokens cost per request (`PromptTokenizer`).

    .venv/bin/python bench/prompt_tokens.py [--model DIR]

`DIR` is the model folder the engine serves (default: the embedded SmolLM2 in
``~/.cache/prefixkit/models``). Per kind of request, 1,000 requests that differ in
their last message (so none is a repeat), read by `PromptTokenizer.tokens` after 20 to
warm up: a shared system prompt (the memo of pieces between special tokens holds it),
a prompt never seen before, the next turn of a long conversation, text and token-id
completions, Responses and Messages. Prints the median and the fastest of 4 rounds of
200 in microseconds, and the one-time load.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefixkit.engine_adapter.engine.home import models_dir
from prefixkit.engine_adapter.engine.smollm2 import SMOLLM2_NAME
from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "river",
    "garden",
    "market",
    "table",
    "window",
    "letter",
    "morning",
    "history",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _cases(rng: random.Random) -> dict[str, tuple[str, Callable[[int], dict[str, Any]]]]:
    shared = _text(rng, 550)
    long_system = _text(rng, 1500)
    turns = [_text(rng, 20) for _ in range(12)]

    def conversation(i: int) -> dict[str, Any]:
        history = [
            {"role": role, "content": f"turn {k} {turns[k]}"}
            for k in range(6)
            for role in ("user", "assistant")
        ]
        return {
            "messages": [
                {"role": "system", "content": long_system},
                *history,
                {"role": "user", "content": f"question {i}"},
            ]
        }

    def chat(system: str, i: int) -> dict[str, Any]:
        return {
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"{i} {_text(rng, 30)}"},
            ]
        }

    return {
        "chat, ~60 tokens": ("/v1/chat/completions", lambda i: chat("Be brief.", i)),
        "chat, ~600 tokens, shared system prompt": (
            "/v1/chat/completions",
            lambda i: chat(shared, i),
        ),
        "chat, ~600 tokens, nothing seen before": (
            "/v1/chat/completions",
            lambda i: chat(f"{i} {_text(rng, 550)}", i),
        ),
        "chat, next turn of a long conversation": ("/v1/chat/completions", conversation),
        "completion, ~600 tokens of new text": (
            "/v1/completions",
            lambda i: {"prompt": f"{i} {_text(rng, 580)}"},
        ),
        "completion, 600 token ids": ("/v1/completions", lambda i: {"prompt": list(range(600))}),
        "responses, ~600 tokens, shared instructions": (
            "/v1/responses",
            lambda i: {"instructions": shared, "input": f"{i} {_text(rng, 30)}"},
        ),
        "messages, ~600 tokens, shared system prompt": (
            "/v1/messages",
            lambda i: {
                "system": shared,
                "messages": [{"role": "user", "content": f"{i} {_text(rng, 30)}"}],
            },
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=models_dir() / SMOLLM2_NAME)
    args = parser.parse_args()
    started = time.perf_counter()
    tokenizer = PromptTokenizer.load(args.model)
    loaded = time.perf_counter() - started
    if not isinstance(tokenizer, PromptTokenizer):
        raise SystemExit(f"cannot load {args.model}: {tokenizer.reason}")
    for name, (path, make) in _cases(random.Random(0)).items():
        bodies = [make(i) for i in range(820)]
        first = tokenizer.tokens(path, bodies[0])
        if not isinstance(first, PromptTokens):
            raise SystemExit(f"{name}: {first.reason}")
        for body in bodies[:20]:
            tokenizer.tokens(path, body)
        rounds = []
        for r in range(4):
            chunk = bodies[20 + r * 200 : 20 + (r + 1) * 200]
            start = time.perf_counter()
            for body in chunk:
                tokenizer.tokens(path, body)
            rounds.append((time.perf_counter() - start) / len(chunk) * 1e6)
        print(
            f"{name:46s} {len(first.token_ids):5d} tokens  "
            f"median {statistics.median(rounds):6.0f} us  fastest {min(rounds):6.0f} us"
        )
    print(f"load, once per model: {loaded:.2f} s")


if __name__ == "__main__":
    main()
