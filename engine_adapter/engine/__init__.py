"""The engine: install vLLM into its own virtualenv, prepare the embedded model,
configure, launch and supervise replicas, and read their cache metrics."""
