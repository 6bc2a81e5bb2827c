"""The gateway's route table: what a tenant may ask of an engine, and the one form of a
request target the gateway accepts.

A tenant may use exactly the routes in `TENANT_ROUTES`; every other route is 404 for a
tenant, whatever the engine serves (default deny). Each route has a use:

* `RouteUse.SALTED`: generation. The body must be a JSON object; it is forwarded with
  the tenant's own ``cache_salt`` (a client's is replaced). Only routes whose request
  schema has ``cache_salt`` in every engine prefixkit runs (vLLM 0.32's API server, Ray
  Serve LLM's ingress) are here: a route that ignored the field would run unsalted.
* `RouteUse.READ_ONLY`: no generation and no prefix cache (tokenizing, the model list);
  a body must still be a JSON object, and a client's ``cache_salt`` is removed.
* `RouteUse.GATEWAY`: answered by the gateway itself, never forwarded (``/health``, a
  tenant's own ``/metrics``; ``/router/state`` for operators only).

Generation routes an engine serves that are not here are refused for tenants: vLLM's
``/v1/chat/completions/batch``, ``/invocations`` (SageMaker), ``/generative_scoring``,
``/v1/systemone``, Ray's ``/v1/embeddings``, ``/v1/score``, ``/v1/audio/transcriptions``.
Operators reach any engine route (`admin_path`), with the admin routes of a dev-mode
engine among them.

`canonical_path` decides on the raw request target, before anything routes on it: a path
of plain segments (letters, digits, ``_``, ``-``) joined by single slashes. Dot segments,
empty segments, percent-encoding of any kind, and an absolute-form target are not
canonical (400): an HTTP client normalises such a path on its way to the engine, so
``/x/../v1/chat/completions`` would reach the engine as ``/v1/chat/completions`` although
the gateway saw another path. The relay sends exactly the canonical path it was given.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

__all__ = [
    "OPERATOR_ROUTES",
    "PUBLIC_ROUTES",
    "TENANT_ROUTES",
    "RouteUse",
    "canonical_path",
    "salted_routes",
]


class RouteUse(enum.Enum):
    """How the gateway treats a route (module docstring)."""

    SALTED = "salted"
    READ_ONLY = "read-only"
    GATEWAY = "gateway"


TENANT_ROUTES: Mapping[tuple[str, str], RouteUse] = {
    ("POST", "/v1/completions"): RouteUse.SALTED,
    ("POST", "/v1/chat/completions"): RouteUse.SALTED,
    ("POST", "/v1/responses"): RouteUse.SALTED,
    ("POST", "/v1/messages"): RouteUse.SALTED,
    ("POST", "/tokenize"): RouteUse.READ_ONLY,
    ("POST", "/detokenize"): RouteUse.READ_ONLY,
    ("POST", "/v1/messages/count_tokens"): RouteUse.READ_ONLY,
    ("GET", "/v1/models"): RouteUse.READ_ONLY,
    ("GET", "/health"): RouteUse.GATEWAY,
    ("GET", "/metrics"): RouteUse.GATEWAY,
}
# routes anyone may call, without a key
PUBLIC_ROUTES: frozenset[tuple[str, str]] = frozenset({("GET", "/health")})
# routes the gateway answers for operators only (besides every engine route)
OPERATOR_ROUTES: Mapping[tuple[str, str], RouteUse] = {
    **TENANT_ROUTES,
    ("GET", "/router/state"): RouteUse.GATEWAY,
}

_CANONICAL = re.compile(rb"(?:/[A-Za-z0-9_-]+)+|/")


def canonical_path(raw_path: bytes) -> str | None:
    """The path of a raw request target when it is in canonical form, else None."""
    if _CANONICAL.fullmatch(raw_path) is None:
        return None
    return raw_path.decode("ascii")


def salted_routes() -> frozenset[str]:
    """The paths a tenant's generation requests take (each salted)."""
    return frozenset(path for (_, path), use in TENANT_ROUTES.items() if use is RouteUse.SALTED)
