"""A replica's KV-event publisher and replay socket listen on its node's cluster address
only, on ports of the deployment's KV-event range, and the replica reports the endpoints
they are bound on: real ZMQ sockets bound as vLLM binds them, and (with the Ray engine)
vLLM 0.29's own publisher."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import subprocess
from collections.abc import Iterator

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter import DeploymentConfigError
from prefixkit.engine_adapter.ray.install import ensure_ray_engine
from prefixkit.engine_adapter.ray.server import (
    KV_EVENTS_STAT,
    KV_REPLAY_STAT,
    free_ports,
    kv_events_config,
    kv_events_stats,
)
from prefixkit.engine_adapter.ray.settings import KV_PORT_RANGE

# every 127.x.y.z is this machine's (Linux routes 127/8 to the loopback interface), so each
# can stand for a node's address, and any other for an address the node has besides it
loopback = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(1, 254)).map(
    lambda parts: "127.{}.{}.{}".format(*parts)
)


def accepts(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex((host, port)) == 0


@contextlib.contextmanager
def bound(config: dict[str, object]) -> Iterator[tuple[str, str]]:
    """ZMQ sockets bound on the config's endpoints as vLLM's publisher binds them (a PUB
    socket and a ROUTER socket); yields the endpoints libzmq reports they listen on."""
    context = zmq.Context()
    publisher, replay = context.socket(zmq.PUB), context.socket(zmq.ROUTER)
    try:
        publisher.bind(str(config["endpoint"]))
        replay.bind(str(config["replay_endpoint"]))
        yield (
            publisher.getsockopt_string(zmq.LAST_ENDPOINT),
            replay.getsockopt_string(zmq.LAST_ENDPOINT),
        )
    finally:
        publisher.close(linger=0)
        replay.close(linger=0)
        context.term()


@settings(max_examples=20)
@given(addresses=st.lists(loopback, min_size=2, max_size=2, unique=True))
def test_the_sockets_listen_on_the_node_address_only_and_are_reported_as_bound(
    addresses: list[str],
) -> None:
    node, other = addresses
    port, replay = free_ports(node, 2, KV_PORT_RANGE)
    config = kv_events_config(node, port, replay)
    with bound(config) as (publisher, replayer):
        assert kv_events_stats(config) == {KV_EVENTS_STAT: publisher, KV_REPLAY_STAT: replayer}
        assert (publisher, replayer) == (f"tcp://{node}:{port}", f"tcp://{node}:{replay}")
        assert accepts(node, port) and accepts(node, replay)
        assert not accepts(other, port) and not accepts(other, replay)


@given(
    node=st.ip_addresses(v=4).filter(lambda address: not address.is_unspecified).map(str),
    port=st.integers(1024, 65535),
    replay=st.integers(1024, 65535),
)
def test_a_replica_reports_its_node_address_whatever_it_is(
    node: str, port: int, replay: int
) -> None:
    stats = kv_events_stats(kv_events_config(node, port, replay))
    assert stats == {
        KV_EVENTS_STAT: f"tcp://{node}:{port}",
        KV_REPLAY_STAT: f"tcp://{node}:{replay}",
    }


@pytest.mark.parametrize("node", ["0.0.0.0", "*", "", "fd00::5", "node-1.cluster.local"])
def test_an_address_that_is_not_one_ipv4_host_is_refused_naming_it(node: str) -> None:
    with pytest.raises(DeploymentConfigError, match=f"node address {node!r}"):
        kv_events_config(node, 28001, 28002)


def hold_three_ports(host: str) -> tuple[int, list[socket.socket]]:
    """Three consecutive ports of the KV-event range free at `host`, the first and the last
    held by listeners; returns the first and the listeners."""
    first, last = KV_PORT_RANGE
    while True:
        base = random.randint(first, last - 2)
        held = []
        try:
            for port in (base, base + 1, base + 2):
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(listener)
                listener.bind((host, port))
        except OSError:
            for listener in held:
                listener.close()
            continue
        held[1].close()
        return base, [held[0], held[2]]


def test_free_ports_skips_the_ports_someone_listens_on() -> None:
    base, held = hold_three_ports("127.0.0.1")
    try:
        assert free_ports("127.0.0.1", 1, (base, base + 2)) == [base + 1]
        with pytest.raises(DeploymentConfigError, match="only 1 of the 2 KV-event ports") as error:
            free_ports("127.0.0.1", 2, (base, base + 2))
        assert error.value.parts == ("kv_ports",)
    finally:
        for listener in held:
            listener.close()


def test_free_ports_are_distinct_ports_of_the_range() -> None:
    first, last = KV_PORT_RANGE
    ports = free_ports("127.0.0.1", 6, KV_PORT_RANGE)
    assert len(set(ports)) == 6
    assert all(first <= port <= last for port in ports)


# Run in the Ray engine's interpreter: vLLM 0.29's own publisher with a replica's config
# (it binds an endpoint holding '*' and connects to any other), then a subscriber at the
# reported endpoint, as the router's.
_VLLM_PUBLISHER = """
import json, socket, sys, time
import zmq
from vllm.config.kv_events import KVEventsConfig
from vllm.distributed.kv_events import BlockStored, EventPublisherFactory, KVEventBatch
from prefixkit.engine_adapter.ray.server import free_ports, kv_events_config, kv_events_stats

node, other, ports = json.loads(sys.argv[1])
port, replay = free_ports(node, 2, ports)
config = kv_events_config(node, port, replay)
stats = kv_events_stats(config)
publisher = EventPublisherFactory.create(KVEventsConfig(**config))

def accepts(host, p):
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex((host, p)) == 0

subscriber = zmq.Context.instance().socket(zmq.SUB)
subscriber.setsockopt(zmq.SUBSCRIBE, b"")
subscriber.connect(stats["prefixkit_kv_events"])
time.sleep(0.5)
stored = BlockStored(block_hashes=[1], parent_block_hash=None, token_ids=[5] * 16,
                     block_size=16, lora_id=None, medium="GPU", lora_name=None)
publisher.publish(KVEventBatch(ts=time.time(), events=[stored]))
received = subscriber.poll(5000) != 0
print(json.dumps({
    "on_node": [accepts(node, port), accepts(node, replay)],
    "elsewhere": [accepts(other, port), accepts(other, replay)],
    "received": received,
}))
publisher.shutdown()
"""


@pytest.mark.ray
def test_vllms_publisher_listens_on_the_node_address_only_and_reaches_the_router() -> None:
    result = subprocess.run(
        [
            str(ensure_ray_engine()),
            "-c",
            _VLLM_PUBLISHER,
            json.dumps(["127.0.0.1", "127.0.0.2", KV_PORT_RANGE]),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"on_node": [True, True], "elsewhere": [False, False], "received": True}
