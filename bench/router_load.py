"""The precise router under many requests at once: its CPU per request and what it adds,
alone and behind the tenant gateway.

    .venv/bin/python bench/router_load.py [--clients 64] [--tenants 16]   # ports 18200-18213

No GPU here, so the engines are `--engines` fake vLLM replicas (`prefixkit.testing.
fake_vllm.FakeVLLM`, one process) given a model folder (`--model-dir`; by default the
embedded SmolLM2-135M-Instruct when it is on this machine, else the byte-level BPE with a
ChatML template the tests build, ``tests/conftest.py``): prompt tokens as vLLM 0.32
computes them from that folder's tokenizer and chat template, a prefix cache of
`--capacity` 32-token blocks each (a request's tail evicted first, as vLLM does), vLLM's
block hashes and KV events over ZMQ, `--prefill-ms-per-block` per uncached block, then
`--chunks` streamed chunks (8) `--chunk-interval-ms` apart (2). Two runs with different
`--chunks` give each router's CPU per streamed chunk: the difference of its CPU per
request over the difference of chunks. Each router runs in a process of its own,
deployed by `deploy` as `prefixkit serve` deploys it, with the replicas' model folder:
the precise router computes prompt tokens itself and asks a replica's ``/tokenize``
only for what it cannot reproduce exactly (its fallbacks, read from ``/router/state``). This process is
the clients: `--tenants` tenants x 8 users x 4-turn conversations (a system prompt of
about 1,000 words per tenant, every turn sending the whole history), at most
`--clients` requests in flight.

Side by side, the same requests (each phase with its own salts, from empty prefix caches:
the replicas' ``/reset_prefix_cache`` before each phase):

1. straight to the replicas, round-robin (what the clients and replicas cost alone);
2. through real SMG ``cache_aware`` alone (its tree, in characters, sized at the
   replicas' capacity at the workload's characters per token);
3. through the precise router (`prefixkit serve --router precise --no-gateway`);
4. through the tenant gateway and the precise router in one app, as `prefixkit serve
   --router precise` runs them (the gateway authenticates each tenant's key and sets
   its salt);
5. the same two stages as two servers, the gateway relaying to the router over
   loopback in the same process: what one app saves.

Prints per phase: requests per second, end-to-end latency (median, p99), the replicas'
prefix-cache hit rate (their counters: cached prompt tokens over prompt tokens); for the
routers, their CPU time per request (from ``/proc``, the router's process and its
children); for precise, the ``server-timing`` it reports (prompt tokens, in-process or
``/tokenize``; hashing + decision: median, p99) and its fallbacks to ``/tokenize`` (a
count and a share of the phase's requests); for every phase, the CPU per request of the
clients (this process) and of the fake replicas' process. Then all phases side by side,
each router's CPU per request as a multiple of SMG's. Everything shares this machine's
cores, so the requests per second are the machine's; the CPU per request says how many
requests a second one core of router would serve. The clients are one Python process: when
their CPU per request times the requests per second nears one core, they set the pace,
and the requests per second and latencies say more about them than about the router.

``--rounds N`` runs the phases N times, every other round backwards (A B C, C B A, ...), and
prints each round and the mean of the rounds: a phase's CPU per request moves by a
quarter or more from one run to the next, and a drift of the machine's speed over the
run weighs on every phase alike. ``--phases`` runs some of the phases only (``direct smg
precise one-app two-servers``).
``--baseline DIR`` runs each router phase a second time, right after the first, with the
``prefixkit`` package of another source tree (``DIR/prefixkit/{sdk,engine_adapter,...}``,
such as ``git archive`` of an earlier commit unpacked there): two versions of the router
measured side by side on the same replicas in one run. ``--py-spy DIR`` samples each
router process with py-spy while its phase runs (``DIR/<phase>.txt``, py-spy's raw
collapsed stacks, aggregated by function) and prints the functions where the router's
CPU time goes (own time, and time under the relay's main steps).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import functools
import importlib.util
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

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
OPERATOR_KEY = "router-load-bench-operator"  # reads /router/state behind the gateway
PHASES = ("direct", "smg", "precise", "one-app", "two-servers")
# variant of the serving process -> what it deploys
VARIANTS = {
    "precise": "the precise router alone",
    "one-app": "gateway + precise router, one app",
    "two-servers": "gateway -> precise router, two servers",
}


class Measured(NamedTuple):
    """One phase's numbers (`cpu_ms`, `fallbacks`: None where they do not apply)."""

    name: str
    requests: int
    rate: float
    p50_ms: float
    p99_ms: float
    hit_rate: float
    cpu_ms: float | None
    fallbacks: int | None
    clients_cpu_ms: float  # this process: the clients
    replicas_cpu_ms: float  # the fake replicas' process


