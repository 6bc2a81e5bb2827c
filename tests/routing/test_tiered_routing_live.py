"""Tier-aware routing through a real router, deployed as `prefixkit serve --router
precise --tier-savings` deploys it: the precise router follows the KV events that fake
replicas publish over ZMQ as vLLM does, the replicas offloading the blocks their GPU cache
evicts to host memory (medium ``CPU``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
from prefixkit.engine_adapter import Topology, deploy
from prefixkit.engine_adapter.routing.router_state import RouterState
from prefixkit.sdk import event_block_hashes
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

BLOCK = 32
PROMPT = [1000 + i for i in range(10 * BLOCK)]  # 10 blocks
HASHES = event_block_hashes(PROMPT, BLOCK, algo="sha256_cbor")
CPU_SAVES_LESS = (1.0, 0.4, 0.1)
TIER_BLIND = (1.0, 1.0, 1.0)


@dataclass
class Routed:
    url: str
    replicas: list[FakeVLLM]
    state: RouterState

    def routes_prompt_to(self, runs: list[int]) -> int:
        """The replica the router sends the prompt and a new question to, once the KV
        events have shown it each replica's cached `runs` of the prompt (in any tier)."""
        deadline = time.monotonic() + 10.0
        while (seen := self.state.index.tiered_runs(HASHES, TIER_BLIND)[0]) != runs:
            assert time.monotonic() < deadline, f"the router saw runs {seen}, not {runs}"
            time.sleep(0.05)
        answer = _complete(self.url, [*PROMPT, *range(7, 7 + BLOCK)])
        return int(answer.headers["x-prefixkit-replica"])


def _complete(url: str, prompt: Sequence[int]) -> httpx.Response:
    body = {"model": "fake-model", "prompt": list(prompt), "max_tokens": 1}
    answer = httpx.post(f"{url}/v1/completions", json=body, timeout=10)
    answer.raise_for_status()
    return answer


def _holds_on_gpu(replica: FakeVLLM, blocks: int) -> None:
    """`replica` holds the prompt's first `blocks` blocks in its GPU cache."""
    _complete(replica.url, PROMPT[: blocks * BLOCK])
    assert replica.cache.cached_run(HASHES) == blocks


def _holds_on_cpu_only(replica: FakeVLLM) -> None:
    """`replica` holds the whole prompt offloaded: two other prompts pushed it out of its
    GPU cache into host memory."""
    _complete(replica.url, PROMPT)
    for other in (1, 2):
        _complete(replica.url, [other * 100_000 + i for i in range(10 * BLOCK)])
    assert replica.offloaded is not None
    assert all(h not in replica.cache.lru and h in replica.offloaded.lru for h in HASHES)


@contextlib.contextmanager
def _routed(savings: tuple[float, ...]) -> Iterator[Routed]:
    """Two fake replicas (a GPU cache of 12 blocks, 40 offloaded) behind a precise router
    deployed with these savings per tier (`Topology.tier_savings`, `--tier-savings`)."""
    fakes = [FakeVLLM(kv_events=True, capacity_blocks=12, offload_blocks=40) for _ in range(2)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        topology = Topology(replicas=2, router="precise", port=free_port(), tier_savings=savings)
        running = stack.enter_context(deploy([f.endpoint for f in fakes], topology))
        assert running.state is not None
        time.sleep(0.5)  # the router's subscriptions reach the publishers
        yield Routed(running.url, fakes, running.state)


def test_a_prefix_on_gpu_wins_over_a_longer_one_only_on_cpu_when_cpu_saves_less() -> None:
    with _routed(CPU_SAVES_LESS) as routed:
        gpu, cpu = routed.replicas
        _holds_on_gpu(gpu, 6)
        _holds_on_cpu_only(cpu)
        assert routed.routes_prompt_to([6, 10]) == 0


def test_tier_blind_the_longer_prefix_wins_though_only_on_cpu() -> None:
    with _routed(TIER_BLIND) as routed:
        gpu, cpu = routed.replicas
        _holds_on_gpu(gpu, 6)
        _holds_on_cpu_only(cpu)
        assert routed.routes_prompt_to([6, 10]) == 1


def test_a_prefix_only_on_cpu_wins_over_a_replica_holding_nothing() -> None:
    with _routed(CPU_SAVES_LESS) as routed:
        _holds_on_cpu_only(routed.replicas[1])
        assert routed.routes_prompt_to([0, 10]) == 1
