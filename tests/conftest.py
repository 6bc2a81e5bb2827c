"""Shared fixtures for the whole suite."""

from __future__ import annotations

# --- engine (issue 5): the embedded vLLM CPU engine, started once per session ---
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prefixkit.engine_adapter.embedded import prepare_embedded
from prefixkit.engine_adapter.engine_config import EngineConfig
from prefixkit.engine_adapter.supervisor import ReplicaSet, replica_configs

ENGINE_PORT = 18000


@dataclass(frozen=True)
class EmbeddedEngine:
    """The running session engine (SmolLM2-135M-Instruct on vLLM CPU).

    Block size 32, float32, eager, `sha256_cbor` block hashes seeded without PYTHONHASHSEED,
    prefix caching and prompt-token details on, dev endpoints (/reset_prefix_cache) on, KV
    events published on `kv_events_endpoint` (ipc, topic "kv") with replay on
    `kv_events_replay_endpoint`.
    """

    config: EngineConfig
    replicas: ReplicaSet
    run_dir: Path

    @property
    def base_url(self) -> str:
        return self.config.base_url

    @property
    def model(self) -> str:
        """The served model name to put in requests."""
        return self.config.name

    @property
    def kv_events_endpoint(self) -> str:
        assert self.config.kv_events_endpoint is not None
        return self.config.kv_events_endpoint

    @property
    def kv_events_replay_endpoint(self) -> str:
        assert self.config.kv_events_replay_endpoint is not None
        return self.config.kv_events_replay_endpoint

    @property
    def block_size(self) -> int:
        return self.config.block_size


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEngine]:
    """Install the engine and prepare the model if missing, then serve them for the session."""

    def report(message: str) -> None:
        if " s)" not in message:  # step lines only, not the once-a-second elapsed updates
            print(f"[engine] {message}", file=sys.stderr, flush=True)

    base = prepare_embedded(report, dev_endpoints=True)
    run_dir = tmp_path_factory.mktemp("engine")
    (config,) = replica_configs(base, 1, run_dir, ENGINE_PORT)
    with ReplicaSet([config], run_dir, start_timeout=600, report=report) as replicas:
        yield EmbeddedEngine(config, replicas, run_dir)


# --- /engine ---
