"""The tenant gateway: authenticate by API key, enforce the tenant's cache salt, proxy to vLLM.

    app = create_gateway("http://127.0.0.1:18000", {"key-acme": "acme"}, secret="s3cret")
    served(app, "127.0.0.1", 18090).run()  # from prefixkit.engine_adapter.serving.keepalive

An ASGI app (starlette) in front of one replica or of the router. Every request except
`GET /health` needs a known key (`Authorization: Bearer KEY` or `x-api-key: KEY`); an
unknown or missing key gets 401 in OpenAI's error shape. For a JSON object body, any
client-supplied `cache_salt` is removed, and on the generation endpoints (`/v1/completions`,
`/v1/chat/completions`, `/v1/responses`) `cache_salt` is set to
`prefixkit.sdk.tenant_salt(tenant, secret)`: tenants with identical prompts never share
cache blocks, and a tenant's own repeated prefix still hits. Everything else is forwarded
as is (the API key is not), and responses, streaming ones included, are relayed chunk by
chunk as they arrive (httpx async streaming), never buffered whole.

Keys come from `load_tenants(path, environ)`: a TOML file

    secret = "..."               # optional; else PREFIXKIT_SALT_SECRET
    [tenants]
    acme = "key-acme"            # tenant id = API key, or a list of keys
    globex = ["key-g1", "key-g2"]

and/or `PREFIXKIT_TENANT_KEYS="acme=key-acme,globex=key-g1"`; the salt secret from the file
or `PREFIXKIT_SALT_SECRET` (`load_secret`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tomllib
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import httpx
from prefixkit.sdk import tenant_salt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import GatewayConfigError
from .keepalive import UPSTREAM_IDLE_S, served

__all__ = [
    "SALTED_PATHS",
    "create_gateway",
    "gateway_in_thread",
    "load_secret",
    "load_tenants",
]

SALTED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses"})
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = _HOP_BY_HOP | {"host", "authorization", "x-api-key", "content-length"}
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def load_tenants(
    path: Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """API key -> tenant id, from the TOML file `path` and `PREFIXKIT_TENANT_KEYS`."""
    env = os.environ if environ is None else environ
    keys: dict[str, str] = {}
    if path is not None:
        for tenant, value in _read_toml(path).get("tenants", {}).items():
            for key in [value] if isinstance(value, str) else value:
                _add_key(keys, tenant, key, f"{path} [tenants] {tenant}")
    for item in filter(
        None, (part.strip() for part in env.get("PREFIXKIT_TENANT_KEYS", "").split(","))
    ):
        tenant, sep, key = item.partition("=")
        if not sep:
            raise GatewayConfigError(
                f"PREFIXKIT_TENANT_KEYS item {item!r} is not TENANT=KEY: "
                "write PREFIXKIT_TENANT_KEYS='acme=key1,globex=key2'"
            )
        _add_key(keys, tenant.strip(), key.strip(), "PREFIXKIT_TENANT_KEYS")
    if not keys:
        raise GatewayConfigError(
            "no tenant API keys: give --tenants FILE (TOML with a [tenants] table) "
            "or set PREFIXKIT_TENANT_KEYS='acme=key1,globex=key2'"
        )
    return keys


def load_secret(path: Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The salt secret: `secret` in the tenants file, else `PREFIXKIT_SALT_SECRET`."""
    env = os.environ if environ is None else environ
    secret = _read_toml(path).get("secret") if path is not None else None
    secret = secret or env.get("PREFIXKIT_SALT_SECRET")
    if not isinstance(secret, str) or len(secret) < 16:
        raise GatewayConfigError(
            "salt secret missing or shorter than 16 characters: set PREFIXKIT_SALT_SECRET "
            "(or `secret` in the tenants file) to a long random string, the same for every "
            "gateway of this deployment"
        )
    return secret


