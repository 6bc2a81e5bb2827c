"""Prompts of the provider tests (a support app with a tool, long instructions and a policy),
and the plain view of a rendered request that the tests read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefixkit.sdk import Prompt, Segment

LONG_INSTRUCTIONS = (
    "You are the support assistant of Nimbus Storage. Answer from the price list and the "
    "documents only, show the arithmetic, quote the relevant line, and never invent a limit "
    "or a command. "
) * 60


def support_prompt(question: str = "How much is 500 GB of egress?") -> Prompt:
    """A realistic layout: a tool, long static instructions, a versioned policy, a document."""
    return Prompt(
        tools=[
            {
                "name": "lookup_invoice",
                "description": "Fetch an invoice by id.",
                "input_schema": {
                    "type": "object",
                    "properties": {"invoice_id": {"type": "string"}},
                    "required": ["invoice_id"],
                },
            }
        ],
        system=[
            Segment.static(LONG_INSTRUCTIONS, name="instructions"),
            Segment.versioned("Refund policy: refunds within 30 days.", version="3", name="policy"),
        ],
        context=["Price list: egress $0.09/GB, storage $0.02/GB-month."],
        messages=[Segment.dynamic(question)],
        name="support",
    )


def plain(request: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered request as a plain dict: the tests read any field of it by key, where the
    request's own type says a field is text or blocks, present or not."""
    return dict(request)
