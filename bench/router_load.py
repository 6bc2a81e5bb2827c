"""The precise router under many requests at once: its CPU per request and what it adds.

    .venv/bin/python bench/router_load.py [--clients 64] [--tenants 16]   # ports 18200-18212

No GPU here, so the engines are emulated: `--engines` fake OpenAI-compatible
workers (one process) that tokenize (`/tokenize`: 4 characters a token,
deterministic), keep an LRU prefix cache of `--capacity` 32-token blocks per
worker (a request's tail evicted first, as vLLM does), hash blocks exactly as
vLLM does (`event_block_hashes`, sha256_cbor, salted), publish `BlockStored` /
`BlockRemoved` over ZMQ as vLLM's KV events, wait `--prefill-ms-per-block` per
uncached block, then stream 8 chunks 2 ms apart. The precise router runs in a
process of its own (`precise_router_app`, the replicas' capacity known), and
this process is the clients: `--tenants` tenants x 8 users x 4-turn
conversations (a 1,000-token system prompt per tenant, every turn sending the
whole history), at most `--clients` requests in flight.

Side by side, the same requests (each phase with its own salts):

1. straight to the workers, round-robin (what the clients and workers cost
   alone);
2. through real SMG ``cache_aware`` (its tree sized at the workers' capacity,
   4 characters a token as the fake tokenizer makes them);
3. through the precise router.

Prints per phase: requests per second, end-to-end latency (median, p99), the
workers' prefix-cache hit rate; for the routers, their CPU time per request
(from ``/proc``, the router's processes together) and for precise the
``server-timing`` it reports (``/tokenize`` round trip, hashing + decision:
median, p99). Everything shares this
machine's cores, so the requests per second are the machine's; the router's
CPU per request says how many requests a second one core of router would serve.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import msgpack
from chats import Conversation, conversations
from prefixkit.engine_adapter.routing.router import parse_server_timing
from prefixkit.engine_adapter.serving.smg import SmgSettings, launch_smg, stop_smg
from prefixkit.sdk.block_hash import event_block_hashes
from router_latency import EmulatedEngine
from samples import percentile

BLOCK = 32
FIRST_PORT = 18200
MODEL = "fake-model"
USERS = 8
TURNS = 4


def token_ids(messages: Sequence[dict[str, str]]) -> list[int]:
    """The fake engines' tokenizer: a chat template, then one token per 4 characters."""
    text = "".join(f"<|{m['role']}|>{m['content']}" for m in messages) + "<|assistant|>"
    return [zlib.crc32(text[i : i + 4].encode()) % 49_152 for i in range(0, len(text), 4)]


def engine_app(kv_endpoint: str, capacity: int, prefill_s_per_block: float) -> Any:
    """One fake worker: OpenAI-compatible enough for the router, KV events on ZMQ."""
    import zmq
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    publisher = zmq.Context.instance().socket(zmq.PUB)
    publisher.bind(kv_endpoint)
    engine = EmulatedEngine(capacity)
    counts = {"blocks": 0, "hits": 0}
    sequence = itertools.count()

    def publish(events: list[dict[str, Any]]) -> None:
        payload = msgpack.packb([time.time(), events, None])
        publisher.send_multipart([b"kv", next(sequence).to_bytes(8, "big"), payload])

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({})

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def tokenize(request: Request) -> JSONResponse:
        tokens = token_ids((await request.json())["messages"])
        return JSONResponse({"tokens": tokens, "count": len(tokens)})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(counts)

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        hashes = event_block_hashes(
            token_ids(body["messages"]), BLOCK, algo="sha256_cbor", cache_salt=body["cache_salt"]
        )
        held = engine.lru
        run = next((i for i, h in enumerate(hashes) if h not in held), len(hashes))
        counts["blocks"] += len(hashes)
        counts["hits"] += run

        async def stream() -> AsyncIterator[bytes]:
            await asyncio.sleep((len(hashes) - run) * prefill_s_per_block)
            stored, evicted = engine.admit(hashes)
            events = [{"type": "BlockStored", "block_hashes": stored, "parent_block_hash": None}]
            if evicted:
                events.append({"type": "BlockRemoved", "block_hashes": evicted})
            publish(events)
            for _ in range(8):
                chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                await asyncio.sleep(0.002)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/stats", stats),
            Route("/v1/chat/completions", completions, methods=["POST"]),
        ]
    )


async def serve_engines(args: argparse.Namespace) -> None:
    import uvicorn

    servers = [
        uvicorn.Server(
            uvicorn.Config(
                engine_app(endpoint, args.capacity, args.prefill_ms_per_block / 1e3),
                host="127.0.0.1",
                port=FIRST_PORT + r,
                log_level="warning",
            )
        )
        for r, endpoint in enumerate(args.kv_endpoints)
    ]
    await asyncio.gather(*(server.serve() for server in servers))


