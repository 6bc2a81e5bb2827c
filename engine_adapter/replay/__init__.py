"""Trace replay (`prefixkit analyze`): traces, simulated per-replica prefix caches and
load, the simulated routing policies, and the replay that compares them."""

from pathlib import Path

from ..compiled import check_build

check_build(Path(__file__).parent)
