"""Who may call the gateway: tenants and operators, by API key, and the salt secret.

    tenants = Tenants.load("tenants.toml")          # and the environment
    tenants.caller_of_request(headers)              # Caller("acme") / Caller("ops", operator=True) / None

A request's API key is ``Authorization: Bearer KEY`` or ``x-api-key: KEY`` (`api_key`);
keys are looked up by digest. A tenant's requests are computed under its own cache salt,
`prefixkit.sdk.tenant_salt(tenant, secret)`, the HMAC of the tenant id under the
deployment's secret: tenants with identical prompts never share cache blocks, and a
tenant's own repeated prefix still hits. An operator reaches the operator routes
(metrics of every tenant, router state, engine admin routes; `gateway`).

Keys come from a TOML file

    secret = "..."               # optional; else PREFIXKIT_SALT_SECRET
    [tenants]
    acme = "key-acme"            # tenant id = API key, or a list of keys
    globex = ["key-g1", "key-g2"]
    [operators]
    ops = "key-ops"              # operator name = API key, or a list of keys

and/or ``PREFIXKIT_TENANT_KEYS="acme=key-acme,globex=key-g1"`` and
``PREFIXKIT_OPERATOR_KEYS="ops=key-ops"``; the salt secret from the file or
``PREFIXKIT_SALT_SECRET`` (at least 16 characters). `Tenants.load` reads them all.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prefixkit.sdk import tenant_salt

from ..errors import GatewayConfigError
from .bodies import admit_body

__all__ = [
    "Caller",
    "Tenants",
    "api_key",
    "load_operators",
    "load_secret",
    "load_tenants",
]


def load_tenants(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """API key -> tenant id, from the TOML file `path` and ``PREFIXKIT_TENANT_KEYS``."""
    keys = _load_keys(path, environ, "tenants", "PREFIXKIT_TENANT_KEYS")
    if not keys:
        raise GatewayConfigError(
            "no tenant API keys: give --tenants FILE (TOML with a [tenants] table) "
            "or set PREFIXKIT_TENANT_KEYS='acme=key1,globex=key2'",
            setting="tenants",
            path=None if path is None else Path(path),
        )
    return keys


def load_operators(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """API key -> operator name, from the ``[operators]`` table of the TOML file `path` and
    ``PREFIXKIT_OPERATOR_KEYS`` (none is fine: then nobody reaches the operator routes)."""
    return _load_keys(path, environ, "operators", "PREFIXKIT_OPERATOR_KEYS")


_NAMED = {"tenants": "tenant id", "operators": "operator name"}


def _load_keys(
    path: str | Path | None, environ: Mapping[str, str] | None, table_name: str, variable: str
) -> dict[str, str]:
    env = os.environ if environ is None else environ
    keys: dict[str, str] = {}
    if path is not None:
        file = Path(path)
        table = _read_toml(file).get(table_name, {})
        if not isinstance(table, dict):
            raise GatewayConfigError(
                f"{path}: `{table_name}` must be a table of {_NAMED[table_name]} = API key (or "
                f'a list of keys), e.g.\n[{table_name}]\nacme = "key-acme"',
                setting=table_name,
                path=file,
            )
        for name, value in table.items():
            where = f"{path} [{table_name}] {name}"
            if isinstance(value, str):
                _add_key(keys, name, value, where, table_name, file)
            elif isinstance(value, list):
                for key in value:
                    _add_key(keys, name, key, where, table_name, file)
            else:
                raise GatewayConfigError(
                    f"{where}: give an API key or a list of API keys (strings), "
                    f"got {type(value).__name__}",
                    setting=table_name,
                    tenant=name,
                    path=file,
                )
    for item in filter(None, (part.strip() for part in env.get(variable, "").split(","))):
        name, sep, key = item.partition("=")
        if not sep:
            who = "TENANT" if table_name == "tenants" else "OPERATOR"
            raise GatewayConfigError(
                f"{variable} item {item!r} is not {who}=KEY: write "
                f"{variable}='acme=key1,globex=key2'",
                setting=variable,
            )
        _add_key(keys, name.strip(), key.strip(), variable, variable)
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
class Caller:
    """Who sent a request: a tenant (its id) or an operator (its name)."""

    name: str
    operator: bool = False


@dataclass(frozen=True)
class Tenants:
    """API key -> tenant id, API key -> operator name, and the secret the tenants' cache
    salts are derived from."""

    keys: Mapping[str, str] = field(repr=False)  # secrets: never printed
    secret: str | bytes = field(repr=False)
    operators: Mapping[str, str] = field(default_factory=dict, repr=False)
    _by_digest: dict[bytes, Caller] = field(init=False, repr=False, compare=False)
    _salts: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise GatewayConfigError(
                "a gateway needs at least one API key -> tenant entry", setting="tenants"
            )
        shared = set(self.keys) & set(self.operators)
        if shared:
            raise GatewayConfigError(
                f"an API key belongs to tenant {self.keys[min(shared)]!r} and to an operator: "
                "give operators keys of their own",
                setting="operators",
                tenant=self.keys[min(shared)],
            )
        # keys are looked up by digest, so lookup time does not depend on how much matches
        callers = {_digest(k): Caller(t) for k, t in self.keys.items()}
        callers.update({_digest(k): Caller(o, operator=True) for k, o in self.operators.items()})
        object.__setattr__(self, "_by_digest", callers)
        object.__setattr__(
            self, "_salts", {t: tenant_salt(t, self.secret) for t in set(self.keys.values())}
        )

    @classmethod
    def load(
        cls, path: str | Path | None = None, environ: Mapping[str, str] | None = None
    ) -> Tenants:
        """Keys and secret from the tenants file and the environment (module docstring)."""
        return cls(
            load_tenants(path, environ), load_secret(path, environ), load_operators(path, environ)
        )

    @property
    def tenant_ids(self) -> list[str]:
        """Every tenant, sorted."""
        return sorted(self._salts)

    def caller_of(self, key: str) -> Caller | None:
        """The tenant or operator an API key belongs to; None for an unknown or empty key."""
        return self._by_digest.get(_digest(key)) if key else None

    def caller_of_request(self, headers: Mapping[str, str]) -> Caller | None:
        """The key check: who sent a request (its API key, `api_key`); None: refuse it
        (`unauthorized`)."""
        return self.caller_of(api_key(headers))

    def tenant_of_request(self, headers: Mapping[str, str]) -> str | None:
        """The tenant of a request's API key; None for an unknown, missing or operator key."""
        return self.tenant_of(api_key(headers))

    def tenant_of(self, key: str) -> str | None:
        """The tenant an API key belongs to; None for an unknown, empty or operator key."""
        caller = self.caller_of(key)
        return None if caller is None or caller.operator else caller.name

    def salt_of(self, tenant: str) -> str:
        """The cache salt of `tenant`'s requests (KeyError for an unknown tenant)."""
        return self._salts[tenant]

    def operator_key(self) -> str | None:
        """An operator's API key (the first in order), for tools such as warm-up."""
        return min(self.operators, default=None)

    def salted(self, body: bytes, tenant: str | None) -> bytes:
        """`body` (a JSON object) without a client ``cache_salt``, with `tenant`'s own when
        given: what the gateway forwards for a generation request sent to it, for a
        request sent straight to a replica (warm-up). Raises `Refused` for a body
        the gateway would refuse."""
        fields = {} if tenant is None else {"cache_salt": self._salts[tenant]}
        admitted = admit_body(
            body, content_type="application/json", content_encoding="", fields=fields
        )
        return admitted.body


def api_key(headers: Mapping[str, str]) -> str:
    """The API key of a request: ``Authorization: Bearer KEY``, else ``x-api-key``."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "")


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
