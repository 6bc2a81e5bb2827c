"""A research-assistant conversation on the OpenAI Responses API with explicit breakpoints.

GPT-5.6 models take `prompt_cache_breakpoint` markers on input parts and
request-level `prompt_cache_options`. prefixkit marks the end of the static
instructions, the end of the versioned style guide and the latest user turn,
sets `mode: "explicit"` (the dynamic question is never written) and a 12h TTL,
and derives `prompt_cache_key` from the static prefix (salted per tenant).

    python examples/openai_responses.py --dry-run     # official client, simulated API
    OPENAI_API_KEY=... python examples/openai_responses.py
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

INSTRUCTIONS = """You are a research assistant for a materials-science lab.
Answer from the glossary and the papers the user quotes; cite the glossary
entry you used; say "not in the glossary" rather than guessing."""


def glossary() -> str:
    """A fixed glossary: static content shared by every conversation."""
    terms = [
        ("yield strength", "stress at which a material begins to deform plastically"),
        ("creep", "slow deformation under constant stress, usually at high temperature"),
        ("fatigue limit", "stress amplitude below which a material can endure infinite cycles"),
        ("toughness", "energy a material absorbs before fracturing"),
        ("hardness", "resistance to localised plastic deformation"),
        ("annealing", "heat treatment that reduces hardness and increases ductility"),
        ("ductility", "ability to deform plastically before fracture"),
        ("grain boundary", "interface between two crystallites in a polycrystalline material"),
    ]
    lines = ["# Glossary"]
    for round_ in range(12):
        for term, meaning in terms:
            lines.append(f"- {term} ({round_ + 1}): {meaning}; see handbook section {round_ + 3}.")
    return "\n".join(lines)


STYLE_GUIDE = "Style guide v4: answer in at most five sentences; units in SI; no bullet lists."

QUESTIONS = [
    "What is the difference between creep and fatigue?",
    "Which of the two matters more for a turbine blade?",
    "How does annealing change ductility?",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="simulated API, no key needed")
    parser.add_argument("--model", default="gpt-5.6-sol")
    args = parser.parse_args(argv)

    connected = official_client("openai", args.dry_run)
    if connected is None:
        return 2
    official, last_body = connected
    salt_secret = os.environ.get("PREFIXKIT_SALT_SECRET", "example-secret-change-me")

    client = OpenAIClient(official)
    prompt = Prompt(
        system=[
            Segment.static(INSTRUCTIONS),
            Segment.static(glossary(), name="glossary"),
            Segment.versioned(STYLE_GUIDE, version="4", name="style"),
        ],
        messages=[Segment.dynamic(QUESTIONS[0])],
        name="research-assistant",
    )
    all_stats: list[CacheStats] = []
    reply = ""
    for turn, question in enumerate(QUESTIONS):
        if turn:
            prompt = prompt.next_turn(reply, question)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PrefixkitWarning)
            response, stats = client.responses(
                prompt,
                model=args.model,
                tenant="lab-7",
                salt_secret=salt_secret,
                cache_ttl="12h",
                max_output_tokens=300,
            )
        reply = response.output_text
        all_stats.append(stats)
        print(f"request {len(all_stats)}: {question}")
        print(summarize_body(last_body()))
        for warning in caught:
            print(f"  warning: {warning.message}")
        print(f"  {stats.summary()}")
    print(f"TOTAL {CacheStats.total(all_stats).summary()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
