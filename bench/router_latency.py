"""How long the precise router takes to pick a replica, in process, per request.

    .venv/bin/python bench/router_latency.py [--requests 3000] [--capacity 500]

1. `RouterState.route` (the decision: cached runs from the block index, the
   eviction cost from the reuse model, the work budget, `choose_replica`) over
   the first N requests of the Mooncake conversation trace on 8 replicas, its
   hash ids standing in for block hashes. Each replica's engine is emulated
   from its KV events: the chosen replica stores the request's blocks and
   removes its least recently used ones past `--capacity`. Side by side: the
   same router without the replicas' capacity (no reuse model, no budget).
2. Block hashing of one prompt (`event_block_hashes`, sha256_cbor, 32-token
   blocks, salted), the other per-request cost inside the router, at 1k, 4k and
   16k tokens.

Prints median and 99th percentile in microseconds. Not measured here: the
`/tokenize` round trip to a replica and the proxying itself (network and the
engine's own work).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from prefixkit.engine_adapter.precise_router import RouterSettings, RouterState
from prefixkit.engine_adapter.trace import load_trace
from prefixkit.sdk.block_hash import event_block_hashes
from traces import MOONCAKE_TRACE

REPLICAS = 8


def _percentiles(samples_s: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered) * 1e6, p99 * 1e6


def route_latencies(blocks: Sequence[Sequence[int]], capacity: int | None) -> list[float]:
    """Seconds per `route` call, engines emulated from KV events."""
    settings = RouterSettings(
        replica_urls=[f"http://127.0.0.1:{9000 + r}" for r in range(REPLICAS)],
        kv_endpoints=[f"tcp://127.0.0.1:{9100 + r}" for r in range(REPLICAS)],
        capacity_blocks=[capacity] * REPLICAS if capacity is not None else (),
    )
    state = RouterState(settings)
    index = state.index
    limit = capacity if capacity is not None else 500
    clock = time.perf_counter
    samples = []
    for hashes in blocks:
        started = clock()
        replica, _ = state.route(hashes)
        samples.append(clock() - started)
        lru = index.lru[replica]
        index.stored(replica, [h for h in hashes if h not in lru])
        overflow = len(lru) - limit
        if overflow > 0:
            index.removed(replica, list(lru)[:overflow])
    return samples


def hash_latencies(tokens: int, runs: int) -> list[float]:
    token_ids = [(7 * i) % 49_152 for i in range(tokens)]
    samples = []
    for run in range(runs):
        started = time.perf_counter()
        event_block_hashes(token_ids, 32, algo="sha256_cbor", cache_salt=f"tenant-{run % 4}")
        samples.append(time.perf_counter() - started)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=MOONCAKE_TRACE)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--capacity", type=int, default=500, help="blocks per replica")
    args = parser.parse_args()
    trace = load_trace(args.trace)
    blocks = trace.blocks[: args.requests]

    print(f"RouterState.route, {len(blocks)} Mooncake requests, {REPLICAS} replicas")
    medians = {}
    for label, capacity in (("capacity known (reuse model)", args.capacity), ("unknown", None)):
        p50, p99 = _percentiles(route_latencies(blocks, capacity))
        medians[label] = p50
        print(f"  {label:<30} median {p50:7.1f} us   p99 {p99:7.1f} us")
    known, unknown = medians.values()
    print(f"  reuse model and budget cost {known / unknown:.2f}x the decision without them")

    print("event_block_hashes (sha256_cbor, 32-token blocks, salted)")
    for tokens in (1_000, 4_000, 16_000):
        p50, p99 = _percentiles(hash_latencies(tokens, 200))
        print(f"  {tokens:>6} tokens  median {p50:9.1f} us   p99 {p99:9.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
