"""The replica supervisor with a real engine: restart after a crash, clean stop."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from prefixkit.engine_adapter.engine.replicas import ReplicaSet, replica_configs

if TYPE_CHECKING:
    from tests.conftest import EmbeddedEngine

pytestmark = pytest.mark.engine

PORT = 18001


@pytest.fixture(scope="module")
def replicas(
    engine: EmbeddedEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReplicaSet]:
    """One replica of its own (the session engine must not be disturbed)."""
    run_dir = tmp_path_factory.mktemp("supervised")
    configs = replica_configs(engine.config, 1, run_dir, PORT)
    with ReplicaSet(configs, run_dir, start_timeout=600, backoff_initial=0.5) as replica_set:
        yield replica_set


def test_a_killed_replica_is_restarted_and_healthy_again(replicas: ReplicaSet) -> None:
    replica = replicas.replicas[0]
    killed = replica.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while replica.restarts == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert replica.restarts == 1
    replicas.wait_healthy(timeout=600)
    assert replica.pid != killed
    assert httpx.get(f"{replica.base_url}/health").status_code == 200
    assert replica.state == "healthy"


def test_state_file_names_each_replica(replicas: ReplicaSet) -> None:
    state = json.loads((replicas.run_dir / "replicas.json").read_text())
    assert [entry["url"] for entry in state] == replicas.base_urls
    assert state[0]["kv_events_endpoint"] == replicas.replicas[0].kv_events_endpoint
    assert Path(state[0]["log"]).is_file()


def test_stop_ends_every_process_of_every_replica(replicas: ReplicaSet) -> None:
    groups = [replica.pid for replica in replicas.replicas]
    replicas.stop()
    for group in groups:
        assert group is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
    assert all(replica.state == "stopped" for replica in replicas.replicas)
