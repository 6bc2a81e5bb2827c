"""The KubeRay manifests that run the Ray backend on Kubernetes (pure: no Ray, no I/O): a
`RayService` and the `NetworkPolicy` that keeps its pods' ports to its own pods.

    manifests = kuberay_manifests(engine, settings, KubeRayOptions(image="registry/app:1"))
    print(kuberay_yaml(manifests))   # what `prefixkit serve --backend ray --emit kuberay` prints

The RayService's ``spec.serveConfigV2`` holds the same Serve application `prefixkit serve
--backend ray` runs: ``import_path: prefixkit.engine_adapter.ray.app:build_app`` with
`settings.app_args` of the same `EngineConfig` and `RaySettings` (router, replicas or
autoscaling bounds, each replica's CPUs, GPUs and custom resources, block size, hash, KV
cache, engine environment, KV-event ports, the gateway's `Limits`), Serve's HTTP proxy
listening on every pod on ``settings.http_port`` with the bounds of
`settings.serve_http_options`. ``spec.rayClusterConfig``: a head pod that runs no replica
(``num-cpus: "0"``, as KubeRay's LLM samples) and one worker group, a pod per replica sized
for one replica's placement bundle (CPUs, ``nvidia.com/gpu``, custom resources), scaled by
KubeRay between the autoscaling bounds when they are set. The engine's KV tiers
(`EngineConfig.kv_tiers`) go into the replicas' ``engine_kwargs`` as the same
``kv_transfer_config`` the local backend passes to vLLM; the worker pods' memory grows by
the cpu tier, and each disk tier gets a volume of its size at its path (an ``emptyDir`` on
the node's storage). Every Ray pod carries
`pod_labels` (KubeRay names the RayCluster, and labels its pods ``ray.io/cluster``, with a
suffix of its own, new at each cluster upgrade).

The NetworkPolicy (`network_policy`) selects those pods and admits: anything from the
same pods (Ray's own traffic between its nodes; the KV-event sockets, which the router in
the ingress replicas reads); the Serve port from anywhere; the dashboard port from the
KubeRay operator's pods (``options.operator_namespace``), which deploys the Serve
application through it. Nothing else reaches the pods.

Nothing secret is written into the manifest: the tenants file (API keys and the salt secret)
comes from the Kubernetes Secret ``options.tenants_secret`` (key ``tenants.toml``), mounted
read-only on every Ray pod at `TENANTS_DIR`, where the gateway ingress reads it. With the
``kv-aware`` router Ray's own LLM server is the ingress, so there is no gateway and no
Secret (clients set ``cache_salt``); its environment flags are set on every pod instead.

The image must hold what the Ray engine holds (`prefixkit.engine_adapter.ray.install`:
Ray Serve, vLLM 0.29 and prefixkit); the model folder is ``engine.model`` inside the pods:
baked into the image, or on a PersistentVolumeClaim (``options.model_claim``) mounted
read-only at that folder's parent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ..engine.config import EngineConfig
from ..engine.kv_tiers import kubernetes_quantity
from ..errors import DeploymentConfigError
from .install import RAY_VERSION
from .launch import KV_AWARE_ENV
from .settings import RaySettings, app_args, serve_http_options

__all__ = [
    "DASHBOARD_PORT",
    "POD_HOME",
    "TENANTS_DIR",
    "KubeRayOptions",
    "kuberay_manifests",
    "kuberay_yaml",
    "network_policy",
    "pod_labels",
    "quantity_bytes",
    "rayservice_manifest",
]

TENANTS_DIR = PurePosixPath("/etc/prefixkit/tenants")
TENANTS_KEY = "tenants.toml"  # the Secret's key holding the tenants file
POD_HOME = PurePosixPath("/tmp/prefixkit")  # PREFIXKIT_HOME in the pods (vLLM's compile cache)
DASHBOARD_PORT = 8265  # the Ray dashboard, where the KubeRay operator deploys Serve apps
_HEAD_PORTS = (("gcs", 6379), ("dashboard", DASHBOARD_PORT), ("client", 10001), ("metrics", 8080))
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_NAME_LIMIT = 40  # KubeRay derives longer names (services, pods) from the RayService's


@dataclass(frozen=True)
class KubeRayOptions:
    """What Kubernetes needs besides the engine and Ray settings.

    `image`: a container image with Ray Serve, vLLM and prefixkit (see the module docstring);
    `memory_per_replica`: a Kubernetes quantity for each worker pod, e.g. ``96Gi``,
    ``100G`` or ``1e11`` (not ``96GiB``: Kubernetes refuses it), more than the engine's cpu
    KV tier (default: the CPU KV cache plus 4 GiB for the weights and the engine's
    processes on CPU, 32Gi on GPU plus the engine's cpu KV tier);
    `model_claim`: a PersistentVolumeClaim holding the model folder;
    `operator_namespace`: where the KubeRay operator runs (its pods labelled
    ``app.kubernetes.io/name: kuberay-operator``, as its Helm chart labels them)."""

    image: str
    name: str = "prefixkit"
    namespace: str | None = None
    tenants_secret: str = "prefixkit-tenants"
    operator_namespace: str = "default"
    model_claim: str | None = None
    memory_per_replica: str | None = None
    head_cpus: int = 2
    head_memory: str = "4Gi"


def kuberay_manifests(
    engine: EngineConfig, settings: RaySettings, options: KubeRayOptions
) -> list[dict[str, Any]]:
    """The RayService and its NetworkPolicy (module docstring), in the order to apply them.

    Raises `DeploymentConfigError` as `rayservice_manifest` does."""
    return [rayservice_manifest(engine, settings, options), network_policy(settings, options)]


def rayservice_manifest(
    engine: EngineConfig, settings: RaySettings, options: KubeRayOptions
) -> dict[str, Any]:
    """The `ray.io/v1` RayService for this deployment, as a dict (see the module docstring).

    Raises `DeploymentConfigError` for an empty image, a name Kubernetes refuses, a
    relative model path (the pods need an absolute one), a GPU engine with no GPU per
    replica (``settings.gpus_per_replica``), a worker memory that is not a Kubernetes
    quantity (`quantity_bytes`) or does not hold the engine's cpu KV tier, or a tier
    volume whose path is, holds or lies inside the model folder, the model claim's or the
    tenants Secret's mount, or another tier's volume."""
    gateway = settings.router != "kv-aware"
    _check(engine, settings, options, gateway)
    in_pods = RaySettings(
        **{
            **settings.model_dump(),
            "http_host": "0.0.0.0",
            "tenants_file": str(TENANTS_DIR / TENANTS_KEY) if gateway else None,
        }
    )
    args = app_args(engine, in_pods, home=Path(str(POD_HOME)))
    serve_config = {
        "proxy_location": "EveryNode",
        "http_options": serve_http_options(in_pods),
        "applications": [
            {
                "name": settings.app_name,
                "route_prefix": "/",
                "import_path": "prefixkit.engine_adapter.ray.app:build_app",
                "args": args,
            }
        ],
    }
    volumes, mounts = _volumes(engine, options, gateway)
    tier_volumes, tier_mounts = _tier_volumes(engine)
    env = [] if gateway else [{"name": k, "value": v} for k, v in KV_AWARE_ENV.items()]
    head_ports = [("serve", settings.http_port), *_HEAD_PORTS]
    head = _container(
        "ray-head",
        options.image,
        env,
        mounts,
        {"cpu": str(options.head_cpus), "memory": options.head_memory},
        [{"containerPort": port, "name": name, "protocol": "TCP"} for name, port in head_ports],
    )
    worker = _container(
        "ray-worker",
        options.image,
        env,
        mounts + tier_mounts,
        _replica_limits(engine, settings, options),
    )
    worker_group: dict[str, Any] = {
        "groupName": "replicas",
        "replicas": settings.replicas,
        "minReplicas": settings.min_replicas
        if settings.min_replicas is not None
        else settings.replicas,
        "maxReplicas": settings.most_replicas,
        "rayStartParams": {},
        "template": _pod_template(worker, volumes + tier_volumes, options),
    }
    if settings.replica_resources:
        worker_group["resources"] = {k: _quantity(v) for k, v in settings.replica_resources.items()}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": _metadata(options.name, options),
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve_config, sort_keys=False),
            "rayClusterConfig": {
                "rayVersion": RAY_VERSION,
                "enableInTreeAutoscaling": settings.min_replicas is not None,
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
                    "template": _pod_template(head, volumes, options),
                },
                "workerGroupSpecs": [worker_group],
            },
        },
    }


def network_policy(settings: RaySettings, options: KubeRayOptions) -> dict[str, Any]:
    """The `networking.k8s.io/v1` NetworkPolicy of the RayService's pods (module docstring):
    every port from the same pods, the Serve port from anywhere, the dashboard port from the
    KubeRay operator; nothing else."""
    ray_pods = {"matchLabels": pod_labels(options)}
    operator = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": options.operator_namespace}
        },
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(f"{options.name}-ray-pods", options),
        "spec": {
            "podSelector": ray_pods,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": ray_pods}]},
                {"ports": [{"protocol": "TCP", "port": settings.http_port}]},
                {"from": [operator], "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}]},
            ],
        },
    }


def pod_labels(options: KubeRayOptions) -> dict[str, str]:
    """The labels of every Ray pod of the RayService `options.name` (its NetworkPolicy
    selects them)."""
    return {
        "app.kubernetes.io/name": "prefixkit",
        "app.kubernetes.io/instance": options.name,
        "app.kubernetes.io/component": "ray-node",
    }


def kuberay_yaml(manifests: Sequence[Mapping[str, Any]]) -> str:
    """The manifests as one YAML stream, a document each (serveConfigV2 as a literal
    block)."""
    return yaml.dump_all(
        [dict(manifest) for manifest in manifests], Dumper=_LiteralDumper, sort_keys=False
    )


def _metadata(name: str, options: KubeRayOptions) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            "app.kubernetes.io/name": "prefixkit",
            "app.kubernetes.io/instance": options.name,
        },
    }
    if options.namespace is not None:
        metadata["namespace"] = options.namespace
    return metadata


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so serveConfigV2 reads as YAML in the manifest;
    no anchors and aliases (the head and the workers mount the same volumes)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _literal(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_LiteralDumper.add_representer(str, _literal)


def _check(
    engine: EngineConfig, settings: RaySettings, options: KubeRayOptions, gateway: bool
) -> None:
    problems: list[tuple[str, str]] = []  # (the option at fault, what to change)
    if not options.image.strip():
        problems.append(
            (
                "image",
                "--image is empty: give an image with Ray Serve 2.60, vLLM 0.29 and prefixkit",
            )
        )
    if not _DNS_LABEL.fullmatch(options.name) or len(options.name) > _NAME_LIMIT:
        problems.append(
            (
                "name",
                f"RayService name {options.name!r}: use lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit, at most "
                f"{_NAME_LIMIT} characters",
            )
        )
    if not engine.model.is_absolute():
        problems.append(
            (
                "model",
                f"model {engine.model} is relative: give the model folder's absolute path "
                "inside the pods (baked into the image or on --model-claim)",
            )
        )
    if engine.device == "gpu" and not settings.gpus_per_replica:
        specs = ", ".join(tier.spec for tier in engine.kv_tiers)
        what = f"--device gpu and its KV tiers ({specs}) need" if specs else "--device gpu needs"
        problems.append(
            (
                "gpus_per_replica",
                f"{what} a GPU in every worker "
                "pod, and no GPU is asked for: give --gpus-per-replica N (GPUs per replica, "
                f"at least the tensor parallel size, {engine.tensor_parallel_size})",
            )
        )
    problems += _memory_problems(engine, options)
    problems += _mount_problems(engine, options, gateway)
    if problems:
        raise DeploymentConfigError(
            "; ".join(message for _, message in problems), parts=(problems[0][0],)
        )


def _memory_problems(engine: EngineConfig, options: KubeRayOptions) -> list[tuple[str, str]]:
    """A --memory-per-replica Kubernetes would refuse, or one that does not hold the cpu
    KV tier."""
    if options.memory_per_replica is None:
        return []
    text = options.memory_per_replica
    try:
        memory = quantity_bytes(text)
    except ValueError as error:
        return [("memory_per_replica", f"--memory-per-replica {text}: {error}")]
    cpu_tier = _cpu_tier_bytes(engine)
    if memory <= cpu_tier:
        return [
            (
                "memory_per_replica",
                f"--memory-per-replica {text} does not hold the cpu KV "
                f"tier ({kubernetes_quantity(cpu_tier)} of pinned host RAM) and the replica: "
                "give the tier plus what the replica needs besides (without "
                "--memory-per-replica: "
                f"{kubernetes_quantity(cpu_tier + (32 << 30))}), or give a smaller tier",
            )
        ]
    return []


def _mount_problems(
    engine: EngineConfig, options: KubeRayOptions, gateway: bool
) -> list[tuple[str, str]]:
    """Tier volumes whose path is, holds or lies inside another mount or the model folder:
    Kubernetes refuses two mounts at one path, and a volume mounted over a folder hides it."""
    model = PurePosixPath(engine.model)
    others: list[tuple[PurePosixPath, str]] = [(model, "the model folder")]
    if gateway:
        others.append((TENANTS_DIR, "the mount of the tenants Secret"))
    if options.model_claim is not None:
        others.append((model.parent, f"the mount of the model claim {options.model_claim!r}"))
    problems: list[tuple[str, str]] = []
    for tier in engine.kv_tiers:
        if tier.path is None:
            continue
        path = PurePosixPath(tier.path)
        for other, what in others:
            if _overlap(path, other):
                problems.append(
                    (
                        "kv_tiers",
                        f"KV tier {tier.spec!r}: its volume at {path} would "
                        f"{_clash(path, other)} {what} ({other}) in the pods: give the tier "
                        "a directory of its own, e.g. /mnt/nvme",
                    )
                )
        others.append((path, f"the volume of KV tier {tier.spec!r}"))
    return problems


def _overlap(path: PurePosixPath, other: PurePosixPath) -> bool:
    return path == other or path in other.parents or other in path.parents


def _clash(path: PurePosixPath, other: PurePosixPath) -> str:
    if path == other:
        return "be mounted at the same path as"
    if path in other.parents:
        return "hide"
    return "be mounted inside"


def _volumes(
    engine: EngineConfig, options: KubeRayOptions, gateway: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if gateway:
        volumes.append(
            {
                "name": "tenants",
                "secret": {
                    "secretName": options.tenants_secret,
                    "items": [{"key": TENANTS_KEY, "path": TENANTS_KEY}],
                },
            }
        )
        mounts.append({"name": "tenants", "mountPath": str(TENANTS_DIR), "readOnly": True})
    if options.model_claim is not None:
        volumes.append(
            {
                "name": "model",
                "persistentVolumeClaim": {"claimName": options.model_claim, "readOnly": True},
            }
        )
        mounts.append(
            {
                "name": "model",
                "mountPath": str(PurePosixPath(engine.model).parent),
                "readOnly": True,
            }
        )
    return volumes, mounts


def _tier_volumes(engine: EngineConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A volume for each disk tier, on the worker pods (the head runs no replica): the
    node's local storage (emptyDir) at the tier's path, bounded to its size."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for tier in engine.kv_tiers:
        if tier.path is None:
            continue
        name = f"kv-tier-{tier.kind}"
        volumes.append(
            {"name": name, "emptyDir": {"sizeLimit": kubernetes_quantity(tier.size_bytes or 0)}}
        )
        mounts.append({"name": name, "mountPath": tier.path})
    return volumes, mounts


def _replica_limits(
    engine: EngineConfig, settings: RaySettings, options: KubeRayOptions
) -> dict[str, str]:
    """One worker pod holds one replica's placement bundle."""
    if options.memory_per_replica is not None:
        memory = options.memory_per_replica
    elif engine.device == "cpu":
        memory = f"{(engine.kv_cache_space_gib or 4) + 4}Gi"
    else:
        # the CPU tier is pinned host RAM on top of what the replica needs without it
        memory = kubernetes_quantity((32 << 30) + _cpu_tier_bytes(engine))
    limits = {"cpu": _quantity(max(settings.cpus_per_replica, 1.0)), "memory": memory}
    if settings.gpus_per_replica:
        limits["nvidia.com/gpu"] = str(math.ceil(settings.gpus_per_replica))
    return limits


def _container(
    name: str,
    image: str,
    env: list[dict[str, str]],
    mounts: list[dict[str, Any]],
    limits: dict[str, str],
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": {"limits": dict(limits), "requests": dict(limits)},
    }
    if ports:
        container["ports"] = ports
    if env:
        container["env"] = env
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod_template(
    container: dict[str, Any], volumes: list[dict[str, Any]], options: KubeRayOptions
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        spec["volumes"] = volumes
    return {"metadata": {"labels": pod_labels(options)}, "spec": spec}


def _cpu_tier_bytes(engine: EngineConfig) -> int:
    return sum(tier.size_bytes or 0 for tier in engine.kv_tiers if tier.kind == "cpu")


# Kubernetes' quantity grammar (k8s.io/apimachinery resource.Quantity): a signed decimal
# number, then a binary suffix, an exponent or a decimal suffix
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[mkMGTPE])?)"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"m": -3, None: 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_NOT_KUBERNETES = re.compile(r"(?P<number>[0-9.]+)\s*(?P<unit>[KkMmGgTtPpEe][Ii]?[Bb]|[kmgtpe]i)")


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity in bytes (``64Gi``, ``100G``, ``5e10``,
    ``68719476736``), rounded up to a whole byte as Kubernetes does; raises `ValueError`
    for a form Kubernetes refuses (``64GiB``, ``100GB``) or a size that is not positive,
    naming the form to use."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(
            f"not a Kubernetes quantity{_suggestion(text)}: give a number with Ki, Mi, Gi, "
            "Ti (binary) or k, M, G, T (decimal), an exponent (5e10) or plain bytes, "
            "e.g. 96Gi"
        )
    number = Decimal(match["number"])
    if match["binary"] is not None:
        size = number * (1 << _BINARY[match["binary"]])
    else:
        exponent = match["exponent"]
        power = int(exponent) if exponent is not None else _DECIMAL[match["decimal"]]
        size = number.scaleb(power)
    if size <= 0:
        raise ValueError("memory must be positive: give e.g. 96Gi")
    return int(size.to_integral_value(rounding=ROUND_CEILING))


def _suggestion(text: str) -> str:
    """How to write a size in a unit Kubernetes does not take (``64GiB`` -> ``64Gi``)."""
    match = _NOT_KUBERNETES.fullmatch(text.strip())
    if match is None:
        return ""
    letter, binary = match["unit"][0].upper(), match["unit"][1:2].lower() == "i"
    unit = letter + "i" if binary else "k" if letter == "K" else letter
    return f" (Kubernetes has no {match['unit']!r}: write {match['number']}{unit})"


def _quantity(value: float) -> str:
    """A Kubernetes quantity: whole numbers plainly, fractions in milli-units."""
    return str(int(value)) if float(value).is_integer() else f"{round(value * 1000)}m"