def model_folder(run_dir: Path) -> tuple[Path, str]:
    """The model folder the replicas and routers load, and what it is: the embedded
    SmolLM2 when it is prepared on this machine (never prepared here), else the tests'
    ChatML tokenizer, built in `run_dir`."""
    from prefixkit.engine_adapter.engine.home import models_dir
    from prefixkit.engine_adapter.engine.smollm2 import (
        MARKER,
        SMOLLM2_NAME,
        ensure_smollm2,
        is_model_dir,
    )

    smollm2 = models_dir() / SMOLLM2_NAME
    if (smollm2 / MARKER).is_file() and is_model_dir(smollm2):
        return ensure_smollm2(), f"the embedded {SMOLLM2_NAME}"
    conftest = Path(__file__).parents[1] / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location("router_load_tests_conftest", conftest)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    folder = module.build_chatml_tokenizer(run_dir / "chatml-bpe")
    return folder, f"the tests' ChatML BPE tokenizer ({SMOLLM2_NAME} is not prepared here)"


def chars_per_token(model_dir: Path, tenants: int) -> float:
    """Characters per prompt token of this workload's longest requests in `model_dir`."""
    from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer, PromptTokens

    tokenizer = PromptTokenizer.load(model_dir)
    if not isinstance(tokenizer, PromptTokenizer):
        raise SystemExit(f"--model-dir {model_dir}: {tokenizer.reason}")
    chars = tokens = 0
    for conversation in conversations(tenants, 1, TURNS, (750, 40, 60)):
        messages = conversation.turns[-1]
        outcome = tokenizer.tokens("/v1/chat/completions", {"messages": messages})
        assert isinstance(outcome, PromptTokens), outcome
        chars += sum(len(m["content"]) for m in messages)
        tokens += len(outcome.token_ids)
    return chars / tokens


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
                    chunks=args.chunks,
                    chunk_interval_s=args.chunk_interval_ms / 1e3,
                    port=FIRST_PORT + r,
                    model_dir=args.model_dir,
                    dev_mode=True,  # /reset_prefix_cache between phases
                )
            )
        _ready_until_terminated()


def serve_router(args: argparse.Namespace) -> None:
    """One of `VARIANTS` in front of the fake replicas, until this process is terminated."""
    from prefixkit.engine_adapter import ReplicaEndpoint, Tenants, Topology, deploy
    from prefixkit.engine_adapter.serving.app import serving_app
    from prefixkit.engine_adapter.serving.keepalive import served_in_thread
    from prefixkit.engine_adapter.serving.router import DirectRoute

    # a --baseline source tree may predate the endpoint's model folder
    known = {f.name for f in dataclasses.fields(ReplicaEndpoint)}
    model = {"model": args.model_dir} if "model" in known else {}
    endpoints = [
        ReplicaEndpoint(
            f"http://127.0.0.1:{FIRST_PORT + r}", kv_events=endpoint, block_size=BLOCK, **model
        )
        for r, endpoint in enumerate(args.kv_endpoints)
    ]
    keys = tenant_keys(args.label or args.variant, args.tenants)
    tenants = Tenants(keys, SECRET, operators={OPERATOR_KEY: "bench"})
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

    # every client keeps its connection, as the OpenAI and Anthropic SDKs do (up to 100)
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
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


