"""The gateway: the serving app's tenant stage, one choke point that every request of a
tenant passes before a router or an engine sees it.

* Key check: every request except ``GET /health`` needs a known API key
  (``Authorization: Bearer KEY`` or ``x-api-key: KEY``), else 401 in OpenAI's error shape
  (`unauthorized`). The key is never forwarded.
* Client salt stripped: a client's ``cache_salt`` is removed from every JSON object body.
* HMAC salt injected: on the generation endpoints (`SALTED_PATHS`) the body gets the
  tenant's own salt, `prefixkit.sdk.tenant_salt(tenant, secret)`, the HMAC of the tenant
  id under the deployment's secret: tenants with identical prompts never share cache
  blocks, and a tenant's own repeated prefix still hits.

`Tenants.tenant_of_request(headers)` is the key check and `Tenants.forwarded(...)` the
body a request is forwarded with; the serving app (`app.serving_app`) and the Ray
gateway (`prefixkit.engine_adapter.ray.gateway`) both apply them. With prefixkit's router
on Ray, `PIN_HEADER` pins a request to one replica (warm-up).

Keys come from a TOML file

    secret = "..."               # optional; else PREFIXKIT_SALT_SECRET
    [tenants]
    acme = "key-acme"            # tenant id = API key, or a list of keys
    globex = ["key-g1", "key-g2"]

and/or ``PREFIXKIT_TENANT_KEYS="acme=key-acme,globex=key-g1"``; the salt secret from the
file or ``PREFIXKIT_SALT_SECRET`` (at least 16 characters). `Tenants.load` reads both.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prefixkit.sdk import tenant_salt
from starlette.responses import Response

from ..errors import GatewayConfigError
from .relay import openai_error

__all__ = [
    "PIN_HEADER",
    "SALTED_PATHS",
    "Tenants",
    "api_key",
    "load_secret",
    "load_tenants",
    "unauthorized",
]

# the generation endpoints: a request there is computed under its tenant's salt
SALTED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses"})
# with prefixkit's router on Ray: ``x-prefixkit-replica: I`` sends a request to the I-th replica
PIN_HEADER = "x-prefixkit-replica"


def load_tenants(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """API key -> tenant id, from the TOML file `path` and ``PREFIXKIT_TENANT_KEYS``."""
    env = os.environ if environ is None else environ
    keys: dict[str, str] = {}
    if path is not None:
        file = Path(path)
        table = _read_toml(file).get("tenants", {})
        if not isinstance(table, dict):
            raise GatewayConfigError(
                f"{path}: `tenants` must be a table of tenant id = API key (or a list of "
                f'keys), e.g.\n[tenants]\nacme = "key-acme"',
                setting="tenants",
                path=file,
            )
        for tenant, value in table.items():
            where = f"{path} [tenants] {tenant}"
            if isinstance(value, str):
                _add_key(keys, tenant, value, where, "tenants", file)
            elif isinstance(value, list):
                for key in value:
                    _add_key(keys, tenant, key, where, "tenants", file)
            else:
                raise GatewayConfigError(
                    f"{where}: give an API key or a list of API keys (strings), "
                    f"got {type(value).__name__}",
                    setting="tenants",
                    tenant=tenant,
                    path=file,
                )
    for item in filter(
        None, (part.strip() for part in env.get("PREFIXKIT_TENANT_KEYS", "").split(","))
    ):
        tenant, sep, key = item.partition("=")
        if not sep:
            raise GatewayConfigError(
                f"PREFIXKIT_TENANT_KEYS item {item!r} is not TENANT=KEY: "
                "write PREFIXKIT_TENANT_KEYS='acme=key1,globex=key2'",
                setting="PREFIXKIT_TENANT_KEYS",
            )
        _add_key(
            keys, tenant.strip(), key.strip(), "PREFIXKIT_TENANT_KEYS", "PREFIXKIT_TENANT_KEYS"
        )
    if not keys:
        raise GatewayConfigError(
            "no tenant API keys: give --tenants FILE (TOML with a [tenants] table) "
            "or set PREFIXKIT_TENANT_KEYS='acme=key1,globex=key2'",
            setting="tenants",
            path=None if path is None else Path(path),
        )
    return keys


def load_secret(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The salt secret: `secret` in the tenants file, else ``PREFIXKIT_SALT_SECRET``."""
    env = os.environ if environ is None else environ
    file = None if path is None else Path(path)
    secret = _read_toml(file).get("secret") if file is not None else None
    if secret is not None and not isinstance(secret, str):
        raise GatewayConfigError(
            f"{path}: `secret` must be a string (in quotes), got {type(secret).__name__}",
            setting="secret",
            path=file,
        )
    secret = secret or env.get("PREFIXKIT_SALT_SECRET")
    if not isinstance(secret, str) or len(secret) < 16:
        raise GatewayConfigError(
            "salt secret missing or shorter than 16 characters: set PREFIXKIT_SALT_SECRET "
            "(or `secret` in the tenants file) to a long random string, the same for every "
            "gateway of this deployment",
            setting="PREFIXKIT_SALT_SECRET",
            path=file,
        )
    return secret


