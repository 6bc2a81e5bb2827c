"""The support assistant written the way that silently loses every cache hit.

Do not copy this file: `prefixkit lint examples/broken_app` explains each problem,
and `examples/support_app/assistant.py` is the fixed version.
"""

from __future__ import annotations

import json
from datetime import datetime as dt
from pathlib import Path

import anthropic

APP_DIR = Path(__file__).resolve().parent
TOOL_NAMES = {"open_ticket", "status_page", "refund"}


def tool_definitions() -> list[dict[str, object]]:
    # A set has no stable order across processes: the tool list changes between workers.
    return [{"name": name, "input_schema": {"type": "object"}} for name in TOOL_NAMES]


def system_prompt(customer_name: str) -> str:
    policy = (APP_DIR / "prompts" / "support@v3.md").read_text()
    # A clock and a customer's name in the system prompt: every request is a new prefix.
    return f"{policy}\n\nNow: {dt.now().isoformat()}. Customer: {customer_name}."


def ask(client: anthropic.Anthropic, customer_name: str, summary: str, question: str) -> str:
    account = {"plan": "business", "region": "eu-central", "features": ["objects", "volumes"]}
    reply = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        tools=tool_definitions(),
        system=[
            # The conversation summary changes every turn, and it comes first.
            {"type": "text", "text": summary},
            {
                "type": "text",
                "text": system_prompt(customer_name),
                "cache_control": {"type": "ephemeral", "ttl": "5m"},
            },
            {
                "type": "text",
                # Key order of json.dumps follows insertion order: not canonical.
                "text": json.dumps(account),
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        ],
        messages=[{"role": "user", "content": question}],
    )
    return reply.content[0].text
