"""The driver of a Ray deployment, run in the Ray engine's interpreter by `launch.serve_on_ray`:

    RAY_PYTHON -m prefixkit.engine_adapter.ray.cluster SPEC.json

SPEC.json holds the app's arguments (`settings.app_args`), the Ray address (null: start a
local cluster of ``nodes`` Ray nodes on this machine, each offering ``replica_slot``
resources so that replicas spread over them), the HTTP address, Serve's HTTP options (its
proxy's address and bounds, `settings.serve_http_options`), the app name and the state
file. Once the app answers, the state file gets the URL, the cluster address and the
replicas' actor names. On SIGTERM the app is deleted, and the local cluster (if it was
started here) shut down: only its own processes (``ray stop`` would stop every Ray process
on the machine).
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _start_local(spec: dict[str, Any]) -> Any:
    from ray.cluster_utils import Cluster

    # Ray writes its "current cluster" file into $RAY_TMPDIR/ray (set by the launcher)
    Path(os.environ.get("RAY_TMPDIR", spec["temp_dir"]), "ray").mkdir(parents=True, exist_ok=True)
    nodes = spec["nodes"]
    per_node = math.ceil(spec["replicas"] / nodes)
    cpus = spec["cpus_per_replica"] * per_node
    common = {
        "include_dashboard": False,
        "object_store_memory": 200 * 1024 * 1024,
        "resources": {"replica_slot": per_node},
    }
    # the head also runs the controller, the proxy and the ingress
    head = {**common, "num_cpus": cpus + 1, "temp_dir": spec["temp_dir"]}
    cluster = Cluster(initialize_head=True, head_node_args=head, shutdown_at_exit=True)
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus, resources={"replica_slot": per_node})
    return cluster


def _replica_actors(app: str) -> list[str]:
    import ray

    names = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        item["name"]
        for item in names
        if item.get("namespace") == "serve"
        and item["name"].startswith(f"SERVE_REPLICA::{app}#")
        and "Server" in item["name"]
    )


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    import ray
    from ray import serve

    from .app import build_app

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    cluster = _start_local(spec) if spec["address"] is None else None
    address = cluster.address if cluster is not None else spec["address"]
    try:
        ray.init(address=address, logging_level="WARNING")
        serve.start(http_options=spec["http_options"], proxy_location="HeadOnly")
        app = spec["app_name"]
        serve.run(build_app(spec["app_args"]), name=app, route_prefix="/")
        state = {
            "url": f"http://{spec['http_host']}:{spec['http_port']}",
            "address": address,
            "replicas": _replica_actors(app),
        }
        Path(spec["state_file"]).write_text(json.dumps(state, indent=2) + "\n")
        print("ready", json.dumps(state), flush=True)
        while not stopping.wait(1.0):
            pass
        serve.delete(app)
        if cluster is not None:
            serve.shutdown()
    finally:
        if cluster is not None:
            ray.shutdown()
            cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
