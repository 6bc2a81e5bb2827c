"""Where the bench scripts find the real trace: the Mooncake conversation trace shipped in
``examples/traces/``."""

from pathlib import Path

MOONCAKE_TRACE = (
    Path(__file__).resolve().parents[1] / "examples" / "traces" / "mooncake_conversation.jsonl.gz"
)