def own_cpu_seconds() -> float:
    """User + system CPU seconds of this process (the clients) so far."""
    times = os.times()
    return times.user + times.system


def started(command: list[str], source: str | None = None) -> subprocess.Popen[str]:
    """A role of this script in its own process, once it says it is ready (`source`: the
    source tree whose ``prefixkit`` it imports, None for this one)."""
    env = None if source is None else {**os.environ, "PYTHONPATH": source}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
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
    parser.add_argument("--chunks", type=int, default=8, help="streamed chunks per answer")
    parser.add_argument("--chunk-interval-ms", type=float, default=2.0)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--clients", type=int, default=64, help="requests in flight")
    parser.add_argument("--role", choices=["bench", "engines", "router"], default="bench")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="precise")
    parser.add_argument("--kv-endpoints", nargs="*", default=[])
    parser.add_argument("--label", default="", help="(router role) its phase's tenant ids")
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the phases this many times, every other backwards",
    )
    parser.add_argument(
        "--baseline", type=Path, help="another source tree: its router measured too"
    )
    parser.add_argument("--py-spy", type=Path, help="record each router with py-spy here")
    parser.add_argument(
        "--model-dir", type=Path, help="the model folder (default: SmolLM2 if prepared)"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    if args.baseline is not None and not (args.baseline / "prefixkit").is_dir():
        parser.error(f"--baseline {args.baseline}: no prefixkit package there")
    if args.role == "engines":
        serve_engines(args)
        return 0
    if args.role == "router":
        serve_router(args)
        return 0

    with tempfile.TemporaryDirectory(prefix="pk-load-") as run_dir, ExitStack() as stack:
        if args.model_dir is None:
            args.model_dir, described = model_folder(Path(run_dir))
        else:
            described = "the model folder given"
        args.chars_per_token = chars_per_token(args.model_dir, args.tenants)
        print(f"model folder: {described}, {args.model_dir}")
        endpoints = [f"ipc://{run_dir}/kv-{r}" for r in range(args.engines)]
        common = [
            *("--engines", str(args.engines), "--capacity", str(args.capacity)),
            *("--prefill-ms-per-block", str(args.prefill_ms_per_block)),
            *("--chunks", str(args.chunks), "--chunk-interval-ms", str(args.chunk_interval_ms)),
            *("--tenants", str(args.tenants), "--model-dir", str(args.model_dir)),
            *("--kv-endpoints", *endpoints),
        ]
        script = [sys.executable, __file__, *common]
        engines = started([*script, "--role", "engines"])
        stack.callback(stopped, engines)
        args.replicas_pid = engines.pid
        replica_urls = [f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)]
        requests = args.tenants * USERS * TURNS
        print(
            f"{requests} requests ({args.tenants} tenants x {USERS} users x {TURNS} turns), "
            f"{args.clients} in flight, {args.engines} fake replicas x {args.capacity} blocks"
        )
        phases: list[Callable[[], Measured]] = []
        if "direct" in args.phases:
            phases.append(lambda: measure("round-robin, direct", replica_urls, None, args, False))
        if "smg" in args.phases:
            phases.append(lambda: measure_smg(replica_urls, run_dir, args))
        for variant, name in VARIANTS.items():
            if variant not in args.phases:
                continue
            phases.append(functools.partial(measure_router, script, variant, variant, name, args))
            if args.baseline is not None:
                label, title = f"{variant}-baseline", f"{name} (baseline)"
                phases.append(
                    functools.partial(measure_router, script, variant, label, title, args)
                )
        rounds: list[list[Measured]] = []
        for round_ in range(args.rounds):
            # every other round runs the phases backwards: a drift of the machine's speed
            # over the run weighs on every phase alike
            order = range(len(phases)) if round_ % 2 == 0 else reversed(range(len(phases)))
            if args.rounds > 1:
                print(f"round {round_ + 1} of {args.rounds}")
            measured: dict[int, Measured] = {}
            for phase in order:
                empty_caches(replica_urls)
                measured[phase] = phases[phase]()
            rounds.append([measured[phase] for phase in range(len(phases))])
        for round_, results in enumerate(rounds):
            if args.rounds > 1:
                print(f"\nround {round_ + 1}:", end="")
            print_side_by_side(results)
        if args.rounds > 1:
            print(f"\nthe mean of the {args.rounds} rounds:", end="")
            print_side_by_side([mean_of(each) for each in zip(*rounds, strict=True)])
    return 0


