"""Prompt building for the Northwind support assistant: static first, byte-identical.

The system prompt is a versioned file pinned in `prefixkit.lock`; the retrieved
documents are shared by every conversation of a session; the conversation grows
append-only with `Prompt.next_turn`. Nothing volatile (clock, ids, user names)
reaches the cached prefix: per-tenant isolation comes from the gateway's salt.
"""

from __future__ import annotations

from pathlib import Path

from prefixkit.sdk import Prompt, PromptRegistry, Segment

__all__ = ["APP_DIR", "first_turn", "load_documents", "load_system_prompt"]

APP_DIR = Path(__file__).resolve().parent

TOOLS = [
    {
        "name": "open_ticket",
        "description": "Open a support ticket for a human engineer.",
        "parameters": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "Three-line case summary."},
                "severity": {"type": "string", "enum": ["low", "normal", "high"]},
            },
            "required": ["summary", "severity"],
        },
    },
    {
        "name": "status_page",
        "description": "Look up open incidents for a region and product.",
        "parameters": {
            "type": "object",
            "properties": {
                "region": {"type": "string"},
                "product": {"type": "string", "enum": ["objects", "volumes", "functions"]},
            },
            "required": ["region", "product"],
        },
    },
]


def load_system_prompt(version: str = "v3") -> Segment:
    """The support prompt, verified against `prefixkit.lock` (refuses a drifted file)."""
    registry = PromptRegistry(APP_DIR / "prompts", lock_path=APP_DIR / "prefixkit.lock")
    return registry.load("support", version=version)


def load_documents() -> Segment:
    """The retrieved documentation excerpts, shared by every conversation of a session."""
    text = (APP_DIR / "docs" / "northwind.md").read_text(encoding="utf-8")
    return Segment.session(text, name="northwind-docs")


def first_turn(system: Segment, documents: Segment, question: str) -> Prompt:
    """The first request of a conversation; later turns come from `Prompt.next_turn`."""
    return Prompt(
        tools=TOOLS,
        system=[system],
        context=[documents],
        messages=[Segment.dynamic(question)],
        name="northwind-support",
    )
