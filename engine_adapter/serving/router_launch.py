"""Start the router `prefixkit serve --replicas N` puts in front of the replicas.

    with launch_router(replica_set, "cache_aware", "127.0.0.1", 8090, run_dir, report) as url:
        ...  # url is the router's OpenAI-compatible base URL

* ``cache_aware`` (default): real SMG (`smg_launch`), its ``--max-tree-size``
  derived from the replicas' KV capacity read from their ``/metrics`` at
  ``smg_chars_per_token`` characters per token; log in ``run_dir/router.log``.
* ``precise``: prefixkit's KV-event router (`precise_router`), served by uvicorn
  in a background thread; it reads the replicas' KV-event endpoints, block size,
  hash algorithm and seed from their configs, and their capacity from ``/metrics``.
  With ``decision_log=True`` it appends every routing decision to
  ``run_dir/decisions.jsonl``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from ..engine.metrics import fetch_cache_metrics
from ..errors import DeploymentConfigError, RouterStartError
from .keepalive import served
from .smg import CHARS_PER_TOKEN, SmgSettings, launch_smg, smg_max_tree_size, stop_smg

if TYPE_CHECKING:
    from ..engine.replicas import ReplicaSet

__all__ = ["launch_router"]

Report = Callable[[str], None]


def _wait_ready(url: str, timeout: float, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RouterStartError(f"the router at {url} exited during start-up")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RouterStartError(f"the router at {url} was not ready after {timeout:.0f} s")


@contextlib.contextmanager
def _smg(
    replica_set: ReplicaSet,
    host: str,
    port: int,
    run_dir: Path,
    chars_per_token: float,
    report: Report,
) -> Iterator[str]:
    metrics = [fetch_cache_metrics(url) for url in replica_set.base_urls]
    tree = smg_max_tree_size(metrics, chars_per_token)
    report(f"starting SMG cache_aware on {host}:{port} (max tree size {tree:,} characters)")
    process = launch_smg(
        SmgSettings(worker_urls=replica_set.base_urls, host=host, port=port, max_tree_size=tree),
        log=run_dir / "router.log",
    )
    try:
        _wait_ready(f"http://{host}:{port}", 120.0, lambda: process.poll() is None)
        yield f"http://{host}:{port}"
    finally:
        stop_smg(process)


@contextlib.contextmanager
def _precise(
    replica_set: ReplicaSet, host: str, port: int, decision_log: Path | None, report: Report
) -> Iterator[str]:
    from prefixkit.sdk.block_hash import DEFAULT_NONE_HASH_SEED

    from ..routing.router import RouterSettings, precise_router_app

    configs = [replica.config for replica in replica_set.replicas]
    first = configs[0]
    if first.prefix_caching_hash_algo not in ("sha256", "sha256_cbor"):
        raise DeploymentConfigError(
            f"--router precise needs a reproducible block hash; the replicas use "
            f"{first.prefix_caching_hash_algo}: use sha256_cbor (the default)"
        )
    if any(config.kv_events_endpoint is None for config in configs):
        raise DeploymentConfigError("--router precise needs KV events: drop --no-kv-events")
    capacity = [fetch_cache_metrics(url).num_blocks for url in replica_set.base_urls]
    settings = RouterSettings(
        replica_urls=replica_set.base_urls,
        kv_endpoints=[config.kv_events_endpoint or "" for config in configs],
        kv_replay_endpoints=[config.kv_events_replay_endpoint for config in configs],
        kv_topic=first.kv_events_topic,
        block_size=first.block_size,
        hash_algo=first.prefix_caching_hash_algo,  # type: ignore[arg-type]
        hash_seed=first.hash_seed or DEFAULT_NONE_HASH_SEED,
        capacity_blocks=capacity,
        decision_log=decision_log,
    )
    report(f"starting the precise router on {host}:{port} ({len(configs)} replicas)")
    if decision_log is not None:
        report(f"routing decisions are appended to {decision_log}")
    server = served(precise_router_app(settings), host, port)
    thread = threading.Thread(target=server.run, name="prefixkit-precise-router", daemon=True)
    thread.start()
    try:
        _wait_ready(f"http://{host}:{port}", 60.0, thread.is_alive)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10.0)


@contextlib.contextmanager
def launch_router(
    replica_set: ReplicaSet,
    policy: str,
    host: str,
    port: int,
    run_dir: Path,
    report: Report,
    *,
    decision_log: bool = False,
    smg_chars_per_token: float = CHARS_PER_TOKEN,
) -> Iterator[str]:
    """Run the `policy` router ("cache_aware" or "precise") until the block exits;
    `decision_log`: the precise router logs its decisions in the run directory;
    `smg_chars_per_token`: the traffic's characters per token, which sizes SMG's tree."""
    if decision_log and policy != "precise":
        raise DeploymentConfigError(
            f"only the precise router logs its decisions; {policy} does not: "
            "add --router precise, or drop --decision-log"
        )
    if policy == "cache_aware":
        with _smg(replica_set, host, port, run_dir, smg_chars_per_token, report) as url:
            yield url
    elif policy == "precise":
        log = run_dir / "decisions.jsonl" if decision_log else None
        with _precise(replica_set, host, port, log, report) as url:
            yield url
    else:
        raise DeploymentConfigError(f"unknown router {policy!r}: use cache_aware or precise")