def measure_router(script: list[str], variant: str, label: str, title: str, args: Any) -> Measured:
    """A router phase: the router of `variant` (`label`: its phase's tenant ids; ending in
    ``-baseline``: the --baseline tree's) started, measured and stopped."""
    source = str(args.baseline) if label.endswith("-baseline") else None
    router = started([*script, "--role", "router", "--variant", variant, "--label", label], source)
    try:
        profile = None if args.py_spy is None else args.py_spy / f"{label}.txt"
        gateway = variant != "precise"
        state = RouterStateReader(variant)
        url = f"http://127.0.0.1:{ROUTER_PORT}"
        return measure(title, [url], router.pid, args, gateway, profile, state)
    finally:
        stopped(router)


def mean_of(measured: Sequence[Measured]) -> Measured:
    """One phase's numbers over several rounds: the mean of each (fallbacks summed)."""
    cpu = [m.cpu_ms for m in measured if m.cpu_ms is not None]
    fallbacks = [m.fallbacks for m in measured if m.fallbacks is not None]
    return Measured(
        measured[0].name,
        sum(m.requests for m in measured),
        statistics.mean(m.rate for m in measured),
        statistics.mean(m.p50_ms for m in measured),
        statistics.mean(m.p99_ms for m in measured),
        statistics.mean(m.hit_rate for m in measured),
        statistics.mean(cpu) if cpu else None,
        sum(fallbacks) if fallbacks else None,
        statistics.mean(m.clients_cpu_ms for m in measured),
        statistics.mean(m.replicas_cpu_ms for m in measured),
    )


def empty_caches(replica_urls: Sequence[str]) -> None:
    """Empty every replica's prefix cache (vLLM's ``POST /reset_prefix_cache``), so that
    each phase starts from the same empty caches: without it a later phase would find
    them filled by the phases before and evict where the first phase did not."""
    for url in replica_urls:
        httpx.post(f"{url}/reset_prefix_cache", timeout=10).raise_for_status()


class RouterStateReader:
    """The precise router's fallbacks to ``/tokenize`` so far, from its ``/router/state``
    (behind the gateway with an operator's key; of two servers, the router's own)."""

    def __init__(self, variant: str) -> None:
        port = ROUTER_PORT + 1 if variant == "two-servers" else ROUTER_PORT
        self.url = f"http://127.0.0.1:{port}/router/state"
        self.headers = {"authorization": f"Bearer {OPERATOR_KEY}"}

    def fallbacks(self) -> int | None:
        """None: a router (of a --baseline tree) that does not count them."""
        answer = httpx.get(self.url, headers=self.headers, timeout=10)
        answer.raise_for_status()
        count = answer.json().get("tokenize_fallbacks")
        return None if count is None else int(count)


