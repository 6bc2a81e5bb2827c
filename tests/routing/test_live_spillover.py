"""Against two real vLLM CPU replicas: under a concurrent burst on one cached prefix, the
precise router keeps affinity up to its load bound, then spills to the other replica; a
burst on a prefix no engine has stored yet is not scattered."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from prefixkit.engine_adapter.routing.policy import PreciseParams, load_bound
from prefixkit.sdk import tenant_salt

from tests.routing.conftest import routed

if TYPE_CHECKING:
    from tests.routing.conftest import LiveReplicas

pytestmark = pytest.mark.engine

ROUTER_PORT = 18135
BURST = 12
COLD_BURST = 4
SALT = tenant_salt("spillover-tenant", "routing-test-secret")
# ~16 blocks of system prompt, unlike any other test's, so only the warm-up caches it
SYSTEM = "You are the spill-over assistant of Harbour Freight Ltd. " + " ".join(
    f"Rule S-{k}: quote tariff {k * 13} for cargo class {k} and never promise dates."
    for k in range(26)
)


def _messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def _warm_floor(params: PreciseParams, replicas: int) -> int:
    """In-flight requests the warm replica takes, alone, before the bound first refuses it."""
    inflight = 0
    while inflight + 1 <= load_bound(inflight, replicas, params):
        inflight += 1
    return inflight


def _affinity_margin(replicas: LiveReplicas, params: PreciseParams) -> float:
    """Score lead of the warm replica for the last request of a burst that all went to it.

    Positive means the score alone (no bound) would keep the whole burst on the warm
    replica, so only the bounded-load rule can send requests to the cold one."""
    prompts = []
    for number in range(2):
        body = {"model": replicas.model_name, "messages": _messages(f"Burst question {number}?")}
        response = httpx.post(f"{replicas.urls[0]}/tokenize", json=body, timeout=30)
        response.raise_for_status()
        prompts.append(response.json()["tokens"])
    common = next(
        (i for i, (a, b) in enumerate(zip(*prompts, strict=False)) if a != b),
        min(map(len, prompts)),
    )
    shared = common // replicas.block_size
    uncached = len(prompts[0]) // replicas.block_size - shared
    per_request = params.running_weight + params.queue_weight * uncached
    return shared - per_request * (BURST - 1)


async def _burst(url: str, model: str, salt: str, size: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        bodies = [
            {
                "model": model,
                "messages": _messages(f"Burst question {number}?"),
                "max_tokens": 32,
                "ignore_eos": True,  # every request decodes 32 tokens: they overlap in flight
                "cache_salt": salt,
            }
            for number in range(size)
        ]
        return await asyncio.gather(
            *(client.post("/v1/chat/completions", json=body) for body in bodies)
        )


def test_concurrent_burst_on_one_prefix_spills_past_the_load_bound(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    params = PreciseParams()  # the router's defaults
    replica_count = len(live_replicas.urls)
    margin = _affinity_margin(live_replicas, params)
    assert margin > 0, "prefix too short: the load term alone would spill the burst"
    with routed(live_replicas, tmp_path, ROUTER_PORT) as url:
        warm_body = {
            "model": live_replicas.model_name,
            "messages": _messages("Warm-up question?"),
            "max_tokens": 1,
            "cache_salt": SALT,
        }
        warm_response = httpx.post(f"{url}/v1/chat/completions", json=warm_body, timeout=120)
        warm_response.raise_for_status()
        warm = int(warm_response.headers["x-prefixkit-replica"])
        time.sleep(1.0)  # let the engine's KV events reach the index
        before = httpx.get(f"{url}/router/state").json()["routed"]
        started = time.monotonic()
        responses = asyncio.run(_burst(url, live_replicas.model_name, SALT, BURST))
        elapsed = time.monotonic() - started
        after = httpx.get(f"{url}/router/state").json()["routed"]
    assert [r.status_code for r in responses] == [200] * BURST
    served = Counter(int(r.headers["x-prefixkit-replica"]) for r in responses)
    split = [served[r] for r in range(replica_count)]
    floor = _warm_floor(params, replica_count)
    print(
        f"burst of {BURST} in {elapsed:.1f} s: warm replica {warm}, served {split}, "
        f"router routed delta {[a - b for a, b in zip(after, before, strict=True)]}, "
        f"warm floor {floor}, affinity margin {margin:.1f} blocks"
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == split
    assert min(split) > 0  # spilled: the cold replica took part of the burst
    assert served[warm] >= floor  # affinity held until the warm replica reached the bound


def test_a_burst_on_a_prefix_not_yet_stored_goes_to_one_replica(
    live_replicas: LiveReplicas, tmp_path: Path
) -> None:
    # routed before any engine has computed (and reported) the prefix: only the
    # requests already in flight tell where it is coming; 4 stay within the load
    # bound and the work budget, so nothing else may split them
    salt = tenant_salt("cold-burst-tenant", "routing-test-secret")
    with routed(live_replicas, tmp_path, ROUTER_PORT) as url:
        responses = asyncio.run(_burst(url, live_replicas.model_name, salt, COLD_BURST))
    assert [r.status_code for r in responses] == [200] * COLD_BURST
    served = Counter(int(r.headers["x-prefixkit-replica"]) for r in responses)
    assert sorted(served.values()) == [COLD_BURST], f"burst scattered: {dict(served)}"
