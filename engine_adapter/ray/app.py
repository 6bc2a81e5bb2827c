"""The Ray Serve application: vLLM replicas through Ray Serve LLM behind the tenant gateway,
routed by the chosen request router.

    serve.run(build_app(app_args(engine_config, settings)), name="prefixkit", route_prefix="/")

or, in a RayService / `serve deploy` config, ``import_path:
prefixkit.engine_adapter.ray.app:build_app`` with `app_args`' result as ``args``.

* ``prefixkit``: replicas are `server.KvEventsServer` (KV events on ports of
  ``kv_ports``, on each node's address) and `request_router.PrefixkitRouter` routes;
  ``prefix-affinity``: Ray's `PrefixCacheAffinityRouter`; ``default``: Ray's
  power-of-two-choices router. These three run behind Ray Serve LLM's OpenAI ingress
  wrapped by `gateway.TenantGateway`, bounded by ``limits`` (`Limits`).
* ``kv-aware``: Ray's `KVAwareRouter`, which needs ``RAY_SERVE_ENABLE_HA_PROXY=1
  RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1 RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY=1``
  in the cluster's and the driver's environment; the LLM server itself is then the
  ingress, so there is no gateway in front of it (clients set ``cache_salt``), and its
  KV-event ports (5557 + the replica's rank on its node) collide when two Ray nodes share
  a host.
"""

from __future__ import annotations

from typing import Any

from ..errors import DeploymentConfigError
from ..serving.limits import Limits
from .counters import ActorCounters
from .gateway import TenantGateway, tenants_loader
from .server import KV_PORTS_CONFIG, _kv_events_server
from .settings import KV_PORT_RANGE

__all__ = ["build_app", "router_class"]


def router_class(name: str) -> type[Any] | None:
    """The request router class for a router name (None: Serve's default)."""
    if name == "prefixkit":
        from .request_router import _prefixkit_router

        return _prefixkit_router()
    if name == "prefix-affinity":
        from ray.serve.llm.request_router import PrefixCacheAffinityRouter

        return PrefixCacheAffinityRouter  # type: ignore[no-any-return]
    if name == "kv-aware":
        from ray.serve.llm.request_router import KVAwareRouter

        return KVAwareRouter  # type: ignore[no-any-return]
    if name == "default":
        return None
    raise DeploymentConfigError(
        f"unknown Ray router {name!r}: use prefixkit, kv-aware, prefix-affinity or default",
        parts=("router",),
    )


def build_app(args: dict[str, Any]) -> Any:
    """The Serve application (`ray.serve.Application`) for `args` (see `settings.app_args`);
    runs where Ray is (the Ray engine's environment)."""
    from ray import serve
    from ray.llm._internal.serve.core.ingress.builder import to_model_metadata
    from ray.llm._internal.serve.core.ingress.ingress import init as openai_fastapi_app
    from ray.serve.config import RequestRouterConfig
    from ray.serve.llm import LLMConfig, build_llm_deployment, build_openai_app
    from ray.serve.llm.ingress import OpenAiIngress, make_fastapi_ingress

    fields = dict(args["llm_config"])
    router = args.get("router", "prefixkit")
    cls = router_class(router)
    deployment = dict(fields.get("deployment_config", {}))
    if cls is not None:
        kwargs: dict[str, Any] = {}
        if router == "prefixkit":
            engine = fields["engine_kwargs"]
            kwargs = {
                "model_dir": fields["model_loading_config"]["model_source"],
                "block_size": engine["block_size"],
                "hash_algo": engine.get("prefix_caching_hash_algo", "sha256_cbor"),
                "hash_seed": args.get("hash_seed"),
                "slots": args.get("most_replicas", 2),
                "capacity_blocks": args.get("capacity_blocks"),
                "savings": args.get("tier_savings"),
            }
        deployment["request_router_config"] = RequestRouterConfig(
            request_router_class=cls, request_router_kwargs=kwargs
        )
    fields["deployment_config"] = deployment
    if router == "prefixkit":
        fields["server_cls"] = _kv_events_server()
        fields["experimental_configs"] = {
            **fields.get("experimental_configs", {}),
            KV_PORTS_CONFIG: list(args.get("kv_ports", KV_PORT_RANGE)),
        }
    llm_config = LLMConfig(**fields)
    if router == "kv-aware":
        return build_openai_app({"llm_configs": [llm_config]})
    fastapi_app = openai_fastapi_app()
    fastapi_app.add_middleware(
        TenantGateway,
        tenants=tenants_loader(args.get("tenants_file")),
        limits=Limits(**args.get("limits", {})),
        counters=ActorCounters.for_application,
        routed=router == "prefixkit",
    )
    ingress = make_fastapi_ingress(OpenAiIngress, app=fastapi_app)
    options = OpenAiIngress.get_deployment_options([llm_config])
    return serve.deployment(ingress, **options).bind(
        llm_deployments={llm_config.model_id: build_llm_deployment(llm_config)},
        model_cards={llm_config.model_id: to_model_metadata(llm_config.model_id, llm_config)},
    )