def serve_router(args: argparse.Namespace) -> None:
    from prefixkit.engine_adapter.routing.router import RouterSettings, precise_router_app
    from prefixkit.engine_adapter.serving.keepalive import served

    settings = RouterSettings(
        replica_urls=[f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)],
        kv_endpoints=args.kv_endpoints,
        capacity_blocks=[args.capacity] * args.engines,
    )
    served(precise_router_app(settings), "127.0.0.1", FIRST_PORT + 10).run()  # as `prefixkit serve`


async def run_phase(
    phase: str, urls: Sequence[str], tenants: int, clients: int
) -> tuple[float, list[float], list[dict[str, float]]]:
    """(wall seconds, end-to-end latencies, server-timings) for every request."""
    gate = asyncio.Semaphore(clients)
    latencies: list[float] = []
    timings: list[dict[str, float]] = []
    turn = itertools.count()

    async def converse(client: httpx.AsyncClient, conversation: Conversation) -> None:
        # each phase has its own salts, so no phase reuses another's blocks
        salt = f"{phase}:tenant-{conversation.tenant}"
        for messages in conversation.turns:
            body = {"model": MODEL, "messages": messages, "stream": True, "cache_salt": salt}
            async with gate:
                url = urls[next(turn) % len(urls)]
                started = time.perf_counter()
                async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
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


def hit_rate(engines: int) -> tuple[int, int]:
    totals = [httpx.get(f"http://127.0.0.1:{FIRST_PORT + r}/stats").json() for r in range(engines)]
    return sum(t["hits"] for t in totals), sum(t["blocks"] for t in totals)


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    """Wait until `url` answers /v1/models (workers and both routers do)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the process exited ({process.returncode})")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} was not ready within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=2000, help="blocks per worker")
    parser.add_argument("--prefill-ms-per-block", type=float, default=0.2)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--clients", type=int, default=64, help="requests in flight")
    parser.add_argument("--role", choices=["bench", "engines", "router"], default="bench")
    parser.add_argument("--kv-endpoints", nargs="*", default=[])
    args = parser.parse_args()
    if args.role == "engines":
        asyncio.run(serve_engines(args))
        return 0
    if args.role == "router":
        serve_router(args)
        return 0

    with tempfile.TemporaryDirectory(prefix="pk-load-") as run_dir:
        endpoints = [f"ipc://{run_dir}/kv-{r}" for r in range(args.engines)]
        common = [
            *("--engines", str(args.engines), "--capacity", str(args.capacity)),
            *("--prefill-ms-per-block", str(args.prefill_ms_per_block)),
            "--kv-endpoints",
            *endpoints,
        ]
        script = [sys.executable, __file__]
        worker_urls = [f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)]
        engines = subprocess.Popen([*script, "--role", "engines", *common])
        precise = subprocess.Popen([*script, "--role", "router", *common])
        smg = launch_smg(
            SmgSettings(
                worker_urls,
                port=FIRST_PORT + 11,
                max_tree_size=args.capacity * BLOCK * 4,  # the fake tokenizer: 4 characters
            ),
            Path(run_dir) / "smg.log",
        )
        try:
            for url in worker_urls:
                wait_ready(url, engines)
            precise_url = f"http://127.0.0.1:{FIRST_PORT + 10}"
            smg_url = f"http://127.0.0.1:{FIRST_PORT + 11}"
            wait_ready(precise_url, precise)
            wait_ready(smg_url, smg)
            requests = args.tenants * USERS * TURNS
            print(
                f"{requests} requests ({args.tenants} tenants x {USERS} users x {TURNS} turns), "
                f"{args.clients} in flight, {args.engines} fake workers x {args.capacity} blocks"
            )
            phases = (
                ("round-robin, direct", worker_urls, None),
                ("SMG cache_aware", [smg_url], smg),
                ("precise router", [precise_url], precise),
            )
            for name, urls, router in phases:
                measure(name, urls, router, args)
        finally:
            stop_smg(smg)
            for process in (precise, engines):
                process.terminate()
                process.wait(10)
    return 0


def measure(
    name: str, urls: Sequence[str], router: subprocess.Popen[bytes] | None, args: Any
) -> None:
    """Send every conversation through `urls`; print what it cost."""
    hits, blocks = hit_rate(args.engines)
    cpu = 0.0 if router is None else cpu_seconds(router.pid)
    wall, latencies, timings = asyncio.run(run_phase(name, urls, args.tenants, args.clients))
    hits_after, blocks_after = hit_rate(args.engines)
    rate = (hits_after - hits) / max(1, blocks_after - blocks)
    print(
        f"{name:<20} {len(latencies) / wall:7.1f} req/s   latency median "
        f"{statistics.median(latencies) * 1e3:6.1f} ms  p99 "
        f"{percentile(latencies, 0.99) * 1e3:6.1f} ms   hit rate {rate:.3f}"
    )
    if router is not None:
        cpu = cpu_seconds(router.pid) - cpu
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
