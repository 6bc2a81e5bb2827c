"""The Ray backend's gateway middleware applies the serving app's gateway stage (no Ray
needed: the middleware runs here in front of an app that echoes what reached it)."""

from __future__ import annotations

import json

from prefixkit.engine_adapter import Tenants
from prefixkit.engine_adapter.ray.gateway import TenantGateway
from prefixkit.engine_adapter.serving.gateway import PIN_FIELD, PIN_HEADER
from prefixkit.sdk import tenant_salt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

SECRET = "ray-gateway-test-secret-0123"
ACME = {"Authorization": "Bearer key-acme"}
OPS = {"Authorization": "Bearer key-ops"}


async def echo(request: Request) -> JSONResponse:
    return JSONResponse(json.loads(await request.body() or b"null"))


def client() -> TestClient:
    app = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])
    tenants = Tenants({"key-acme": "acme"}, SECRET, {"key-ops": "ops"})
    return TestClient(TenantGateway(app, lambda: tenants))


def test_a_request_without_a_known_key_gets_401_in_openais_shape() -> None:
    response = client().post("/v1/completions", json={"prompt": "hi"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_a_generation_request_reaches_the_engine_with_its_tenants_salt() -> None:
    body = {"prompt": "hi", "cache_salt": "forged"}
    response = client().post("/v1/completions", json=body, headers=ACME)
    assert response.json()["cache_salt"] == tenant_salt("acme", SECRET)


def test_another_path_reaches_the_engine_without_a_salt() -> None:
    response = client().post("/tokenize", json={"prompt": "hi", "cache_salt": "x"}, headers=ACME)
    assert response.json() == {"prompt": "hi"}


def test_an_operators_pin_header_travels_in_the_body_of_a_generation_request() -> None:
    headers = {**OPS, PIN_HEADER: "1", "x-prefixkit-tenant": "acme"}
    response = client().post("/v1/chat/completions", json={"messages": []}, headers=headers)
    assert response.json()[PIN_FIELD] == 1
    assert response.json()["cache_salt"] == tenant_salt("acme", SECRET)


def test_a_tenant_can_pin_nothing_by_header_or_by_body() -> None:
    headers = {**ACME, PIN_HEADER: "1"}
    body = {"messages": [], PIN_FIELD: 0}
    response = client().post("/v1/chat/completions", json=body, headers=headers)
    assert PIN_FIELD not in response.json()


def test_a_route_outside_the_tenant_table_is_404_for_a_tenant() -> None:
    response = client().post("/v1/embeddings", json={"input": "hi"}, headers=ACME)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_tenants_request_id_header_does_not_reach_the_ingress() -> None:
    # vLLM aborts every request named after an x-request-id when one's client hangs up
    app = Starlette(
        routes=[Route("/{path:path}", lambda r: JSONResponse(dict(r.headers)), methods=["POST"])]
    )
    tenants = Tenants({"key-acme": "acme"}, SECRET, {"key-ops": "ops"})
    gateway = TestClient(TenantGateway(app, lambda: tenants))
    headers = {**ACME, "x-request-id": "chat-1", "traceparent": "00-ab-cd-01"}
    reached = gateway.post("/v1/chat/completions", json={"messages": []}, headers=headers).json()
    assert "x-request-id" not in reached
    assert reached["traceparent"] == "00-ab-cd-01"


def test_a_tenants_generation_request_is_named_by_the_gateway_not_the_tenant() -> None:
    # Ray Serve LLM names the engine's request after the body's request_id, else after
    # the x-request-id Ray's proxy read: each tenant request gets a name of its own
    gateway = client()
    headers = {**ACME, "x-request-id": "chat-1"}
    names = [
        gateway.post(
            "/v1/chat/completions", json={"messages": [], "request_id": "chat-1"}, headers=headers
        ).json()["request_id"]
        for _ in range(2)
    ]
    assert names[0] != names[1]
    assert all(name.startswith("prefixkit-") for name in names)
    operator = gateway.post(
        "/v1/chat/completions", json={"messages": [], "request_id": "warm-1"}, headers=OPS
    )
    assert operator.json()["request_id"] == "warm-1"
