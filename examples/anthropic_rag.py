"""Retrieval-augmented support chat on Anthropic with prefixkit cache breakpoints.

Two customers each ask three questions. Every request starts with the same
static instructions and price list, cached across customers: a customer
arrives every 20 minutes (`reuse_interval`), longer than a 5m TTL lives, so
`render_anthropic` picks the 1h TTL for them. Then come the customer's
retrieved account documents (cached per session) and the conversation (the
rolling 5m breakpoint follows the latest turn).

    python examples/anthropic_rag.py --dry-run     # official client, simulated API
    ANTHROPIC_API_KEY=... python examples/anthropic_rag.py

Prints, per request, where the cache markers sit on the wire and the
CacheStats computed from the response's usage; then the totals and whether
caching the static prefix pays (break-even).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from official_client import official_client, summarize_body
from prefixkit.sdk import (
    AnthropicClient,
    CacheStats,
    PrefixkitWarning,
    Prompt,
    Segment,
    TiktokenTokenizer,
    break_even,
)

INSTRUCTIONS = """You are the support assistant of Nimbus Storage.
Answer only from the price list and the customer's account documents below.
Show the arithmetic for every amount, quote the line you used, and say so
plainly when the documents do not contain the answer. Never invent a limit,
a discount or a command."""

REGIONS = ["eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-east", "sa-east"]
SERVICES = [
    ("standard storage", "GB-month", 0.020),
    ("infrequent storage", "GB-month", 0.0125),
    ("archive storage", "GB-month", 0.004),
    ("egress to internet", "GB", 0.090),
    ("egress between regions", "GB", 0.020),
    ("PUT/POST requests", "1,000 requests", 0.005),
    ("GET requests", "1,000 requests", 0.0004),
    ("archive restore, standard", "GB", 0.030),
    ("archive restore, expedited", "GB", 0.100),
    ("snapshot storage", "GB-month", 0.015),
]


def price_list() -> str:
    """The public price list: identical for every customer, so it belongs to the static tier."""
    lines = ["# Price list (USD)", ""]
    for number, region in enumerate(REGIONS):
        factor = 1 + number * 0.05
        lines.append(f"## Region {region}")
        for name, unit, price in SERVICES:
            lines.append(f"- {name}: ${price * factor:.4f} per {unit} in {region}")
        lines.append("")
    lines.append("Volume discounts: 5% above 100 TB-month, 10% above 1 PB-month, per region.")
    return "\n".join(lines * 4)


ACCOUNTS: dict[str, list[str]] = {
    "alice": [
        "Account alice-co: region eu-west, 40 TB standard storage, 12 TB archive.",
        "Invoice 2026-10 for alice-co: egress 3.2 TB, 1.1M PUT requests, total $412.18.",
        "Support plan: business, response within 4 hours.",
    ],
    "bob": [
        "Account bob-labs: region us-east, 220 TB standard storage, cross-region replication.",
        "Invoice 2026-10 for bob-labs: inter-region egress 18 TB, total $5,140.77.",
        "Support plan: developer, response within 24 hours.",
    ],
}

# Seconds between two customers' first requests: the static prefix is reused that often.
CUSTOMER_INTERVAL = 20 * 60

QUESTIONS = {
    "alice": [
        "How much would 5 TB of egress to the internet cost me?",
        "And if I restore 2 TB from archive with expedited restore?",
        "Does my support plan cover weekend incidents?",
    ],
    "bob": [
        "Do I get a volume discount on my storage?",
        "What did inter-region egress cost me last month per GB?",
        "Which region would be cheapest for my archive?",
    ],
}


def first_turn(customer: str) -> Prompt:
    """The first request of a customer's session; later turns extend it with `next_turn`."""
    return Prompt(
        system=[
            Segment.static(INSTRUCTIONS, name="instructions"),
            Segment.versioned(price_list(), version="2026-11", name="price-list"),
        ],
        # Retrieved once per session and kept in a fixed order: re-retrieving (or
        # re-ordering) per question would change the prefix and lose the cache.
        context=sorted(ACCOUNTS[customer]),
        messages=[Segment.dynamic(QUESTIONS[customer][0])],
        name="support-rag",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="simulated API, no key needed")
    parser.add_argument("--model", default="claude-opus-4-5")
    args = parser.parse_args(argv)

    connected = official_client("anthropic", args.dry_run)
    if connected is None:
        return 2
    official, last_body = connected

    client = AnthropicClient(official)
    all_stats: list[CacheStats] = []
    reply = ""
    for customer in ACCOUNTS:
        prompt = first_turn(customer)
        for turn, question in enumerate(QUESTIONS[customer]):
            if turn:
                prompt = prompt.next_turn(reply, question)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PrefixkitWarning)
                message, stats = client.create(
                    prompt, model=args.model, max_tokens=300, reuse_interval=CUSTOMER_INTERVAL
                )
            reply = "".join(block.text for block in message.content if block.type == "text")
            all_stats.append(stats)
            print(f"request {len(all_stats)} ({customer}): {question}")
            print(summarize_body(last_body()))
            for warning in caught:
                print(f"  warning: {warning.message}")
            print(f"  {stats.summary()}")

    total = CacheStats.total(all_stats)
    print(f"TOTAL {total.summary()}")
    static_tokens = TiktokenTokenizer("cl100k_base").count(INSTRUCTIONS + price_list())
    verdict = break_even(
        static_tokens, reuses=len(all_stats) - 1, provider="anthropic", model=args.model, ttl="1h"
    )
    print(
        f"break-even (static prefix ~{static_tokens} tokens, 1h TTL, "
        f"{verdict.reuses} reuses): pays={verdict.pays}; {verdict.reason}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
