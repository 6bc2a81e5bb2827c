"""The vLLM replica of the prefixkit router: Ray Serve LLM's `LLMServer` that publishes its
KV-cache events on ports of its own, on its node's cluster address only, and tells the
router where.

Ray's own KV-event ports are a base port plus the replica's rank on its node, so two Ray
nodes on one host (or two deployments) bind the same port and the second engine fails
(``Address already in use``). Here each replica picks two free ports of the deployment's
KV-event range (`RaySettings.kv_ports`, so that a firewall or NetworkPolicy can name
them) at start, binds the engine's ZMQ publisher and replay socket on the node's cluster
address there (`kv_events_config`), and reports the same endpoints in its routing stats
(`kv_events_stats`: `KV_EVENTS_STAT`, `KV_REPLAY_STAT`), which Ray Serve hands to the
request router with the replica. The router fetches from the replay socket the events
published before it subscribed (a replica serves before its routing stats first reach
the router).

The sockets take no credentials and the events carry every request's token ids and
salt: only the cluster's own network may reach them (docs/self-hosting/ray.md), so they
are never bound on every interface.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import socket
from collections.abc import Sequence
from typing import Any

from ..errors import DeploymentConfigError

# `KvEventsServer` too, made on first use (module `__getattr__`): it subclasses Ray's
# `LLMServer`, so this module imports without Ray (as in prefixkit's own environment)
__all__ = [
    "KV_EVENTS_STAT",
    "KV_PORTS_CONFIG",
    "KV_REPLAY_STAT",
    "KV_TOPIC",
    "free_ports",
    "kv_events_config",
    "kv_events_stats",
]

KV_EVENTS_STAT = "prefixkit_kv_events"
KV_REPLAY_STAT = "prefixkit_kv_events_replay"
KV_TOPIC = "kv"
# the key of `LLMConfig.experimental_configs` holding the KV-event port range [first, last]
KV_PORTS_CONFIG = "prefixkit_kv_ports"


def kv_events_config(node_ip: str, port: int, replay_port: int) -> dict[str, Any]:
    """vLLM's ``kv_events_config`` for a replica on the node `node_ip` (its cluster
    address): the publisher bound on `node_ip`:`port`, the replay socket on
    `node_ip`:`replay_port`, nothing on any other address.

    vLLM 0.29's publisher binds its endpoint only when it holds ``*`` or ``::`` and
    connects to it otherwise; libzmq reads ``SOURCE;ADDRESS`` in any TCP endpoint and a
    bound socket listens on ADDRESS alone, so the publisher's endpoint is
    ``tcp://*:0;NODE_IP:PORT``. Raises `DeploymentConfigError` for an address that is
    not one IPv4 host (vLLM's ZMQ sockets have IPv6 off)."""
    try:
        address = ipaddress.ip_address(node_ip)
    except ValueError:
        address = None
    if not isinstance(address, ipaddress.IPv4Address) or address.is_unspecified:
        raise DeploymentConfigError(
            f"node address {node_ip!r}: the KV-event sockets bind on the node's IPv4 "
            "cluster address (vLLM's ZMQ sockets have IPv6 off); give the Ray node an IPv4 "
            "address (ray start --node-ip-address)",
            parts=("node_ip",),
        )
    return {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:0;{address}:{port}",
        "replay_endpoint": f"tcp://{address}:{replay_port}",
        "topic": KV_TOPIC,
    }


def kv_events_stats(config: dict[str, Any]) -> dict[str, str]:
    """The routing stats a replica with vLLM's `config` reports: the endpoints its
    publisher and replay socket are bound on, where the router connects."""
    return {
        KV_EVENTS_STAT: _bound_endpoint(config["endpoint"]),
        KV_REPLAY_STAT: _bound_endpoint(config["replay_endpoint"]),
    }


def _bound_endpoint(endpoint: str) -> str:
    """The address a bound ZMQ TCP endpoint listens on (its part after ``;``)."""
    return "tcp://" + endpoint.removeprefix("tcp://").rpartition(";")[2]


def free_ports(host: str, count: int, ports: Sequence[int]) -> list[int]:
    """`count` distinct ports of the range `ports` (``[first, last]``) that nobody listens
    on at `host` now (the engine binds them a moment later), tried in random order so that
    replicas starting together on one host rarely pick the same. Raises
    `DeploymentConfigError` when fewer are free."""
    first, last = ports
    candidates = list(range(first, last + 1))
    random.shuffle(candidates)
    probes: list[socket.socket] = []
    try:
        for port in candidates:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind((host, port))
            except OSError:
                probe.close()
                continue
            probes.append(probe)
            if len(probes) == count:
                return [p.getsockname()[1] for p in probes]
    finally:
        for probe in probes:
            probe.close()
    raise DeploymentConfigError(
        f"only {len(probes)} of the {count} KV-event ports a replica needs are free on "
        f"{host} in {first}-{last}: widen the range (RaySettings.kv_ports) or run fewer "
        "replicas on this node",
        parts=("kv_ports",),
    )


def __getattr__(name: str) -> Any:
    if name == "KvEventsServer":
        return _kv_events_server()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _kv_events_server() -> type[Any]:
    import ray
    from ray.serve.llm.deployment import LLMServer

    class KvEventsServer(LLMServer):  # type: ignore[misc]
        """`LLMServer` with KV-cache events on its node's address, on ports chosen at
        start (module docstring)."""

        async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # type: ignore[misc]
            node = ray.util.get_node_ip_address()
            port, replay = free_ports(node, 2, llm_config.experimental_configs[KV_PORTS_CONFIG])
            config = kv_events_config(node, port, replay)
            llm_config.update_engine_kwargs(kv_events_config=config)
            self._kv_events = kv_events_stats(config)
            await super().__init__(llm_config, **kwargs)

        async def record_routing_stats(self) -> dict[str, Any]:
            stats: dict[str, Any] = dict(await super().record_routing_stats() or {})
            return {**stats, **self._kv_events}

    KvEventsServer.__module__ = __name__
    KvEventsServer.__qualname__ = "KvEventsServer"
    return KvEventsServer
