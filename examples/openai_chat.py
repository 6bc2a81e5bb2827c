"""Multi-tenant support chat on OpenAI Chat Completions with a salted prompt_cache_key.

Two tenants share the same static instructions, tool schema and catalog; each
runs a three-turn conversation. prefixkit lays every request out static-first
and derives `prompt_cache_key` from the static prefix's digest salted with the
tenant (`tenant_salt`), so one tenant's requests are routed together while the
tenants' keys differ (OpenAI allows about 15 requests/min per prefix and key
before spilling to other machines).

    python examples/openai_chat.py --dry-run     # official client, simulated API
    OPENAI_API_KEY=... python examples/openai_chat.py

`--model gpt-5.6-sol` switches to explicit `prompt_cache_breakpoint` markers.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from official_client import official_client, summarize_body
from prefixkit.sdk import CacheStats, OpenAIClient, PrefixkitWarning, Prompt, Segment

INSTRUCTIONS = """You are the order assistant of a hardware shop.
Answer from the catalog only. Quote prices with the currency, show totals with
the arithmetic, and call lookup_order when the customer gives an order id."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Fetch an order by id, with its items and shipping state.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string", "description": "e.g. ORD-1234"}},
                "required": ["order_id"],
            },
        },
    }
]


def catalog() -> str:
    """The product catalog: the same for every tenant, part of the static prefix."""
    kinds = ["hex bolt", "wood screw", "wall anchor", "washer", "hinge", "bracket", "nut"]
    sizes = ["M3", "M4", "M5", "M6", "M8", "M10", "M12"]
    lines = ["# Catalog (EUR per pack of 100)"]
    for k, kind in enumerate(kinds):
        for s, size in enumerate(sizes):
            price = 2.5 + k * 0.7 + s * 0.45
            lines.append(
                f"- {kind} {size}, zinc plated: {price:.2f} EUR; stainless: {price * 1.8:.2f} EUR"
            )
    return "\n".join(lines * 2)


QUESTIONS = {
    "acme": ["What do 3 packs of M6 hex bolts cost?", "And in stainless?", "Where is ORD-1042?"],
    "globex": ["Do you sell M12 hinges?", "Price for 10 packs?", "Any bulk discount?"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="simulated API, no key needed")
    parser.add_argument("--model", default="gpt-4.1")
    args = parser.parse_args(argv)

    connected = official_client("openai", args.dry_run)
    if connected is None:
        return 2
    official, last_body = connected
    salt_secret = os.environ.get("PREFIXKIT_SALT_SECRET", "example-secret-change-me")

    client = OpenAIClient(official)
    all_stats: list[CacheStats] = []
    reply = ""
    for tenant, questions in QUESTIONS.items():
        prompt = Prompt(
            tools=TOOLS,
            system=[Segment.static(INSTRUCTIONS), Segment.static(catalog(), name="catalog")],
            messages=[Segment.dynamic(questions[0])],
            name="order-chat",
        )
        for turn, question in enumerate(questions):
            if turn:
                prompt = prompt.next_turn(reply, question)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PrefixkitWarning)
                completion, stats = client.chat(
                    prompt,
                    model=args.model,
                    tenant=tenant,
                    salt_secret=salt_secret,
                    max_completion_tokens=300,
                )
            reply = completion.choices[0].message.content or ""
            all_stats.append(stats)
            print(f"request {len(all_stats)} ({tenant}): {question}")
            print(summarize_body(last_body()))
            for warning in caught:
                print(f"  warning: {warning.message}")
            print(f"  {stats.summary()}")
    print(f"TOTAL {CacheStats.total(all_stats).summary()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
