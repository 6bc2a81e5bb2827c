"""prefixkit.engine_adapter: self-hosted vLLM with prefix caching, tenant salts, routing."""

from .compiled import check_build

check_build()
