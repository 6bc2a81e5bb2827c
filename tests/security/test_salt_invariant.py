"""The invariant of tenant isolation, tried as a hostile tenant would: a request the engine
could run as generation carries the tenant's own salt, or never reaches the engine.

Requests go on the wire as given (raw sockets) to a real deployment: the serving app on
uvicorn in front of a fake vLLM 0.32 replica in dev mode (every route vLLM can serve). The
oracle reads what reached the replica, matched against the committed snapshot of the real
engine's routes (`engine_routes`); the Ray backend's gateway middleware is held to the same
invariant against Ray Serve LLM's routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter import Deployment, Tenants, Topology, deploy
from prefixkit.engine_adapter.ray.gateway import TenantGateway
from prefixkit.sdk import tenant_salt
from prefixkit.testing.fake_vllm import FakeVLLM, free_port
from starlette.types import Message, Receive, Scope, Send

from .engine_routes import (
    RAY_VLLM_0_29,
    VLLM_0_32,
    could_generate,
    engine_routes,
    generation_routes,
)
from .raw_http import raw_request

SECRET = "hostile-tenant-secret-0123456789"
TENANTS = Tenants({"key-acme": "acme", "key-globex": "globex"}, SECRET, {"key-ops": "ops"})
SALTS = {tenant: tenant_salt(tenant, SECRET) for tenant in ("acme", "globex")}

SEGMENTS = sorted(
    {part for route in engine_routes(VLLM_0_32) for part in route.template.split("/") if part}
    | {part for route in engine_routes(RAY_VLLM_0_29) for part in route.template.split("/")}
)
TRICKS = [".", "..", "", "%2e", "%2E%2e", ".%2e", "%2f", "%2F", "%252e", "%00", ";", "x"]
WHOLE_ROUTES = sorted(
    {r.template.replace("{response_id}", "resp_1") for r in engine_routes(VLLM_0_32)}
)
GENERATION_ROUTES = [
    route.replace("{response_id}", "resp_1")
    for route in generation_routes(VLLM_0_32) + generation_routes(RAY_VLLM_0_29)
]


def _targets() -> st.SearchStrategy[bytes]:
    segment = st.one_of(
        st.sampled_from(SEGMENTS),
        st.sampled_from(TRICKS),
        st.text("abcdefghijklmnopqrstuvwxyz.%/_-0123456789", max_size=6),
    )
    built = st.lists(segment, min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts))
    mutated = st.tuples(
        st.sampled_from(["", "/", "//", "///", "/.", "/x/..", "/%2e/", "http://engine"]),
        st.sampled_from(GENERATION_ROUTES),
        st.sampled_from(["", "/", "/.", "/..", "%2f", "?x=1", "/%2e", "#x"]),
    ).map(lambda parts: "".join(parts))
    exact = st.sampled_from(WHOLE_ROUTES)
    generation = st.sampled_from(GENERATION_ROUTES)
    return st.one_of(generation, generation, exact, mutated, built).map(str.encode)


def _bodies() -> st.SearchStrategy[bytes]:
    salt = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.just(["a"]))
    request = st.fixed_dictionaries(
        {"model": st.just("fake-model")},
        optional={
            "prompt": st.text(max_size=40),
            "messages": st.just([{"role": "user", "content": "hi " * 40}]),
            "cache_salt": salt,
            "prefixkit_replica": st.integers(0, 3),
        },
    ).map(lambda body: json.dumps(body).encode())
    duplicated = st.text("abc", max_size=6).map(
        lambda salt: (
            b'{"model":"fake-model","prompt":"hi","cache_salt":"%s","cache_salt":"%s"}'
            % (salt.encode(), salt.encode())
        )
    )
    odd = st.sampled_from(
        [
            b"",
            b"[1, 2]",
            b'"text"',
            b"null",
            b"{",
            b'{"a": "\\ud800"}',
            b'{"model":"fake-model","prompt":"hi","cache\\u005fsalt":"mine"} \n',
            b'{"model":"fake-model","prompt":"hi"}\r\n\t ',
            b"{}",
        ]
    )
    return st.one_of(request, request, request, duplicated, odd, st.binary(max_size=30))


def _headers() -> st.SearchStrategy[list[tuple[str, str]]]:
    extra = st.lists(
        st.sampled_from(
            [
                ("Content-Type", "text/plain"),
                ("Content-Encoding", "gzip"),
                ("x-prefixkit-replica", "0"),
                ("x-prefixkit-tenant", "globex"),
                ("x-prefixkit-tenant", "acme"),
                ("x-api-key", "key-ops"),
            ]
        ),
        max_size=3,
        unique=True,
    )
    json_body = [("Content-Type", "application/json")]
    return st.one_of(extra.map(lambda more: json_body + more), extra)


@pytest.fixture(scope="module")
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM(dev_mode=True) as replica:
        yield replica


@pytest.fixture(scope="module")
def gateway(replica: FakeVLLM) -> Iterator[Deployment]:
    with deploy([replica.endpoint], Topology(port=free_port()), tenants=TENANTS) as running:
        yield running


def _salts_of(body: bytes) -> list[object]:
    """Every value the body gives ``cache_salt`` at its top, in order: one value is the salt
    to any JSON parser, whichever of duplicated keys it keeps."""
    objects: list[list[tuple[str, object]]] = []

    def kept(pairs: list[tuple[str, object]]) -> dict[str, object]:
        objects.append(pairs)
        return dict(pairs)

    try:
        payload = json.loads(body, object_pairs_hook=kept)
    except ValueError:
        return []
    if not isinstance(payload, dict):
        return []
    return [value for key, value in objects[-1] if key == "cache_salt"]


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE", "PATCH"]),
    target=_targets(),
    headers=_headers(),
    body=_bodies(),
    tenant=st.sampled_from(["acme", "globex"]),
)
def test_generation_reaches_the_engine_only_under_the_tenants_salt(
    replica: FakeVLLM,
    gateway: Deployment,
    method: str,
    target: bytes,
    headers: list[tuple[str, str]],
    body: bytes,
    tenant: str,
) -> None:
    key = [("Authorization", f"Bearer key-{tenant}")]
    before = len(replica.requests)
    raw_request(gateway.url, method, target, key + headers, body)
    for received in replica.requests[before:]:
        if could_generate(VLLM_0_32, received.method, received.path):
            assert _salts_of(received.body) == [SALTS[tenant]], (target, received)


@settings(max_examples=400, deadline=None)
@given(
    method=st.sampled_from(["POST", "POST", "GET", "PUT"]),
    target=_targets(),
    headers=_headers(),
    body=_bodies(),
    tenant=st.sampled_from(["acme", "globex"]),
)
def test_the_ray_gateway_holds_the_same_invariant(
    method: str, target: bytes, headers: list[tuple[str, str]], body: bytes, tenant: str
) -> None:
    reached: list[tuple[str, str, bytes]] = []

    async def ingress(scope: Scope, receive: Receive, send: Send) -> None:
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        # Ray's ingress routes on the decoded path, as any Starlette app
        reached.append((str(scope["method"]), str(scope["path"]), b"".join(chunks)))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    raw_path, _, query = target.partition(b"?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote_to_bytes(raw_path).decode("latin-1"),
        "raw_path": raw_path,
        "query_string": query,
        "headers": [
            (b"authorization", f"Bearer key-{tenant}".encode()),
            *((k.lower().encode(), v.encode()) for k, v in headers),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        return None

    asyncio.run(TenantGateway(ingress, lambda: TENANTS)(scope, receive, send))
    for got_method, path, got_body in reached:
        if could_generate(RAY_VLLM_0_29, got_method, path) or could_generate(
            VLLM_0_32, got_method, path
        ):
            assert _salts_of(got_body) == [SALTS[tenant]], (target, path)
