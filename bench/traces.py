"""Where the bench scripts find the real traces: ``../shared/data/traces`` beside the repository."""

from pathlib import Path

MOONCAKE_TRACE = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "traces"
    / "mooncake_conversation.jsonl"
)
