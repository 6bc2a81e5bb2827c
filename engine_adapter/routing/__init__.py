"""Cache-aware routing: which replica holds which block (from the engines' KV events),
the precise decision (`policy`, `reuse`) shared with the replay, and the live
router's state (`router_state`)."""

from pathlib import Path

from ..compiled import check_build

check_build(Path(__file__).parent)
