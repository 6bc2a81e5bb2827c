"""Two real vLLM CPU replicas with KV events and a deliberately small KV cache (session scope).

Started once for every routing test marked `engine` (~40 s each, in parallel);
ports 18120-18121, KV events and replay on ipc sockets in a temp dir.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from prefixkit.engine_adapter.engine.config import EngineConfig
from prefixkit.engine_adapter.engine.smollm2 import ensure_smollm2

# 40 blocks of 32 tokens per replica: two tenants fit, four do not
KV_BLOCKS = 40
BLOCK_SIZE = 32
PORTS = (18120, 18121)


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
    def replay_endpoints(self) -> list[str | None]:
        return [c.kv_events_replay_endpoint for c in self.configs]

    @property
    def replica_set(self) -> SimpleNamespace:
        """What `launch_router` reads of a `ReplicaSet`: the same wiring as `prefixkit serve`."""
        return SimpleNamespace(
            base_urls=self.urls, replicas=[SimpleNamespace(config=c) for c in self.configs]
        )


def _wait_healthy(
    urls: list[str], processes: list[subprocess.Popen[bytes]], logs: list[Path]
) -> None:
    deadline = time.monotonic() + 300
    pending = set(urls)
    while pending and time.monotonic() < deadline:
        for url, process, log in zip(urls, processes, logs, strict=True):
            if process.poll() is not None:
                raise RuntimeError(f"replica {url} exited: {log.read_text()[-3000:]}")
            if url in pending:
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        pending.discard(url)
                except httpx.HTTPError:
                    pass
        time.sleep(1)
    if pending:
        raise RuntimeError(f"replicas {sorted(pending)} not healthy after 300 s")


@pytest.fixture(scope="session")
def live_replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveReplicas]:
    model = ensure_smollm2()
    run = tmp_path_factory.mktemp("routing-replicas")
    configs = [
        EngineConfig(
            model=model,
            port=port,
            block_size=BLOCK_SIZE,
            max_model_len=1024,
            dtype="float32",
            enforce_eager=True,
            kv_cache_space_gib=1,
            kv_events_endpoint=f"ipc://{run}/kv{index}.ipc",
            kv_events_replay_endpoint=f"ipc://{run}/kv{index}-replay.ipc",
        )
        for index, port in enumerate(PORTS)
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    processes = []
    logs = []
    for index, config in enumerate(configs):
        log = run / f"replica{index}.log"
        logs.append(log)
        argv = [*config.argv(), "--num-gpu-blocks-override", str(KV_BLOCKS)]
        processes.append(
            subprocess.Popen(
                argv,
                env={**env, **config.env()},
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    try:
        _wait_healthy([c.base_url for c in configs], processes, logs)
        yield LiveReplicas(configs, configs[0].name)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
