"""The vLLM replica of the prefixkit router: Ray Serve LLM's `LLMServer` that publishes its
KV-cache events on a port of its own and tells the router where.

Ray's own KV-event ports are a base port plus the replica's rank on its node, so two Ray
nodes on one host (or two deployments) bind the same port and the second engine fails
(``Address already in use``). Here each replica asks its node for a free port at start,
binds the engine's ZMQ publisher there (``tcp://*:PORT``), and reports
``tcp://NODE_IP:PORT`` in its routing stats (`KV_EVENTS_STAT`), which Ray Serve hands to
the request router with the replica; likewise its replay socket (`KV_REPLAY_STAT`), from
which the router fetches the events published before it subscribed (a replica serves
before its routing stats first reach the router).
"""

from __future__ import annotations

import functools
import socket
from typing import Any

# `KvEventsServer` too, made on first use (module `__getattr__`): it subclasses Ray's
# `LLMServer`, so this module imports without Ray (as in prefixkit's own environment)
__all__ = ["KV_EVENTS_STAT", "KV_REPLAY_STAT", "KV_TOPIC", "free_port"]

KV_EVENTS_STAT = "prefixkit_kv_events"
KV_REPLAY_STAT = "prefixkit_kv_events_replay"
KV_TOPIC = "kv"


def free_port() -> int:
    """A TCP port nobody listens on now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        port: int = probe.getsockname()[1]
        return port


def __getattr__(name: str) -> Any:
    if name == "KvEventsServer":
        return _kv_events_server()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _kv_events_server() -> type[Any]:
    import ray
    from ray.serve.llm.deployment import LLMServer

    class KvEventsServer(LLMServer):  # type: ignore[misc]
        """`LLMServer` with KV-cache events on a port chosen at start (module docstring)."""

        async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # type: ignore[misc]
            port, replay = free_port(), free_port()
            llm_config.update_engine_kwargs(
                kv_events_config={
                    "enable_kv_cache_events": True,
                    "publisher": "zmq",
                    "endpoint": f"tcp://*:{port}",
                    "replay_endpoint": f"tcp://*:{replay}",
                    "topic": KV_TOPIC,
                }
            )
            node = ray.util.get_node_ip_address()
            self._kv_events = {
                KV_EVENTS_STAT: f"tcp://{node}:{port}",
                KV_REPLAY_STAT: f"tcp://{node}:{replay}",
            }
            await super().__init__(llm_config, **kwargs)

        async def record_routing_stats(self) -> dict[str, Any]:
            stats: dict[str, Any] = dict(await super().record_routing_stats() or {})
            return {**stats, **self._kv_events}

    KvEventsServer.__module__ = __name__
    KvEventsServer.__qualname__ = "KvEventsServer"
    return KvEventsServer