def create_gateway(
    upstream_url: str,
    tenants: Mapping[str, str],
    secret: str | bytes,
    *,
    connect_timeout: float = 10.0,
) -> Starlette:
    """The ASGI app; `tenants` maps API key -> tenant id (see the module docstring)."""
    if not tenants:
        raise GatewayConfigError("create_gateway needs at least one API key -> tenant entry")
    by_digest = {_digest(key): tenant for key, tenant in tenants.items()}
    salts = {tenant: tenant_salt(tenant, secret) for tenant in set(tenants.values())}
    upstream = upstream_url.rstrip("/")
    clients: list[httpx.AsyncClient] = []

    def client() -> httpx.AsyncClient:
        if not clients:
            clients.append(
                httpx.AsyncClient(
                    timeout=httpx.Timeout(
                        connect=connect_timeout, read=None, write=60.0, pool=None
                    ),
                    limits=httpx.Limits(
                        max_connections=None,
                        max_keepalive_connections=64,
                        keepalive_expiry=UPSTREAM_IDLE_S,
                    ),
                )
            )
        return clients[0]

    async def health(request: Request) -> Response:
        return await _forward(client(), request, upstream, body=await request.body())

    async def proxy(request: Request) -> Response:
        tenant = by_digest.get(_digest(_api_key(request)))
        if tenant is None:
            return _error(401, "invalid or missing API key", "invalid_api_key")
        body = await request.body()
        if body and request.method == "POST":
            body = _with_salt(body, salts[tenant] if request.url.path in SALTED_PATHS else None)
        return await _forward(client(), request, upstream, body=body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for open_client in clients:
            await open_client.aclose()
        clients.clear()

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/{path:path}", proxy, methods=_METHODS),
        ],
        lifespan=lifespan,
    )


@contextlib.contextmanager
def gateway_in_thread(
    upstream_url: str,
    tenants: Mapping[str, str],
    secret: str | bytes,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> Iterator[str]:
    """Run the gateway with uvicorn in a background thread; yields its base URL."""
    import threading
    import time

    server = served(create_gateway(upstream_url, tenants, secret), host, port)
    thread = threading.Thread(target=server.run, name="prefixkit-gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30.0
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise GatewayConfigError(
                f"gateway did not start on {host}:{port} (port in use?): choose another port"
            )
        time.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)


def _with_salt(body: bytes, salt: str | None) -> bytes:
    """Drop any client `cache_salt`; set `salt` when given. Non-object bodies pass unchanged."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body
    if not isinstance(payload, dict):
        return body
    payload.pop("cache_salt", None)
    if salt is not None:
        payload["cache_salt"] = salt
    return json.dumps(payload, ensure_ascii=False).encode()


async def _forward(
    client: httpx.AsyncClient, request: Request, upstream: str, body: bytes
) -> Response:
    url = upstream + request.url.path
    if request.url.query:
        url += "?" + request.url.query
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED]
    outgoing = client.build_request(request.method, url, headers=headers, content=body)
    try:
        response = await client.send(outgoing, stream=True)
    except httpx.HTTPError as error:
        return _error(502, f"upstream {upstream} unreachable: {error!r}", "upstream_error")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()

    return StreamingResponse(
        relay(),
        status_code=response.status_code,
        headers={k: v for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP},
    )


def _api_key(request: Request) -> str:
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "")


def _digest(key: str) -> bytes:
    # look keys up by digest so lookup time does not depend on how much of a key matches
    return hashlib.sha256(key.encode()).digest()


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": code, "code": code, "param": None}},
        status_code=status,
    )


def _read_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text())
    except OSError as error:
        raise GatewayConfigError(f"cannot read tenants file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise GatewayConfigError(f"tenants file {path} is not valid TOML: {error}") from None


def _add_key(keys: dict[str, str], tenant: str, key: object, where: str) -> None:
    if not tenant or not isinstance(key, str) or not key:
        raise GatewayConfigError(f"{where}: tenant id and API key must be non-empty strings")
    if keys.get(key, tenant) != tenant:
        raise GatewayConfigError(
            f"{where}: API key already belongs to tenant {keys[key]!r}: give each tenant its own key"
        )
    keys[key] = tenant
