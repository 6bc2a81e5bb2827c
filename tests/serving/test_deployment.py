"""`deploy` and its `Topology`: parts that do not fit are refused before anything starts,
naming what to change; a deployment stops what it started."""

from __future__ import annotations

import socket

import httpx
import pytest
from prefixkit.engine_adapter import (
    DeploymentConfigError,
    PortInUseError,
    ReplicaEndpoint,
    Tenants,
    Topology,
    deploy,
)
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replicas": 0}, "--replicas 0: give at least 1"),
        ({"replicas": 2, "router": "round_robin"}, "unknown router 'round_robin'"),
        ({"replicas": 1, "router": "precise", "decision_log": True}, "--decision-log"),
        ({"replicas": 2, "router": "smg", "decision_log": True}, "--router precise"),
        ({"replicas": 2, "router": "precise", "smg_chars_per_token": 5.0}, "--router smg"),
        ({"replicas": 2, "router": "smg", "smg_chars_per_token": 0.0}, "a positive ratio"),
    ],
)
def test_options_that_do_not_fit_are_refused_naming_them(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(DeploymentConfigError, match=message):
        Topology(**options)  # type: ignore[arg-type]


def test_two_roles_on_one_port_are_refused_naming_both() -> None:
    topology = Topology(replicas=2, port=8101, engine_port=8100)
    with pytest.raises(DeploymentConfigError, match="the gateway and the replica 1 would both"):
        topology.ports(launching=True, app=True)


def test_a_port_collision_carries_the_port_and_the_settings_that_share_it() -> None:
    topology = Topology(replicas=2, port=8101, engine_port=8100)
    with pytest.raises(DeploymentConfigError) as caught:
        topology.ports(launching=True, app=True)
    assert (caught.value.port, caught.value.parts) == (8101, ("engine_port", "port"))


def test_the_precise_router_refuses_replicas_without_kv_events() -> None:
    endpoints = [ReplicaEndpoint("http://127.0.0.1:1"), ReplicaEndpoint("http://127.0.0.1:2")]
    with (
        pytest.raises(DeploymentConfigError, match="needs KV events"),
        deploy(endpoints, Topology(replicas=2, router="precise")),
    ):
        pass


def test_the_precise_router_refuses_a_hash_it_cannot_compute() -> None:
    endpoints = [
        ReplicaEndpoint(f"http://127.0.0.1:{n}", kv_events="ipc:///tmp/x", hash_algo="xxhash")
        for n in (1, 2)
    ]
    with (
        pytest.raises(DeploymentConfigError, match="reproducible block hash"),
        deploy(endpoints, Topology(replicas=2, router="precise")),
    ):
        pass


def test_endpoints_and_topology_must_agree_on_the_replica_count() -> None:
    with (
        pytest.raises(DeploymentConfigError, match="1 replica endpoints for a topology of 2"),
        deploy([ReplicaEndpoint("http://127.0.0.1:1")], Topology(replicas=2, router="precise")),
    ):
        pass


def test_a_taken_gateway_port_is_named_before_anything_starts() -> None:
    tenants = Tenants({"key": "acme"}, "deployment-test-secret-0123")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with (
            pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"),
            deploy([ReplicaEndpoint("http://127.0.0.1:1")], Topology(port=port), tenants=tenants),
        ):
            pass


def test_a_taken_port_carries_the_port_and_its_host() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(PortInUseError) as caught:
            Topology(port=port).check_free(launching=False, app=True)
    assert (caught.value.port, caught.value.host) == (port, "127.0.0.1")


def test_one_replica_without_tenants_needs_no_app() -> None:
    with FakeVLLM() as replica, deploy([replica.endpoint]) as deployment:
        assert deployment.url == replica.url


def test_the_serving_app_stops_with_the_deployment() -> None:
    tenants = Tenants({"key": "acme"}, "deployment-test-secret-0123")
    with FakeVLLM() as replica:
        with deploy([replica.endpoint], Topology(port=free_port()), tenants=tenants) as running:
            assert httpx.get(f"{running.url}/health").status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{running.url}/health")


def _precise_hashes(version: str) -> str:
    """The vLLM version whose block hash a precise router in front of two fake replicas
    reporting `version` computes."""
    with (
        FakeVLLM(kv_events=True, vllm_version=version) as first,
        FakeVLLM(kv_events=True, vllm_version=version) as second,
        deploy(
            [first.endpoint, second.endpoint],
            Topology(replicas=2, router="precise", port=free_port()),
        ) as running,
    ):
        assert running.state is not None
        return running.state.settings.vllm


@pytest.mark.parametrize(("reported", "hashed"), [("0.29.0+cpu", "0.29"), ("0.32.1", "0.32")])
def test_the_precise_router_hashes_blocks_as_the_version_the_replicas_report(
    reported: str, hashed: str
) -> None:
    assert _precise_hashes(reported) == hashed


def test_the_precise_router_refuses_replicas_of_different_vllm_versions() -> None:
    with (
        FakeVLLM(kv_events=True, vllm_version="0.29.0") as first,
        FakeVLLM(kv_events=True, vllm_version="0.32.0") as second,
        pytest.raises(DeploymentConfigError, match=r"different vLLM versions .*0\.29\.0.*0\.32\.0"),
        deploy(
            [first.endpoint, second.endpoint],
            Topology(replicas=2, router="precise", port=free_port()),
        ),
    ):
        pass


def test_the_precise_router_refuses_a_vllm_version_whose_hash_it_does_not_know() -> None:
    # a replica of a release prefixkit does not reproduce, as far as the router can see
    later = Starlette(
        routes=[
            Route("/version", lambda _: JSONResponse({"version": "0.40.0"})),
            Route("/metrics", lambda _: PlainTextResponse("")),
        ]
    )
    with (
        FakeVLLM(kv_events=True) as first,
        served_in_thread(later, "127.0.0.1", free_port()) as url,
        pytest.raises(DeploymentConfigError, match=r"vLLM 0\.40\.0"),
        deploy(
            [first.endpoint, ReplicaEndpoint(url, kv_events="ipc:///tmp/prefixkit-unused")],
            Topology(replicas=2, router="precise", port=free_port()),
        ),
    ):
        pass
