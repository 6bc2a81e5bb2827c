"""Serving: the tenant gateway and routing stages in one ASGI app, the HTTP relay to the
engines, SMG, and the deployment of replicas -> router -> gateway."""

from prefixkit.sdk import require_extra

require_extra("serve", "prefixkit.engine_adapter.serving", "anyio", "httpx", "starlette")
