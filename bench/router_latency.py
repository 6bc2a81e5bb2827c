"""How long the precise router takes to pick a replica, in process, per request.

    .venv/bin/python bench/router_latency.py [--requests 3000] [--capacity 500] [--in-flight 64]

1. `RouterState.route` (the decision: cached runs from the block index, the
   eviction cost from the reuse model, the work budget, `choose_replica`) over
   the first N requests of the Mooncake conversation trace on 8 replicas, its
   hash ids standing in for block hashes. Each replica's engine is emulated
   from its KV events: the chosen replica stores the request's blocks and
   removes its least recently used ones past `--capacity` (a request's tail
   before its head, as vLLM frees them). Side by side: the same router without
   the replicas' capacity (no reuse model, no budget), and the same router with
   `--in-flight` requests open at once (each ends that many requests after it
   was routed; their blocks count as coming to their replica until then).
2. Block hashing of one prompt (`event_block_hashes`, sha256_cbor, 32-token
   blocks, salted), the other per-request cost inside the router, at 1k, 4k and
   16k tokens. Side by side: the same chain hashed through ``cbor2.dumps`` (what
   `cbor_block` replaces; the digests are checked equal).
3. A conversation's next turn: a 4k-token prompt whose first 3k tokens the
   previous turn sent, hashed through the router's `PrefixHashMemo` (which saw
   that turn) against hashing it from scratch (the hashes are checked equal).

Prints medians (and the decision's 99th percentile) in microseconds. Not measured here: the
`/tokenize` round trip to a replica and the proxying itself (network and the
engine's own work).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import cbor2
from prefixkit.engine_adapter import load_trace
from prefixkit.engine_adapter.routing.router_state import Placement, RouterSettings, RouterState
from prefixkit.sdk import PrefixHashMemo, event_block_hash, event_block_hashes, none_hash
from prefixkit.testing.fake_vllm import PrefixCache
from samples import percentile
from traces import MOONCAKE_TRACE

REPLICAS = 8


def _percentiles(samples_s: Sequence[float]) -> tuple[float, float]:
    """Median and 99th percentile, in microseconds."""
    return statistics.median(samples_s) * 1e6, percentile(samples_s, 0.99) * 1e6


def route_latencies(
    blocks: Sequence[Sequence[int]], capacity: int | None, in_flight: int = 0
) -> list[float]:
    """Seconds per `route` call, engines emulated from KV events, `in_flight`
    requests open at once."""
    settings = RouterSettings(
        replica_urls=[f"http://127.0.0.1:{9000 + r}" for r in range(REPLICAS)],
        kv_endpoints=[f"tcp://127.0.0.1:{9100 + r}" for r in range(REPLICAS)],
        capacity_blocks=[capacity] * REPLICAS if capacity is not None else (),
    )
    state = RouterState(settings)
    index = state.index
    engines = [PrefixCache(capacity or 500) for _ in range(REPLICAS)]
    open_requests: deque[Placement] = deque()
    clock = time.perf_counter
    samples = []
    for hashes in blocks:
        started = clock()
        placement = state.route(hashes)
        samples.append(clock() - started)
        stored, evicted = engines[placement.replica].admit(hashes)
        index.stored(placement.replica, stored)
        index.removed(placement.replica, evicted)
        open_requests.append(placement)
        if len(open_requests) > in_flight:
            state.finished(open_requests.popleft())
    return samples


def hashes_via_cbor2(token_ids: Sequence[int], block_size: int, cache_salt: str) -> list[int]:
    """The sha256_cbor chain with every block encoded by ``cbor2.dumps``."""
    parent = none_hash("sha256_cbor")
    extra: object = (("cache_salt", cache_salt),)
    hashes = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        block = (parent, tuple(token_ids[start : start + block_size]), extra)
        parent = hashlib.sha256(cbor2.dumps(block, canonical=True)).digest()
        hashes.append(event_block_hash(parent))
        extra = None
    return hashes


def _prefixkit_hashes(token_ids: Sequence[int], block_size: int, cache_salt: str) -> list[int]:
    return event_block_hashes(token_ids, block_size, algo="sha256_cbor", cache_salt=cache_salt)


def hash_latencies(tokens: int, runs: int, hasher: Callable[..., list[int]]) -> list[float]:
    token_ids = [(7 * i) % 49_152 for i in range(tokens)]
    samples = []
    for run in range(runs):
        started = time.perf_counter()
        hasher(token_ids, 32, f"tenant-{run % 4}")
        samples.append(time.perf_counter() - started)
    return samples


def next_turn_latencies(tokens: int, seen: int, runs: int) -> tuple[list[float], list[float]]:
    """Seconds to hash each run's prompt of `tokens` whose first `seen` tokens a
    previous turn sent: (through a memo that hashed that turn, from scratch)."""
    memo = PrefixHashMemo(32, algo="sha256_cbor")
    memoised, scratch = [], []
    for run in range(runs):
        token_ids = [(7 * i + 13 * run) % 49_152 for i in range(tokens)]
        salt = f"tenant-{run % 4}"
        memo.hashes(token_ids[:seen], salt)  # the previous turn
        started = time.perf_counter()
        through_memo = memo.hashes(token_ids, salt)
        memoised.append(time.perf_counter() - started)
        started = time.perf_counter()
        from_scratch = event_block_hashes(token_ids, 32, algo="sha256_cbor", cache_salt=salt)
        scratch.append(time.perf_counter() - started)
        if through_memo != from_scratch:
            raise SystemExit("PrefixHashMemo disagrees with event_block_hashes")
    return memoised, scratch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=MOONCAKE_TRACE)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--capacity", type=int, default=500, help="blocks per replica")
    parser.add_argument(
        "--in-flight", type=int, default=64, help="requests open at once in the third run"
    )
    args = parser.parse_args()
    trace = load_trace(args.trace)
    blocks = trace.blocks[: args.requests]

    print(f"RouterState.route, {len(blocks)} Mooncake requests, {REPLICAS} replicas")
    medians = {}
    for label, capacity, in_flight in (
        ("capacity known (reuse model)", args.capacity, 0),
        ("unknown", None, 0),
        (f"known, {args.in_flight} in flight", args.capacity, args.in_flight),
    ):
        p50, p99 = _percentiles(route_latencies(blocks, capacity, in_flight))
        medians[label] = p50
        print(f"  {label:<30} median {p50:7.1f} us   p99 {p99:7.1f} us")
    known, unknown, busy = medians.values()
    print(f"  reuse model and budget cost {known / unknown:.2f}x the decision without them")
    print(f"  {args.in_flight} requests in flight cost {busy / known:.2f}x the decision with none")

    print("block hashes of one prompt (sha256_cbor, 32-token blocks, salted)")
    sample = [(11 * i) % 151_000 for i in range(4_000)]
    if _prefixkit_hashes(sample, 32, "t") != hashes_via_cbor2(sample, 32, "t"):
        raise SystemExit("cbor_block disagrees with cbor2: the hashes differ")
    for tokens in (1_000, 4_000, 16_000):
        ours, _ = _percentiles(hash_latencies(tokens, 200, _prefixkit_hashes))
        reference, _ = _percentiles(hash_latencies(tokens, 200, hashes_via_cbor2))
        print(
            f"  {tokens:>6} tokens  event_block_hashes median {ours:8.1f} us"
            f"   via cbor2.dumps {reference:8.1f} us   {reference / ours:.2f}x"
        )
    memoised, scratch = (_percentiles(s)[0] for s in next_turn_latencies(4_000, 3_000, 200))
    print(
        f"next turn, 4000 tokens of which 3000 sent before: PrefixHashMemo median {memoised:.1f} us"
        f"   from scratch {scratch:.1f} us   {scratch / memoised:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