def print_side_by_side(results: Sequence[Measured]) -> None:
    """Every phase's numbers in one table; each router's CPU per request against SMG's."""
    smg = next((m.cpu_ms for m in results if m.name == "SMG cache_aware"), None)
    print()
    print(
        f"{'phase':<40} {'req/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'hit':>6} "
        f"{'CPU ms/req':>10} {'x SMG':>6} {'fallbacks':>15} {'clients':>8} {'replicas':>8}"
    )
    for m in results:
        cpu = "-" if m.cpu_ms is None else f"{m.cpu_ms:.2f}"
        ratio = "-" if m.cpu_ms is None or not smg else f"{m.cpu_ms / smg:.2f}"
        fallbacks = "-"
        if m.fallbacks is not None:
            fallbacks = f"{m.fallbacks} ({m.fallbacks / m.requests:.1%})"
        print(
            f"{m.name:<40} {m.rate:7.1f} {m.p50_ms:8.1f} {m.p99_ms:8.1f} {m.hit_rate:6.3f} "
            f"{cpu:>10} {ratio:>6} {fallbacks:>15} {m.clients_cpu_ms:8.2f} "
            f"{m.replicas_cpu_ms:8.2f}"
        )


def measure_smg(replica_urls: list[str], run_dir: str, args: Any) -> Measured:
    """The SMG phase: real SMG cache_aware in front of the replicas."""
    smg_url = f"http://127.0.0.1:{SMG_PORT}"
    smg = launch_smg(
        SmgSettings(
            replica_urls,
            port=SMG_PORT,
            max_tree_size=round(args.capacity * BLOCK * args.chars_per_token),
        ),
        Path(run_dir) / "smg.log",
    )
    try:
        wait_until_ready(smg, smg_url, 60.0, Path(run_dir) / "smg.log")
        return measure("SMG cache_aware", [smg_url], smg.pid, args, gateway=False)
    finally:
        stop_smg(smg)


def measure(
    name: str,
    urls: Sequence[str],
    router: int | None,
    args: Any,
    gateway: bool,
    profile: Path | None = None,
    state: RouterStateReader | None = None,
) -> Measured:
    """Send every conversation through `urls`; print what it cost (and with `profile`,
    where the router's CPU went; with `state`, the precise router's fallbacks)."""
    replicas = [f"http://127.0.0.1:{FIRST_PORT + r}" for r in range(args.engines)]
    before = [fetch_cache_metrics(url) for url in replicas]
    fallbacks = None if state is None else state.fallbacks()
    sampler = None if profile is None or router is None else py_spy(router, profile)
    cpu = 0.0 if router is None else cpu_seconds(router)
    clients_cpu, replicas_cpu = own_cpu_seconds(), cpu_seconds(args.replicas_pid)
    wall, latencies, timings = asyncio.run(
        run_phase(name, urls, args.tenants, args.clients, gateway)
    )
    cpu = 0.0 if router is None else cpu_seconds(router) - cpu
    clients_cpu = own_cpu_seconds() - clients_cpu
    replicas_cpu = cpu_seconds(args.replicas_pid) - replicas_cpu
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)
        sampler.wait(60)
    rate = fleet_interval(before, [fetch_cache_metrics(url) for url in replicas]).hit_rate
    if state is not None and fallbacks is not None:
        after = state.fallbacks()
        fallbacks = None if after is None else after - fallbacks
    requests = len(latencies)
    cpu_ms = None if router is None else cpu / requests * 1e3
    print(
        f"{name:<40} {len(latencies) / wall:7.1f} req/s   latency median "
        f"{statistics.median(latencies) * 1e3:6.1f} ms  p99 "
        f"{percentile(latencies, 0.99) * 1e3:6.1f} ms   hit rate {rate:.3f}"
    )
    if cpu_ms is not None:
        print(f"  router CPU {cpu_ms:.2f} ms per request")
    print(
        f"  clients CPU {clients_cpu / requests * 1e3:.2f} ms per request, "
        f"replicas {replicas_cpu / requests * 1e3:.2f} ms"
    )
    if fallbacks is not None:
        print(f"  fallbacks to /tokenize {fallbacks} ({fallbacks / requests:.1%} of requests)")
    if timings:
        tokenize = [t["tokenize"] for t in timings]
        route = [t["route"] for t in timings]
        print(
            f"  prompt tokens median {statistics.median(tokenize):.2f} ms, "
            f"p99 {percentile(tokenize, 0.99):.2f} ms; hashing + decision median "
            f"{statistics.median(route):.3f} ms, p99 {percentile(route, 0.99):.3f} ms"
        )
    if sampler is not None and profile is not None:
        print_profile(profile, cpu / requests)
    return Measured(
        name,
        requests,
        requests / wall,
        statistics.median(latencies) * 1e3,
        percentile(latencies, 0.99) * 1e3,
        rate,
        cpu_ms,
        fallbacks,
        clients_cpu / requests * 1e3,
        replicas_cpu / requests * 1e3,
    )


