"""Per-tenant cache salts: tenants with identical prompts never share cache blocks.

The salt is HMAC-SHA256 of the tenant id keyed by a secret shared by every
process that salts requests (the SDK and `prefixkit serve`'s gateway derive it
the same way). Without an explicit secret the key is read from the
`PREFIXKIT_SALT_SECRET` environment variable, as the gateway does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping

from .errors import SaltError

__all__ = ["SALT_SECRET_VARIABLE", "salt_secret", "tenant_salt"]

SALT_SECRET_VARIABLE = "PREFIXKIT_SALT_SECRET"
"""The environment variable read when no salt secret is given."""


def salt_secret(
    secret: str | bytes | None = None, environ: Mapping[str, str] | None = None
) -> bytes:
    """The salt key: `secret`, else `PREFIXKIT_SALT_SECRET` from `environ` (default os.environ).

    Raises `SaltError` when the secret is empty, or when none is given and the
    variable is unset or empty.
    """
    if secret is None:
        env = os.environ if environ is None else environ
        from_env = env.get(SALT_SECRET_VARIABLE, "")
        if not from_env:
            raise SaltError(
                f"no salt secret: pass salt_secret=... or set {SALT_SECRET_VARIABLE} to a long "
                "random secret shared by every process that salts requests (the gateway of "
                "prefixkit serve reads the same variable)",
                empty="secret",
            )
        return from_env.encode("utf-8")
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    if not key:
        raise SaltError(
            "salt secret is empty: give a long random secret shared by every process that "
            f"salts requests, or give none and set {SALT_SECRET_VARIABLE}",
            empty="secret",
        )
    return key


def tenant_salt(
    tenant_id: str, secret: str | bytes | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """HMAC-SHA256 of `tenant_id` keyed by `salt_secret(secret, environ)`, as 64 hex characters.

    The raw tenant id never appears in a request, and the salt is never empty
    (vLLM rejects `cache_salt: ""` with HTTP 400).
    """
    if not tenant_id:
        raise SaltError(
            "tenant id is empty: give each tenant a stable, non-empty id", empty="tenant"
        )
    key = salt_secret(secret, environ)
    return hmac.new(key, tenant_id.encode("utf-8"), hashlib.sha256).hexdigest()
