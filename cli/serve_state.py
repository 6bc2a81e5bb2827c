"""RUN_DIR/serve.json: where a local `prefixkit serve` is reachable (its endpoint, router and
replicas), for `prefixkit serve status` and `prefixkit warm`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefixkit.engine_adapter import Deployment

__all__ = ["SERVE_STATE", "write_serve_state"]

SERVE_STATE = "serve.json"


def write_serve_state(run_dir: Path, deployment: Deployment) -> None:
    state = {
        "endpoint": deployment.url,
        "router": deployment.router_url,
        "replicas": deployment.replica_urls,
    }
    (run_dir / SERVE_STATE).write_text(json.dumps(state, indent=2) + "\n")
