"""prefixkit.engine_adapter: self-hosted vLLM with prefix caching, tenant salts and routing.

The public API is this package, the names in its `__all__`:

* the engine: `EngineConfig` (one vLLM replica's settings, `PrefixCachingHashAlgo` its hash
  choices), `ensure_engine` (the embedded CPU engine's virtualenv), `prepare_embedded`
  (that engine with its small model, as an `EngineConfig`), `replica_configs` and
  `ReplicaSet` (replicas started and supervised), `fetch_cache_metrics` (a replica's
  prefix-cache counters, as `CacheMetrics`);
* a deployment: `deploy` (replicas -> router -> gateway) with its `Topology`, replicas
  already running as `ReplicaEndpoint`s, the running `Deployment`, `Tenants` (the
  gateway's tenant and operator API keys and salt secret) and `Limits` (the serving
  app's bounds);
* warm-up: `warm` a prompt version's prefix (`warm_prefix`, of a `registered_prompt` or any
  prompt) on every replica (`replica_targets`, or `WarmTarget`s), answered by a `WarmReport`;
* Ray: `serve_on_ray` with its `RaySettings`, the running `RayDeployment`;
* replay: `load_trace` and `analyze` it under `LoadParams` (what ``prefixkit analyze`` runs);
* the errors (`EngineConfigError` ... `WarmupError`; their tree is drawn in
  `prefixkit.sdk.errors`), each carrying its data as attributes.

Each name is imported on first use (`prefixkit.sdk.exports`): importing this package
needs neither vLLM nor the ``serve`` extra, which a name that uses them asks for.

One subpackage per subsystem, every module in them internal (import from this package):

* `engine`: install the vLLM engine, prepare the embedded model, configure, launch and
  supervise replicas, read their cache metrics;
* `serving`: the serving app (the gateway stage, then a routing stage) and the HTTP relay,
  SMG, warm-up, and `deploy`, which assembles replicas -> router -> gateway;
* `routing`: which replica holds which block (KV events), the precise routing decision
  and its live state;
* `replay`: traces, simulated caches and policies, and the replay behind
  `prefixkit analyze`;
* `ray`: the same replicas, gateway and routing policy on Ray Serve LLM (`serve_on_ray`,
  KubeRay manifests); its modules other than `settings`, `install`, `launch` and `kuberay`
  run inside the Ray cluster.

The modules at the top: `errors`, `problems` (configuration problems from pydantic's
errors) and `compiled` (the guard against stale compiled modules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixkit.sdk.exports import lazy_exports

if TYPE_CHECKING:
    from .engine.config import EngineConfig as EngineConfig
    from .engine.config import PrefixCachingHashAlgo as PrefixCachingHashAlgo
    from .engine.embedded import prepare_embedded as prepare_embedded
    from .engine.install import ensure_engine as ensure_engine
    from .engine.metrics import CacheInterval as CacheInterval
    from .engine.metrics import CacheMetrics as CacheMetrics
    from .engine.metrics import fetch_cache_metrics as fetch_cache_metrics
    from .engine.replicas import ReplicaSet as ReplicaSet
    from .engine.replicas import replica_configs as replica_configs
    from .errors import DeploymentConfigError as DeploymentConfigError
    from .errors import EngineConfigError as EngineConfigError
    from .errors import EngineInstallError as EngineInstallError
    from .errors import GatewayConfigError as GatewayConfigError
    from .errors import ModelPrepareError as ModelPrepareError
    from .errors import PortInUseError as PortInUseError
    from .errors import ReplicaStartError as ReplicaStartError
    from .errors import RouterStartError as RouterStartError
    from .errors import StaleBuildError as StaleBuildError
    from .errors import TraceError as TraceError
    from .errors import WarmupError as WarmupError
    from .ray.launch import RayDeployment as RayDeployment
    from .ray.launch import serve_on_ray as serve_on_ray
    from .ray.settings import RaySettings as RaySettings
    from .replay.replay import Analysis as Analysis
    from .replay.replay import LoadParams as LoadParams
    from .replay.replay import analyze as analyze
    from .replay.trace import Trace as Trace
    from .replay.trace import load_trace as load_trace
    from .serving.deployment import Deployment as Deployment
    from .serving.deployment import ReplicaEndpoint as ReplicaEndpoint
    from .serving.deployment import Topology as Topology
    from .serving.deployment import deploy as deploy
    from .serving.limits import Limits as Limits
    from .serving.tenants import Tenants as Tenants
    from .serving.warmup import WarmPrefix as WarmPrefix
    from .serving.warmup import WarmReport as WarmReport
    from .serving.warmup import WarmResult as WarmResult
    from .serving.warmup import WarmTarget as WarmTarget
    from .serving.warmup import registered_prompt as registered_prompt
    from .serving.warmup import replica_targets as replica_targets
    from .serving.warmup import warm as warm
    from .serving.warmup import warm_prefix as warm_prefix

_EXPORTS = {
    # the engine
    "EngineConfig": "engine.config",
    "PrefixCachingHashAlgo": "engine.config",
    "ensure_engine": "engine.install",
    "prepare_embedded": "engine.embedded",
    "ReplicaSet": "engine.replicas",
    "replica_configs": "engine.replicas",
    "CacheMetrics": "engine.metrics",
    "CacheInterval": "engine.metrics",
    "fetch_cache_metrics": "engine.metrics",
    # a deployment
    "deploy": "serving.deployment",
    "Deployment": "serving.deployment",
    "ReplicaEndpoint": "serving.deployment",
    "Topology": "serving.deployment",
    "Tenants": "serving.tenants",
    "Limits": "serving.limits",
    # warm-up
    "warm": "serving.warmup",
    "warm_prefix": "serving.warmup",
    "replica_targets": "serving.warmup",
    "registered_prompt": "serving.warmup",
    "WarmPrefix": "serving.warmup",
    "WarmReport": "serving.warmup",
    "WarmResult": "serving.warmup",
    "WarmTarget": "serving.warmup",
    # Ray
    "serve_on_ray": "ray.launch",
    "RayDeployment": "ray.launch",
    "RaySettings": "ray.settings",
    # replay
    "analyze": "replay.replay",
    "load_trace": "replay.trace",
    "Trace": "replay.trace",
    "Analysis": "replay.replay",
    "LoadParams": "replay.replay",
    # errors
    "DeploymentConfigError": "errors",
    "EngineConfigError": "errors",
    "EngineInstallError": "errors",
    "GatewayConfigError": "errors",
    "ModelPrepareError": "errors",
    "PortInUseError": "errors",
    "ReplicaStartError": "errors",
    "RouterStartError": "errors",
    "StaleBuildError": "errors",
    "TraceError": "errors",
    "WarmupError": "errors",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
