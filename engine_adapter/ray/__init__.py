"""The Ray backend: prefixkit's replicas, gateway and routing policy on Ray Serve LLM
(`launch.serve_on_ray`, `prefixkit serve --backend ray`). Modules other than `settings`,
`install` and `launch` run inside the Ray cluster, in the Ray engine's environment."""
