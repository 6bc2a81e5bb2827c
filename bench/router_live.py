"""Routers in front of two real vLLM CPU replicas, side by side: precise vs real SMG vs round-robin.

    .venv/bin/python bench/router_live.py      # ports 18064-18067, about 5 minutes

Two replicas of the embedded model (SmolLM2-135M, 32-token blocks) with a
deliberately small KV cache (`--kv-blocks`, 64 blocks each), KV events on.
Workload: 6 tenants, each with its own system prompt (~12 blocks) and salt
(`tenant_salt`), 2 users each holding a 4-turn conversation (every turn sends
the whole history, as chat clients do; the assistant's earlier answers are
fixed text, so every router gets the same requests). The conversations run
concurrently, at most `--clients` requests in flight, streamed, 8 tokens each.
Round-robin then puts every tenant's system prompt on both replicas, more than
a replica holds; a cache-aware router keeps each tenant on one.

The same requests go through each router in turn, each phase with its own
salts, so no phase reuses another's blocks:

1. round-robin (the client alternates the replicas);
2. real SMG ``cache_aware`` (`prefixkit serve`'s default router, its
   ``--max-tree-size`` from the replicas' KV capacity at the workload's own
   characters per token, measured through ``/tokenize``: what
   ``--smg-chars-per-token`` gives it);
3. ``precise`` (`prefixkit serve --router precise`).

Each router is deployed over the running replicas by `deploy`, as
`prefixkit serve --replicas 2 --no-gateway` runs it (the requests go through the
serving app: to SMG, or to the precise routing stage inside it).

Prints per router: the engines' prefix-cache hit rate (their own counters, a
difference over the phase), time to first token (median, p90); for precise,
its own time before forwarding from its ``server-timing`` header (the
``/tokenize`` round trip to a replica, and hashing + the decision), median and
p99; and the workload's characters per token. The replicas share this machine's cores, so a busy engine also
slows the ``/tokenize`` answers.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from chats import Conversation, conversations
from prefixkit.engine_adapter import ReplicaEndpoint, Topology, deploy, prepare_embedded
from prefixkit.engine_adapter.engine.metrics import fetch_cache_metrics, fleet_interval
from prefixkit.engine_adapter.engine.replicas import ReplicaSet, replica_configs
from prefixkit.engine_adapter.routing.router_state import parse_server_timing
from prefixkit.sdk import tenant_salt
from prefixkit.testing.ttft import StreamReading
from samples import percentile

TENANTS = 6
USERS = 2
TURNS = 4
SECRET = "router-live-bench-secret"


@dataclass
class Timings:
    """Filled as the streams come back: TTFT, and the precise router's server-timing."""

    ttft_s: list[float] = field(default_factory=list)
    tokenize_ms: list[float] = field(default_factory=list)
    route_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class PhaseResult:
    router: str
    hit_rate: float
    timings: Timings


def workload() -> list[Conversation]:
    return conversations(TENANTS, USERS, TURNS, (290, 20, 35))


async def _stream(
    client: httpx.AsyncClient, url: str, body: dict[str, object], timings: Timings
) -> None:
    reading = StreamReading()
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        timing = parse_server_timing(response.headers.get("server-timing"))
        async for line in response.aiter_lines():
            reading.feed(line)
    try:
        timings.ttft_s.append(reading.answer().ttft_s)
    except ValueError:
        raise RuntimeError(f"no token streamed back from {url}") from None
    if timing:
        timings.tokenize_ms.append(timing["tokenize"])
        timings.route_ms.append(timing["route"])


async def _send_all(
    router: str, pick_url: Callable[[], str], model: str, clients: int, timings: Timings
) -> None:
    """Every conversation, turn after turn, at most `clients` requests in flight."""
    gate = asyncio.Semaphore(clients)

    async def converse(client: httpx.AsyncClient, conversation: Conversation) -> None:
        salt = tenant_salt(f"{router}:{conversation.tenant}", SECRET)
        for messages in conversation.turns:
            body = {
                "model": model,
                "messages": messages,
                "max_tokens": 8,
                "temperature": 0,
                "stream": True,
                "cache_salt": salt,
            }
            async with gate:
                await _stream(client, pick_url(), body, timings)

    async with httpx.AsyncClient(timeout=600) as client:
        await asyncio.gather(*(converse(client, c) for c in workload()))


def measure_phase(
    router: str, pick_url: Callable[[], str], replica_urls: list[str], model: str, clients: int
) -> PhaseResult:
    """One router's phase, its hit rate from the replicas' counters before and after."""
    before = [fetch_cache_metrics(url) for url in replica_urls]
    timings = Timings()
    asyncio.run(_send_all(router, pick_url, model, clients, timings))
    after = [fetch_cache_metrics(url) for url in replica_urls]
    return PhaseResult(router, fleet_interval(before, after).hit_rate, timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-port", type=int, default=18064)
    parser.add_argument("--kv-blocks", type=int, default=64)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    def report(message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    with ExitStack() as stack:
        run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pk-bench-")))
        base = prepare_embedded(report, num_gpu_blocks_override=args.kv_blocks, max_model_len=1024)
        configs = replica_configs(base, 2, run_dir, args.first_port)
        print("starting 2 replicas ...", file=sys.stderr)
        replicas = stack.enter_context(ReplicaSet(configs, run_dir, report=report))
        urls = replicas.base_urls
        model = base.name
        system = workload()[0].turns[0][0]["content"]
        tokens = httpx.post(f"{urls[0]}/tokenize", json={"model": model, "prompt": system})
        chars_per_token = len(system) / tokens.raise_for_status().json()["count"]
        turn = itertools.count()
        results = [
            measure_phase(
                "round_robin", lambda: urls[next(turn) % len(urls)], urls, model, args.clients
            )
        ]
        endpoints = [ReplicaEndpoint.of(config) for config in configs]
        for name, topology in (
            (
                "smg cache_aware",
                Topology(
                    replicas=2,
                    router="smg",
                    port=args.first_port + 2,
                    router_port=args.first_port + 3,
                    smg_chars_per_token=chars_per_token,
                ),
            ),
            ("precise", Topology(replicas=2, router="precise", port=args.first_port + 2)),
        ):
            with deploy(endpoints, topology, run_dir=run_dir, report=report) as deployment:
                url = deployment.url
                results.append(measure_phase(name, lambda url=url: url, urls, model, args.clients))

    requests = TENANTS * USERS * TURNS
    print(
        f"{requests} requests: {TENANTS} tenants x {USERS} users x {TURNS} turns, "
        f"{args.clients} in flight, 2 replicas x {args.kv_blocks} blocks of {base.block_size} tokens"
    )
    print(f"{'router':<18}{'hit rate':>9}{'TTFT median':>13}{'TTFT p90':>10}")
    for result in results:
        print(
            f"{result.router:<18}{result.hit_rate:>9.3f}"
            f"{statistics.median(result.timings.ttft_s) * 1e3:>10.0f} ms"
            f"{percentile(result.timings.ttft_s, 0.9) * 1e3:>7.0f} ms"
        )
    print(f"workload text: {chars_per_token:.1f} characters per token (SMG's tree is sized at it)")
    precise = results[-1].timings
    print(
        "precise router's own time before forwarding (server-timing), median / p99: "
        f"/tokenize round trip {statistics.median(precise.tokenize_ms):.2f} / "
        f"{percentile(precise.tokenize_ms, 0.99):.2f} ms, "
        f"hashing + decision {statistics.median(precise.route_ms):.3f} / "
        f"{percentile(precise.route_ms, 0.99):.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
