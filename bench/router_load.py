"""The precise router under many requests at once: its CPU per request and what it adds,
alone and behind the tenant gateway.

    .venv/bin/python bench/router_load.py [--clients 64] [--tenants 16]   # ports 18200-18213

No GPU here, so the engines are `--engines` fake vLLM replicas (`prefixkit.testing.
fake_vllm.FakeVLLM`, one process): `/tokenize` at 4 characters a token, a prefix cache of
`--capacity` 32-token blocks each (a request's tail evicted first, as vLLM does), vLLM's
block hashes and KV events over ZMQ, `--prefill-ms-per-block` per uncached block, then 8
streamed chunks 2 ms apart. Each router runs in a process of its own, deployed by
`deploy` as `prefixkit serve` deploys it, and this process is the clients: `--tenants`
tenants x 8 users x 4-turn conversations (a 1,000-token system prompt per tenant, every
turn sending the whole history), at most `--clients` requests in flight.

Side by side, the same requests (each phase with its own salts):

1. straight to the replicas, round-robin (what the clients and replicas cost alone);
2. through real SMG ``cache_aware`` alone (its tree sized at the replicas' capacity,
   4 characters a token as the fake tokenizer makes them);
3. through the precise router (`prefixkit serve --router precise --no-gateway`);
4. through the tenant gateway and the precise router in one app, as `prefixkit serve
   --router precise` runs them (the gateway authenticates each tenant's key and sets
   its salt);
5. the same two stages as two servers, the gateway relaying to the router over
   loopback in the same process: what one app saves.

Prints per phase: requests per second, end-to-end latency (median, p99), the replicas'
prefix-cache hit rate (their counters: cached prompt tokens over prompt tokens); for the
routers, their CPU time per request (from ``/proc``, the router's process and its
children) and for precise the ``server-timing`` it reports (``/tokenize`` round trip,
hashing + decision: median, p99). Everything shares this machine's cores, so the
requests per second are the machine's; the CPU per request says how many requests a
second one core of router would serve.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from chats import Conversation, conversations
from prefixkit.engine_adapter.engine.metrics import fetch_cache_metrics, fleet_interval
from prefixkit.engine_adapter.routing.router_state import parse_server_timing
from prefixkit.engine_adapter.serving.smg import SmgSettings, launch_smg, stop_smg, wait_until_ready
from samples import percentile

BLOCK = 32
FIRST_PORT = 18200
ROUTER_PORT = FIRST_PORT + 10  # and + 11 for the second of two servers
SMG_PORT = FIRST_PORT + 12  # and + 13, its Prometheus metrics
MODEL = "fake-model"
USERS = 8
TURNS = 4
SECRET = "router-load-bench-secret-0123"
# variant of the serving process -> what it deploys
VARIANTS = {
    "precise": "the precise router alone",
    "one-app": "gateway + precise router, one app",
    "two-servers": "gateway -> precise router, two servers",
}


def serve_engines(args: argparse.Namespace) -> None:
    """The fake replicas, until this process is terminated."""
    from prefixkit.testing.fake_vllm import FakeVLLM

    with ExitStack() as stack:
        for r, endpoint in enumerate(args.kv_endpoints):
            stack.enter_context(
                FakeVLLM(
                    model=MODEL,
                    block_size=BLOCK,
                    capacity_blocks=args.capacity,
                    kv_events=endpoint,
                    prefill_s_per_block=args.prefill_ms_per_block / 1e3,
                    chunks=8,
                    chunk_interval_s=0.002,
                    port=FIRST_PORT + r,
                )
            )
        _ready_until_terminated()


def serve_router(args: argparse.Namespace) -> None:
    """One of `VARIANTS` in front of the fake replicas, until this process is terminated."""
    from prefixkit.engine_adapter import ReplicaEndpoint, Tenants, Topology, deploy
    from prefixkit.engine_adapter.serving.app import serving_app
    from prefixkit.engine_adapter.serving.keepalive import served_in_thread
    from prefixkit.engine_adapter.serving.router import DirectRoute

    endpoints = [
        ReplicaEndpoint(f"http://127.0.0.1:{FIRST_PORT + r}", kv_events=endpoint, block_size=BLOCK)
        for r, endpoint in enumerate(args.kv_endpoints)
    ]
    tenants = Tenants(tenant_keys(args.variant, args.tenants), SECRET)
    precise = Topology(replicas=len(endpoints), router="precise", port=ROUTER_PORT)
    with ExitStack() as stack:
        if args.variant == "precise":
            stack.enter_context(deploy(endpoints, precise))
        elif args.variant == "one-app":
            stack.enter_context(deploy(endpoints, precise, tenants=tenants))
        else:
            inner = Topology(replicas=len(endpoints), router="precise", port=ROUTER_PORT + 1)
            router = stack.enter_context(deploy(endpoints, inner))
            gateway = serving_app(DirectRoute(router.url, router.replica_urls), tenants)
            stack.enter_context(served_in_thread(gateway, "127.0.0.1", ROUTER_PORT))
        _ready_until_terminated()


def _ready_until_terminated() -> None:
    """Say ready on stdout (the bench waits for it), then serve until SIGTERM."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print("ready", flush=True)
    while True:
        time.sleep(3600)


def tenant_keys(variant: str, tenants: int) -> dict[str, str]:
    """API key -> tenant id behind the gateway (tenant ids per variant: their own salts)."""
    return {f"key-{t}": f"{variant}:tenant-{t}" for t in range(tenants)}


