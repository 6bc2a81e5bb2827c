"""The gateway's counters on Ray, summed over every ingress replica.

Each ingress replica runs the tenant gateway (`gateway.TenantGateway`) and, with the
prefixkit router, its own `request_router.PrefixkitRouter`; each counts what it saw into
one actor per Serve application (`ActorCounters`), so whichever replica answers
``GET /metrics`` shows the whole application's counts, in the names of the local backend
(`serving.metrics`). The actor is detached (it outlives the replica that created it, so
no replica's restart resets the counts) and takes no CPU from the replicas; it ends with
the cluster.

This module imports without Ray; `ActorCounters.for_application` runs where Ray is.
"""

from __future__ import annotations

from typing import Any

from ..serving.metrics import Counters, Key

__all__ = ["ActorCounters", "actor_name"]


def actor_name(application: str) -> str:
    """The counts actor of the Serve application `application`."""
    return f"prefixkit-counters-{application}"


class _Counts:
    """The actor: counts by key, added to by every ingress replica."""

    def __init__(self) -> None:
        self.values: dict[Key, int] = {}

    def add(self, key: Key, amount: int) -> None:
        self.values[key] = self.values.get(key, 0) + amount

    def snapshot(self) -> dict[Key, int]:
        return self.values


class ActorCounters(Counters):
    """`Counters` kept in the counts actor: `add` sends the amount to it (actor calls from
    one process run in the order sent); `value` reads the snapshot `refresh` last took."""

    def __init__(self, actor: Any) -> None:
        super().__init__()
        self.actor = actor

    @classmethod
    def for_application(cls) -> ActorCounters:
        """The counters of the Serve application this replica belongs to (the actor is
        created by the first replica that asks)."""
        import ray
        from ray import serve

        application = serve.get_replica_context().app_name
        actor = (
            ray.remote(_Counts)
            .options(
                name=actor_name(application),
                namespace="prefixkit",
                get_if_exists=True,
                lifetime="detached",
                num_cpus=0,
            )
            .remote()
        )
        return cls(actor)

    def add(self, key: Key, amount: int = 1) -> None:
        self.actor.add.remote(key, amount)

    async def refresh(self) -> None:
        """Take a snapshot of the counts: every amount this process added is in it."""
        self._values = dict(await self.actor.snapshot.remote())
