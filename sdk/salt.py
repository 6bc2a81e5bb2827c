"""Per-tenant cache salts: tenants with identical prompts never share cache blocks."""

from __future__ import annotations

import hashlib
import hmac

from .errors import SaltError

__all__ = ["tenant_salt"]


def tenant_salt(tenant_id: str, secret: str | bytes) -> str:
    """HMAC-SHA256 of `tenant_id` keyed by `secret`, as 64 hex characters.

    The raw tenant id never appears in a request, and the salt is never empty
    (vLLM rejects `cache_salt: ""` with HTTP 400).
    """
    if not tenant_id:
        raise SaltError("tenant id is empty: give each tenant a stable, non-empty id")
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    if not key:
        raise SaltError(
            "salt secret is empty: set a long random secret (e.g. PREFIXKIT_SALT_SECRET) "
            "shared by every process that salts requests"
        )
    return hmac.new(key, tenant_id.encode("utf-8"), hashlib.sha256).hexdigest()