async def run_phase(
    phase: str, urls: Sequence[str], tenants: int, clients: int, gateway: bool
) -> tuple[float, list[float], list[dict[str, float]]]:
    """(wall seconds, end-to-end latencies, server-timings) for every request."""
    gate = asyncio.Semaphore(clients)
    latencies: list[float] = []
    timings: list[dict[str, float]] = []
    turn = itertools.count()

    async def converse(client: httpx.AsyncClient, conversation: Conversation) -> None:
        body: dict[str, Any] = {"model": MODEL, "stream": True}
        headers = {}
        if gateway:  # the gateway sets the tenant's salt
            headers["authorization"] = f"Bearer key-{conversation.tenant}"
        else:  # each phase has its own salts, so no phase reuses another's blocks
            body["cache_salt"] = f"{phase}:tenant-{conversation.tenant}"
        for messages in conversation.turns:
            async with gate:
                url = urls[next(turn) % len(urls)]
                started = time.perf_counter()
                async with client.stream(
                    "POST",
                    f"{url}/v1/chat/completions",
                    json={**body, "messages": messages},
                    headers=headers,
                ) as r:
                    r.raise_for_status()
                    timing = parse_server_timing(r.headers.get("server-timing"))
                    async for _ in r.aiter_raw():
                        pass
                latencies.append(time.perf_counter() - started)
                if timing:
                    timings.append(timing)

    limits = httpx.Limits(max_connections=clients + 8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        started = time.perf_counter()
        workload = conversations(tenants, USERS, TURNS, (750, 40, 60))
        await asyncio.gather(*(converse(client, c) for c in workload))
        return time.perf_counter() - started, latencies, timings


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and every process below it."""
    processes: dict[int, tuple[int, int]] = {}  # pid -> (parent, CPU ticks)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        processes[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree = {pid}
    while grown := {p for p, (parent, _) in processes.items() if parent in tree} - tree:
        tree |= grown
    return sum(processes[p][1] for p in tree if p in processes) / os.sysconf("SC_CLK_TCK")


def started(command: list[str]) -> subprocess.Popen[str]:
    """A role of this script in its own process, once it says it is ready."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise SystemExit(f"{' '.join(command[2:])}: did not start ({process.wait()})")
    return process


def stopped(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=2000, help="blocks per replica")
    parser.add_argument("--prefill-ms-per-block", type=float, default=0.2)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--clients", type=int, default=64, help="requests in flight")
    parser.add_argument("--role", choices=["bench", "engines", "router"], default="bench")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="precise")
    parser.add_argument("--kv-endpoints", nargs="*", default=[])
    args = parser.parse_args()
    if args.role == "engines":
        serve_engines(args)
        return 0
    if args.role == "router":
        serve_router(args)
        return 0

    with tempfile.TemporaryDirectory(prefix="pk-load-") as run_dir, ExitStack() as stack:
        endpoints = [f"ipc://{run_dir}/kv-{r}" for r in range(args.engines)]
        common = [
            *("--engines", str(args.engines), "--capacity", str(args.capacity)),
            *("--prefill-ms-per-block", str(args.prefill_ms_per_block)),
            *("--tenants", str(args.tenants), "--kv-endpoints", *endpoints),
        ]
        script = [sys.executable, __file__, *common]
        engines = started([*script, "--role", "engines"])
        stack.callback(stopped, engines)
        replica_urls = [f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)]
        requests = args.tenants * USERS * TURNS
        print(
            f"{requests} requests ({args.tenants} tenants x {USERS} users x {TURNS} turns), "
            f"{args.clients} in flight, {args.engines} fake replicas x {args.capacity} blocks"
        )
        measure("round-robin, direct", replica_urls, None, args, gateway=False)

        smg_url = f"http://127.0.0.1:{SMG_PORT}"
        smg = launch_smg(
            SmgSettings(
                replica_urls,
                port=SMG_PORT,
                max_tree_size=args.capacity * BLOCK * 4,  # the fake tokenizer: 4 characters
            ),
            Path(run_dir) / "smg.log",
        )
        try:
            wait_until_ready(smg, smg_url, 60.0, Path(run_dir) / "smg.log")
            measure("SMG cache_aware", [smg_url], smg.pid, args, gateway=False)
        finally:
            stop_smg(smg)

        router_url = f"http://127.0.0.1:{ROUTER_PORT}"
        for variant, name in VARIANTS.items():
            router = started([*script, "--role", "router", "--variant", variant])
            try:
                measure(name, [router_url], router.pid, args, gateway=variant != "precise")
            finally:
                stopped(router)
    return 0


def measure(name: str, urls: Sequence[str], router: int | None, args: Any, gateway: bool) -> None:
    """Send every conversation through `urls`; print what it cost."""
    replicas = [f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)]
    before = [fetch_cache_metrics(url) for url in replicas]
    cpu = 0.0 if router is None else cpu_seconds(router)
    wall, latencies, timings = asyncio.run(
        run_phase(name, urls, args.tenants, args.clients, gateway)
    )
    cpu = 0.0 if router is None else cpu_seconds(router) - cpu
    rate = fleet_interval(before, [fetch_cache_metrics(url) for url in replicas]).hit_rate
    print(
        f"{name:<40} {len(latencies) / wall:7.1f} req/s   latency median "
        f"{statistics.median(latencies) * 1e3:6.1f} ms  p99 "
        f"{percentile(latencies, 0.99) * 1e3:6.1f} ms   hit rate {rate:.3f}"
    )
    if router is not None:
        print(f"  router CPU {cpu / len(latencies) * 1e3:.2f} ms per request")
    if timings:
        tokenize = [t["tokenize"] for t in timings]
        route = [t["route"] for t in timings]
        print(
            f"  /tokenize round trip median {statistics.median(tokenize):.2f} ms, "
            f"p99 {percentile(tokenize, 0.99):.2f} ms; hashing + decision median "
            f"{statistics.median(route):.3f} ms, p99 {percentile(route, 0.99):.3f} ms"
        )


if __name__ == "__main__":
    raise SystemExit(main())
