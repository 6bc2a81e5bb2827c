"""Request routers of Ray Serve LLM side by side, on the same multi-tenant workload:
prefixkit's precise policy, Ray's KVAwareRouter, PrefixCacheAffinityRouter and the default.

    flock /tmp/prefixkit-engine.lock .venv/bin/python bench/ray_routing.py   # ~15 minutes

Each router gets its own deployment (`serve_on_ray`, as `prefixkit serve --backend ray
--ray-router R` runs it): a local Ray cluster, two vLLM CPU replicas of the embedded model
(SmolLM2-135M, 32-token blocks) with a deliberately small KV cache (`--kv-blocks`, 64
blocks each), fresh caches. Workload (bench/chats.py, as bench/router_live.py): 6 tenants,
each with its own system prompt (~12 blocks), 2 users each holding a 4-turn conversation
(every turn resends the whole history), at most `--clients` requests in flight, streamed,
8 tokens each.

prefixkit, prefix-affinity and default run on two Ray nodes (one replica each) behind the
tenant gateway: requests carry the tenant's API key, the gateway sets the tenant's salt.
KVAwareRouter makes the LLM server the ingress (no gateway: the bench sends the same
tenant salts itself) and cannot run on two Ray nodes of one host (its KV-event ports
collide), so its two replicas share one node.

Prints per router: the engines' prefix-cache hit rate (cached / prompt tokens, from each
answer's usage), TTFT median and p90, and requests per replica (from the Serve replicas'
logs, by request id).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from chats import Conversation, conversations
from prefixkit.engine_adapter import RayDeployment, RaySettings, prepare_embedded, serve_on_ray
from prefixkit.sdk import tenant_salt
from prefixkit.testing.ttft import StreamReading
from progress import report
from samples import percentile

TENANTS = 6
USERS = 2
TURNS = 4
SECRET = "ray-routing-bench-secret-0123456789"
ROUTERS = ("prefixkit", "kv-aware", "prefix-affinity", "default")


def workload() -> list[Conversation]:
    return conversations(TENANTS, USERS, TURNS, (290, 20, 35))


def key(tenant: int) -> str:
    return f"bench-key-{tenant}"


@dataclass
class Phase:
    router: str
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttft_s: list[float] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    per_replica: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


async def _stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, object],
    headers: dict[str, str],
    phase: Phase,
) -> None:
    reading = StreamReading()
    async with client.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers
    ) as response:
        if response.status_code != 200:
            raise RuntimeError(
                f"{phase.router}: HTTP {response.status_code} {await response.aread()!r}"
            )
        async for line in response.aiter_lines():
            reading.feed(line)
    try:
        answer = reading.answer()
    except ValueError:
        raise RuntimeError(f"{phase.router}: no token streamed back") from None
    phase.prompt_tokens += answer.prompt_tokens
    phase.cached_tokens += answer.cached_tokens
    phase.ttft_s.append(answer.ttft_s)


async def _send_all(deployment: RayDeployment, model: str, clients: int, phase: Phase) -> None:
    gate = asyncio.Semaphore(clients)
    gateway = phase.router != "kv-aware"

    async def converse(client: httpx.AsyncClient, conversation: Conversation) -> None:
        for messages in conversation.turns:
            request_id = f"bench-{uuid.uuid4().hex}"
            phase.request_ids.append(request_id)
            body: dict[str, object] = {
                "model": model,
                "messages": messages,
                "max_tokens": 8,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            headers = {"x-request-id": request_id}
            if gateway:
                headers["authorization"] = f"Bearer {key(conversation.tenant)}"
            else:  # what the gateway would set
                body["cache_salt"] = tenant_salt(str(conversation.tenant), SECRET)
            async with gate:
                await _stream(client, deployment.url, body, headers, phase)

    async with httpx.AsyncClient(timeout=600) as client:
        await asyncio.gather(*(converse(client, c) for c in workload()))


def requests_per_replica(deployment: RayDeployment, request_ids: list[str]) -> list[int]:
    """How many of `request_ids` each vLLM replica's Serve log names."""
    assert deployment.ray_temp_dir is not None
    logs = sorted(
        (deployment.ray_temp_dir / "session_latest" / "logs" / "serve").glob("replica_*Server*.log")
    )
    counts = []
    for log in logs:
        text = log.read_text(errors="replace")
        counts.append(sum(1 for rid in request_ids if rid in text))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kv-blocks", type=int, default=64)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--port", type=int, default=18310)
    parser.add_argument("--routers", nargs="+", choices=ROUTERS, default=list(ROUTERS))
    args = parser.parse_args()

    base = prepare_embedded(report, num_gpu_blocks_override=args.kv_blocks, max_model_len=1024)
    phases = []
    with tempfile.TemporaryDirectory(prefix="pk-ray-bench-") as tmp:
        tenants_file = Path(tmp) / "tenants.toml"
        tenants_file.write_text(
            f'secret = "{SECRET}"\n[tenants]\n'
            + "".join(f'"{t}" = "{key(t)}"\n' for t in range(TENANTS))
        )
        for router in args.routers:
            gateway = router != "kv-aware"
            settings = RaySettings(
                router=router,
                replicas=2,
                http_port=args.port,
                tenants_file=str(tenants_file) if gateway else None,
            )
            run_dir = Path(tmp) / router
            print(f"deploying with the {router} router ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            phase = Phase(router)
            try:
                with serve_on_ray(
                    base, settings, run_dir, nodes=2 if gateway else 1, report=report
                ) as deployment:
                    ready = time.monotonic() - started
                    print(f"  ready in {ready:.0f} s", file=sys.stderr, flush=True)
                    asyncio.run(_send_all(deployment, base.name, args.clients, phase))
                    time.sleep(2)  # the replicas' logs are written asynchronously
                    phase.per_replica = requests_per_replica(deployment, phase.request_ids)
            except Exception as error:  # one router failing leaves the others' results
                phase.error = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                print(f"  {router} failed: {error}", file=sys.stderr, flush=True)
            phases.append(phase)

    requests = TENANTS * USERS * TURNS
    print(
        f"{requests} requests: {TENANTS} tenants x {USERS} users x {TURNS} turns, "
        f"{args.clients} in flight, 2 replicas x {args.kv_blocks} blocks of {base.block_size} tokens"
    )
    print(
        f"{'router':<18}{'hit rate':>9}{'TTFT median':>13}{'TTFT p90':>10}   requests per replica"
    )
    for phase in phases:
        if phase.error is not None or not phase.ttft_s:
            print(f"{phase.router:<18}failed: {phase.error}")
            continue
        print(
            f"{phase.router:<18}{phase.hit_rate:>9.3f}"
            f"{statistics.median(phase.ttft_s) * 1e3:>10.0f} ms"
            f"{percentile(phase.ttft_s, 0.9) * 1e3:>7.0f} ms   {phase.per_replica}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
