"""The Ray backend: prefixkit's replicas, gateway and routing policy on Ray Serve LLM
(`launch.serve_on_ray`, `prefixkit serve --backend ray`). Modules other than `settings`,
`install`, `launch` and `kuberay` (which run in prefixkit's own process) run inside the Ray
cluster, in the Ray engine's environment."""
