"""The gateway: the one choke point every request passes before a router or an engine sees
it. `admit` decides, from the method, the raw request target and the headers alone: answer
it here, forward it (salted, read-only, or an operator's engine route), or refuse it.

1. A request framed both by length and by chunks is 400 (a proxy in front may have
   framed it the other way). ``GET /health`` is public; every other request needs a
   known API key (`Tenants`), else 401.
2. The raw request target must be in canonical form (`routes.canonical_path`), else 400:
   the relay sends exactly the path admitted, so what the engine runs is what was checked.
3. A tenant may use the routes of `routes.TENANT_ROUTES` and nothing else (404): a
   generation route is salted with the tenant's own salt, so a request the engine could
   run as generation carries that salt or never reaches the engine. A tenant's
   `TENANT_HEADER` and `PIN_HEADER` are ignored and never forwarded, its body's pin
   field and ``cache_salt`` removed (`bodies.admit_body`).
4. An operator (an ``[operators]`` key) reaches every route, the engine's admin routes
   among them; on a generation route it names the tenant whose salt to use with
   `TENANT_HEADER` (warm-up), or runs unsalted, in a namespace no tenant shares; it may
   pin a request to a replica with `PIN_HEADER`.

A deployment without tenants (no gateway stage) admits every canonical request as an
operator's, without salts: nothing is isolated there.

Every refusal is a `refused.Refused`, answered in OpenAI's error shape, closing the connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Scope

from .refused import Refused
from .routes import OPERATOR_ROUTES, PUBLIC_ROUTES, TENANT_ROUTES, RouteUse, canonical_path
from .tenants import Caller, Tenants

__all__ = [
    "OPERATOR_STRIPPED_FIELDS",
    "PIN_FIELD",
    "PIN_HEADER",
    "TENANT_HEADER",
    "TENANT_STRIPPED_FIELDS",
    "Admitted",
    "admit",
    "admit_scope",
    "body_admission",
    "unauthorized",
]

# an operator's ``x-prefixkit-replica: I`` sends a request to the I-th replica
PIN_HEADER = "x-prefixkit-replica"
# ... and travels in the body under this field to Ray's request router
PIN_FIELD = "prefixkit_replica"
# an operator's ``x-prefixkit-tenant: acme``: the request is computed under acme's salt
TENANT_HEADER = "x-prefixkit-tenant"
# body fields a tenant's request loses: the salt and the pin are the gateway's; the KV
# and encoder-cache transfer parameters, the request id and the scheduling priority steer
# the engine beyond the tenant's own request (KV connectors, other requests, the queue)
TENANT_STRIPPED_FIELDS = (
    "cache_salt",
    PIN_FIELD,
    "kv_transfer_params",
    "ec_transfer_params",
    "request_id",
    "priority",
)
# ... and an operator's: its salt comes from `TENANT_HEADER`, its pin from `PIN_HEADER`
OPERATOR_STRIPPED_FIELDS = ("cache_salt", PIN_FIELD)


@dataclass(frozen=True)
class Admitted:
    """A request the gateway lets through.

    `path`: the canonical path, sent as it is; `use`: how its route is treated (None: an
    operator's engine route, forwarded as it is); `caller`: who sent it (None: a public
    route, or a deployment without tenants); `tenant`: whose salt and numbers it is;
    `salt`: the ``cache_salt`` its body gets (None: none, a client's is removed, unless
    there is no gateway stage); `pin`: the replica an operator pinned it to."""

    method: str
    path: str
    use: RouteUse | None
    caller: Caller | None = None
    tenant: str | None = None
    salt: str | None = None
    pin: int | None = None

    @property
    def limited_tenant(self) -> str | None:
        """The tenant whose requests in flight this one counts against (None for an
        operator's request and for a deployment without tenants)."""
        return None if self.caller is None or self.caller.operator else self.tenant

    @property
    def stripped(self) -> tuple[str, ...]:
        """The body fields removed before the body is forwarded."""
        if self.caller is None:
            return ()
        return OPERATOR_STRIPPED_FIELDS if self.caller.operator else TENANT_STRIPPED_FIELDS

    @property
    def gated(self) -> bool:
        """Whether the body passes the gateway's checks (a tenant's, or an operator's on a
        route of the table); an operator's engine route and a deployment without tenants
        forward bodies as they are."""
        return self.caller is not None and (not self.caller.operator or self.use is not None)


def admit(
    method: str, raw_path: bytes, headers: Mapping[str, str], tenants: Tenants | None
) -> Admitted | Refused:
    """The gateway's decision for one request (module docstring)."""
    if "content-length" in headers and "transfer-encoding" in headers:
        return Refused(
            400,
            "the request has both Content-Length and Transfer-Encoding: frame its body one way",
            "invalid_request_error",
        )
    path = canonical_path(raw_path)
    if path is not None and (method, path) in PUBLIC_ROUTES:
        return Admitted(method, path, RouteUse.GATEWAY)
    caller = None if tenants is None else tenants.caller_of_request(headers)
    if tenants is not None and caller is None:
        return _UNAUTHORIZED
    if path is None:
        return Refused(
            400,
            f"request target {raw_path[:200].decode('ascii', 'replace')!r} is not in "
            "canonical form: send the plain path (no '.' or '..' segments, no empty "
            "segments, no percent-encoding)",
            "invalid_request_error",
        )
    if tenants is None or caller is None or caller.operator:
        return _operators(method, path, headers, tenants, caller)
    use = TENANT_ROUTES.get((method, path))
    if use is None:
        return Refused(404, f"{method} {path} is not a route of this API", "not_found")
    salt = tenants.salt_of(caller.name) if use is RouteUse.SALTED else None
    return Admitted(method, path, use, caller, caller.name, salt)


def admit_scope(scope: Scope, tenants: Tenants | None) -> tuple[Headers, Admitted | Refused]:
    """`admit` for an ASGI request: its headers, and the decision on its raw target."""
    headers = Headers(scope=scope)
    raw_path = scope.get("raw_path") or scope["path"].encode()
    return headers, admit(scope["method"], raw_path, headers, tenants)


def body_admission(
    decision: Admitted, headers: Mapping[str, str], max_depth: int, *, pin_in_body: bool = False
) -> dict[str, Any]:
    """The options of `bodies.admit_body` for an admitted request: its content type and
    encoding, the fields it loses, and those it gets (the salt; with `pin_in_body`, an
    operator's pin as `PIN_FIELD`, for Ray's request router)."""
    fields: dict[str, object] = {}
    if decision.salt is not None:
        fields["cache_salt"] = decision.salt
    if pin_in_body and decision.pin is not None:
        fields[PIN_FIELD] = decision.pin
    return {
        "content_type": headers.get("content-type", ""),
        "content_encoding": headers.get("content-encoding", ""),
        "fields": fields,
        "strip": decision.stripped,
        "max_depth": max_depth,
    }


def _operators(
    method: str,
    path: str,
    headers: Mapping[str, str],
    tenants: Tenants | None,
    caller: Caller | None,
) -> Admitted | Refused:
    use = OPERATOR_ROUTES.get((method, path))
    tenant = headers.get(TENANT_HEADER)
    salt = None
    if tenant is not None:
        if tenants is None or tenant not in tenants.tenant_ids:
            known = ", ".join(tenants.tenant_ids) if tenants is not None else "none"
            return Refused(
                400,
                f"{TENANT_HEADER}: unknown tenant {tenant[:100]!r} (tenants: {known})",
                "invalid_request_error",
                TENANT_HEADER,
            )
        if use is RouteUse.SALTED:
            salt = tenants.salt_of(tenant)
    pin = None
    if (pinned := headers.get(PIN_HEADER)) is not None:
        if not pinned.isascii() or not pinned.isdigit():
            return Refused(
                400,
                f"{PIN_HEADER} must be a replica index (0, 1, ...), got {pinned[:100]!r}",
                "invalid_request_error",
                PIN_HEADER,
            )
        pin = int(pinned)
    return Admitted(method, path, use, caller, tenant, salt, pin)


_UNAUTHORIZED = Refused(401, "invalid or missing API key", "invalid_api_key")


def unauthorized() -> Response:
    """The gateway's answer to a request without a known key: 401 in OpenAI's shape."""
    return _UNAUTHORIZED.response()