@dataclass(frozen=True)
class Tenants:
    """API key -> tenant id, and the secret the tenants' cache salts are derived from."""

    keys: Mapping[str, str] = field(repr=False)  # secrets: never printed
    secret: str | bytes = field(repr=False)
    _by_digest: dict[bytes, str] = field(init=False, repr=False, compare=False)
    _salts: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise GatewayConfigError(
                "a gateway needs at least one API key -> tenant entry", setting="tenants"
            )
        # keys are looked up by digest, so lookup time does not depend on how much matches
        object.__setattr__(self, "_by_digest", {_digest(k): t for k, t in self.keys.items()})
        object.__setattr__(
            self, "_salts", {t: tenant_salt(t, self.secret) for t in set(self.keys.values())}
        )

    @classmethod
    def load(
        cls, path: str | Path | None = None, environ: Mapping[str, str] | None = None
    ) -> Tenants:
        """Keys and secret from the tenants file and the environment (module docstring)."""
        return cls(load_tenants(path, environ), load_secret(path, environ))

    def tenant_of(self, key: str) -> str | None:
        """The tenant an API key belongs to; None for an unknown or empty key."""
        return self._by_digest.get(_digest(key)) if key else None

    def tenant_of_request(self, headers: Mapping[str, str]) -> str | None:
        """The key check: the tenant of a request's API key (`api_key`); None: refuse it
        (`unauthorized`)."""
        return self.tenant_of(api_key(headers))

    def forwarded(self, method: str, path: str, body: bytes, tenant: str) -> bytes:
        """The body a request of `tenant` is forwarded with: a POST body salted for its
        tenant on a generation path (`SALTED_PATHS`), without a client salt elsewhere;
        any other request's body as it is."""
        if method != "POST" or not body:
            return body
        return self.salted(body, tenant if path in SALTED_PATHS else None)

    def salted(self, body: bytes, tenant: str | None) -> bytes:
        """`body` without a client ``cache_salt``, with `tenant`'s own when given. A body
        that is not a JSON object passes unchanged (the engine answers it)."""
        try:
            payload = json.loads(body)
        except ValueError:
            return body
        if not isinstance(payload, dict):
            return body
        payload.pop("cache_salt", None)
        if tenant is not None:
            payload["cache_salt"] = self._salts[tenant]
        return json.dumps(payload, ensure_ascii=False).encode()


def api_key(headers: Mapping[str, str]) -> str:
    """The API key of a request: ``Authorization: Bearer KEY``, else ``x-api-key``."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "")


def unauthorized() -> Response:
    """The gateway's answer to a request without a known key: 401 in OpenAI's shape."""
    return openai_error(401, "invalid or missing API key", "invalid_api_key")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _read_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise GatewayConfigError(
            f"cannot read tenants file {path}: {error.strerror}", setting="tenants", path=path
        ) from None
    except UnicodeDecodeError:
        raise GatewayConfigError(
            f"tenants file {path} is not UTF-8 text", setting="tenants", path=path
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise GatewayConfigError(
            f"tenants file {path} is not valid TOML: {error}", setting="tenants", path=path
        ) from None


def _add_key(
    keys: dict[str, str],
    tenant: str,
    key: object,
    where: str,
    setting: str,
    path: Path | None = None,
) -> None:
    if not tenant or not isinstance(key, str) or not key:
        raise GatewayConfigError(
            f"{where}: tenant id and API key must be non-empty strings",
            setting=setting,
            tenant=tenant or None,
            path=path,
        )
    if keys.get(key, tenant) != tenant:
        raise GatewayConfigError(
            f"{where}: API key already belongs to tenant {keys[key]!r}: give each tenant its "
            "own key",
            setting=setting,
            tenant=tenant,
            path=path,
        )
    keys[key] = tenant
