"""prefixkit.engine_adapter: self-hosted vLLM with prefix caching, tenant salts, routing."""
