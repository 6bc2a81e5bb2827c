"""A deployment as a hostile tenant meets it: the serving app on uvicorn (`deploy`) in front of
fake vLLM 0.32 replicas in dev mode (every route vLLM can serve, the admin ones included),
two tenants and an operator."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prefixkit.engine_adapter import Deployment, Limits, Tenants, Topology, deploy
from prefixkit.sdk import tenant_salt
from prefixkit.testing import ReceivedRequest
from prefixkit.testing.fake_vllm import FakeVLLM, free_port

SECRET = "hostile-tenant-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET, {"key-ops": "ops"})
ACME = {"Authorization": "Bearer key-acme"}
GLOBEX = {"Authorization": "Bearer key-globex"}
OPERATOR = {"Authorization": "Bearer key-ops"}
SALTS = {tenant: tenant_salt(tenant, SECRET) for tenant in ("acme", "globex")}
PROMPT = "Nimbus Storage keeps your buckets in three regions and bills by the hour. " * 12


@dataclass
class Served:
    """A running deployment and its replicas."""

    deployment: Deployment
    replicas: list[FakeVLLM]

    @property
    def url(self) -> str:
        return self.deployment.url

    def mark(self) -> list[int]:
        """Where each replica's request log ends now."""
        return [len(replica.requests) for replica in self.replicas]

    def since(self, mark: list[int]) -> list[ReceivedRequest]:
        """What the replicas received after `mark` (health polls left out)."""
        return [
            request
            for replica, start in zip(self.replicas, mark, strict=True)
            for request in replica.requests[start:]
            if request.path != "/health"
        ]


@contextlib.contextmanager
def serving(replicas: int = 1, limits: Limits | None = None) -> Iterator[Served]:
    """A deployment of `replicas` dev-mode fake replicas (the precise router for two)."""
    fakes = [FakeVLLM(dev_mode=True, kv_events=True).start() for _ in range(replicas)]
    topology = Topology(
        replicas=replicas, router="precise", port=free_port(), router_port=free_port()
    )
    try:
        endpoints = [fake.endpoint for fake in fakes]
        with deploy(endpoints, topology, tenants=TENANTS, limits=limits) as running:
            yield Served(running, fakes)
    finally:
        for fake in fakes:
            fake.__exit__(None, None, None)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """One replica behind the gateway, shared by a test module."""
    with serving() as running:
        yield running


@pytest.fixture(scope="module")
def routed() -> Iterator[Served]:
    """Two replicas behind the precise router, shared by a test module."""
    with serving(replicas=2) as running:
        yield running
