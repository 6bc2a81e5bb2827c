"""Two real vLLM CPU replicas with KV events and a deliberately small KV cache (session scope).

Started once for every routing test marked `engine` (~40 s each, in parallel), by the
same `ReplicaSet` `prefixkit serve` uses; ports 18120-18121, KV events and replay on
ipc sockets in a temp dir, the block hashes seeded as vLLM does without PYTHONHASHSEED.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prefixkit.engine_adapter import EngineConfig, ReplicaEndpoint, Topology, deploy
from prefixkit.engine_adapter.engine.replicas import ReplicaSet, replica_configs
from prefixkit.engine_adapter.engine.smollm2 import ensure_smollm2

# 40 blocks of 32 tokens per replica: two tenants fit, four do not
KV_BLOCKS = 40
BLOCK_SIZE = 32
FIRST_PORT = 18120


@dataclass(frozen=True)
class LiveReplicas:
    configs: list[EngineConfig]
    model_name: str
    block_size: int = BLOCK_SIZE

    @property
    def urls(self) -> list[str]:
        return [c.base_url for c in self.configs]

    @property
    def kv_endpoints(self) -> list[str]:
        return [c.kv_events_endpoint or "" for c in self.configs]

    @property
    def endpoints(self) -> list[ReplicaEndpoint]:
        """The replicas as `deploy` takes them (the same wiring as `prefixkit serve`)."""
        return [ReplicaEndpoint.of(c) for c in self.configs]


@pytest.fixture(scope="session")
def live_replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveReplicas]:
    run = tmp_path_factory.mktemp("routing-replicas")
    base = EngineConfig(
        model=ensure_smollm2(),
        block_size=BLOCK_SIZE,
        max_model_len=1024,
        dtype="float32",
        enforce_eager=True,
        kv_cache_space_gib=1,
        num_gpu_blocks_override=KV_BLOCKS,
    )
    configs = replica_configs(base, 2, run, FIRST_PORT)
    with ReplicaSet(configs, run, start_timeout=300):
        yield LiveReplicas(configs, configs[0].name)


@contextlib.contextmanager
def routed(
    replicas: LiveReplicas,
    run_dir: Path,
    port: int,
    report: Callable[[str], None] = print,
    **topology: Any,
) -> Iterator[str]:
    """The live replicas behind a router (precise unless `topology` says otherwise), as
    `prefixkit serve --no-gateway` deploys them; yields the serving app's URL."""
    options = {"router": "precise", "port": port, **topology}
    with deploy(
        replicas.endpoints, Topology(replicas=2, **options), run_dir=run_dir, report=report
    ) as deployment:
        yield deployment.url