def py_spy(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` (its active threads, without pausing it) into `output` until
    it is sent SIGINT."""
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).with_name("py-spy")),
        *("record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--function"),
        *("--format", "raw", "--output", str(output)),
    ]
    sampler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached
    if sampler.poll() is not None:
        assert sampler.stderr is not None
        raise SystemExit(f"py-spy did not attach: {sampler.stderr.read().decode()}")
    return sampler


# the relay's steps, each a stack's first step whose function (a substring of its name)
# it passes through; `print_profile` adds up the samples of each
STEPS = (
    ("prompt tokens (in-process, or /tokenize round trip)", ("PreciseRoute._token_ids",)),
    ("hashing, decision, bookkeeping", ("RouterState.",)),
    (
        "admission (gateway.admit, read_body, bodies.admit_body)",
        ("admit_scope", "read_body", "admit_body", "BodyWorkers."),
    ),
    (
        "send upstream (connect, write the request, read the answer's head)",
        ("Upstreams.send", "UpstreamPool.send"),
    ),
    ("relay: write the answer to the client (uvicorn)", ("ServingApp.__call__.<locals>.tracked",)),
    ("relay: read the answer from the upstream", ("relay_answer",)),
    ("the rest of the serving app", ("ServingApp.",)),
    (
        "HTTP server: read requests, connections (uvicorn h11)",
        ("H11Protocol.", "RequestResponseCycle."),
    ),
    ("KV events (ZMQ follower)", ("KvEventFollower.", "_AsyncSocket.")),
    ("health polls", ("polled_health",)),
    ("event loop: waiting for sockets (epoll)", ("EpollSelector.select",)),
)
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def print_profile(profile: Path, cpu_per_request: float, top: int = 12) -> None:
    """The functions with the most samples of their own in a py-spy raw profile, and the
    relay's steps (`STEPS`) by samples under them, as shares and CPU ms per request."""
    own: collections.Counter[str] = collections.Counter()
    steps: collections.Counter[str] = collections.Counter()
    total = 0
    for line in profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        total += samples
        frames = [_short(frame) for frame in stack.split(";")]
        own[frames[-1]] += samples
        step = next(
            (
                name
                for name, marks in STEPS
                if any(frame.startswith(mark) for frame in frames for mark in marks)
            ),
            "other (event loop callbacks, threads)",
        )
        steps[step] += samples
    if not total:
        print("  py-spy: no samples")
        return
    ms = cpu_per_request * 1e3 / total
    print(f"  py-spy, {total} samples: own time (share, CPU ms per request)")
    for frame, samples in own.most_common(top):
        print(f"    {samples / total:6.1%} {samples * ms:6.3f} ms  {frame}")
    print("  by step of the relay")
    for step, samples in steps.most_common():
        print(f"    {samples / total:6.1%} {samples * ms:6.3f} ms  {step}")


def _short(frame: str) -> str:
    """``function (file)`` with the file's last two path parts."""
    match = _FRAME.match(frame)
    if match is None:
        return frame
    where = "/".join(match["file"].split("/")[-2:])
    return f"{match['function']} ({where})"


if __name__ == "__main__":
    raise SystemExit(main())
