"""The engine: install vLLM into its own virtualenv, prepare the embedded model,
configure, launch and supervise replicas, and read their cache metrics."""

from prefixkit.sdk import require_extra

require_extra("serve", "prefixkit.engine_adapter.engine", "pydantic", "httpx", "prometheus_client")
