"""Serving: the tenant gateway and routing stages in one ASGI app, the HTTP relay to the
engines, SMG, and the deployment of replicas -> router -> gateway."""
