"""prefixkit.engine_adapter: self-hosted vLLM with prefix caching, tenant salts and routing.

One subpackage per subsystem:

* `engine`: install the vLLM engine, prepare the embedded model, configure, launch and
  supervise replicas, read their cache metrics;
* `serving`: the serving app (tenant gateway, then a routing stage) and the HTTP relay,
  SMG, and `deploy`, which assembles replicas -> router -> gateway;
* `routing`: which replica holds which block (KV events), the precise routing decision
  and its live state;
* `replay`: traces, simulated caches and policies, and the replay behind
  `prefixkit analyze`.
"""
