"""Cold vs warm time to first token and prefix-cache hit rate, multi-tenant, through the gateway.

    .venv/bin/python bench/engine_ttft.py            # starts the embedded engine on 18050

Workload (realistic for a SaaS assistant): three tenants; acme and globex run the same
product, so their system prompts are byte-identical (~1,000 tokens), initech has its own;
each tenant adds its own policy document (~350 tokens); two users per tenant hold two-turn
conversations. Requests arrive interleaved across tenants, streamed through the tenant
gateway (per-tenant cache_salt), one at a time (a CPU engine has no spare cores).

Side by side in one run:
  1. through the gateway: TTFT of each tenant's first request (cold) vs the rest (warm);
     hit rate from the engine's own counters (a difference over the phase) and the ratio to
     the isolation oracle (longest block-aligned prefix this tenant sent before);
     cached tokens of globex's first request (its system prompt equals acme's: must be 0);
  2. the same requests sent with a fresh cache_salt each (no reuse possible): TTFT baseline.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
from chats import filler_text
from prefixkit.engine_adapter import Tenants, Topology, deploy, prepare_embedded
from prefixkit.engine_adapter.engine.metrics import fetch_cache_metrics
from prefixkit.testing.ttft import StreamReading
from progress import report

SECRET = "bench-secret-0123456789abcdef"
TENANT_KEYS = {"key-acme": "acme", "key-globex": "globex", "key-initech": "initech"}


@dataclass(frozen=True)
class Request:
    tenant: str
    key: str
    messages: list[dict[str, str]]


def workload() -> list[Request]:
    product_prompt = "You are the support assistant of ShopDesk. " + filler_text("shopdesk", 850)
    systems = {
        "acme": product_prompt + "\nTenant policy (Acme): " + filler_text("acme-policy", 300),
        "globex": product_prompt + "\nTenant policy (Globex): " + filler_text("globex-policy", 300),
        "initech": "You are Initech's HR helpdesk. "
        + filler_text("initech", 850)
        + "\nPolicy: "
        + filler_text("initech-policy", 300),
    }
    keys = {tenant: key for key, tenant in TENANT_KEYS.items()}
    requests = []
    for turn in range(2):
        for user in range(2):
            for tenant, system in systems.items():
                history = [{"role": "system", "content": system}]
                for t in range(turn + 1):
                    history.append(
                        {
                            "role": "user",
                            "content": f"[{tenant} user {user}] "
                            + filler_text(f"{tenant}-{user}-{t}", 25),
                        }
                    )
                    if t < turn:
                        history.append(
                            {
                                "role": "assistant",
                                "content": filler_text(f"a-{tenant}-{user}-{t}", 40),
                            }
                        )
                requests.append(Request(tenant, keys[tenant], history))
    return requests


def stream(url: str, model: str, request: Request, salt: str | None = None) -> tuple[float, int]:
    body: dict[str, object] = {
        "model": model,
        "messages": request.messages,
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if salt is not None:
        body["cache_salt"] = salt
    reading = StreamReading()
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {request.key}"},
        timeout=600,
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            reading.feed(line)
    answer = reading.answer()
    return answer.ttft_s, answer.cached_tokens


def oracle_hit_tokens(engine_url: str, model: str, requests: list[Request], block: int) -> int:
    """Tokens an ideal per-tenant cache would serve: longest block-aligned prefix seen before."""
    seen: dict[str, list[list[int]]] = {}
    total = 0
    for request in requests:
        response = httpx.post(
            f"{engine_url}/tokenize",
            json={"model": model, "messages": request.messages, "add_generation_prompt": True},
            timeout=60,
        )
        tokens = response.json()["tokens"]
        best = 0
        for earlier in seen.get(request.tenant, []):
            common = 0
            for a, b in zip(earlier, tokens, strict=False):
                if a != b:
                    break
                common += 1
            best = max(best, common)
        # vLLM never serves the prompt's last token from cache, and only whole blocks
        total += min(best, len(tokens) - 1) // block * block
        seen.setdefault(request.tenant, []).append(tokens)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-port", type=int, default=18050)
    parser.add_argument("--gateway-port", type=int, default=18051)
    args = parser.parse_args()

    with ExitStack() as stack:
        base = prepare_embedded(report)
        print("starting the embedded engine and the gateway ...", file=sys.stderr)
        deployment = stack.enter_context(
            deploy(
                base,
                Topology(engine_port=args.engine_port, port=args.gateway_port),
                tenants=Tenants(TENANT_KEYS, SECRET),
                kv_events=False,
                report=report,
            )
        )
        (engine,) = deployment.replica_urls
        gateway = deployment.url
        model = base.name
        requests = workload()
        warmup = Request("acme", "key-acme", [{"role": "user", "content": "Hello"}])
        stream(gateway, model, warmup, salt=None)

        before = fetch_cache_metrics(engine)
        results = [stream(gateway, model, request) for request in requests]
        interval = fetch_cache_metrics(engine).since(before)
        baseline = [
            stream(engine, model, request, salt=f"fresh-{i}-{random.random()}")[0]
            for i, request in enumerate(requests)
        ]
        oracle = oracle_hit_tokens(engine, model, requests, base.block_size)

    first_of: dict[str, int] = {}
    for index, request in enumerate(requests):
        first_of.setdefault(request.tenant, index)
    cold = [results[i][0] for i in first_of.values()]
    warm = [results[i][0] for i in range(len(requests)) if i not in first_of.values()]
    globex_first_cached = results[first_of["globex"]][1]
    gateway_ttft = [ttft for ttft, _ in results]

    print(f"requests: {len(requests)} over {len(first_of)} tenants (block size {base.block_size})")
    print(f"TTFT cold (first per tenant), median: {statistics.median(cold) * 1000:8.0f} ms")
    print(f"TTFT warm (rest),             median: {statistics.median(warm) * 1000:8.0f} ms")
    print(
        f"  cold / warm TTFT ratio:             {statistics.median(cold) / statistics.median(warm):8.1f}x"
    )
    print(
        f"TTFT with a fresh salt per request, median: {statistics.median(baseline) * 1000:.0f} ms"
    )
    print(
        "  no-reuse / gateway mean TTFT ratio:  "
        f"{statistics.mean(baseline) / statistics.mean(gateway_ttft):8.1f}x"
    )
    print(
        f"prefix-cache hit rate (engine counters): {interval.hit_rate:.3f} "
        f"({interval.hit_tokens:,.0f} of {interval.queried_tokens:,.0f} prompt tokens)"
    )
    print(f"  ratio to the per-tenant oracle:      {interval.hit_tokens / oracle:8.3f}")
    print(
        f"globex's first request, cached tokens (same system prompt as acme): {globex_first_cached}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
