"""The KubeRay manifests for `prefixkit serve --backend ray --emit kuberay`: the RayService
valid against KubeRay's RayService CRD schema (vendored in tests/data/kuberay, every object
closed to unknown fields as the API server prunes them), its pods and the NetworkPolicy
against Kubernetes' own schemas (kubernetes-validate, strict); its Serve application is the
Ray backend's own, and (with the Ray engine) parses as Ray Serve's deploy schema and builds;
the NetworkPolicy keeps every port but Serve's to the cluster's own pods; no secret in it."""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter import DeploymentConfigError, EngineConfig, Limits, RaySettings
from prefixkit.engine_adapter.engine.kv_tiers import kubernetes_quantity
from prefixkit.engine_adapter.ray.kuberay import (
    DASHBOARD_PORT,
    TENANTS_DIR,
    KubeRayOptions,
    kuberay_manifests,
    kuberay_yaml,
    network_policy,
    pod_labels,
    quantity_bytes,
    rayservice_manifest,
)
from prefixkit.engine_adapter.ray.launch import KV_AWARE_ENV
from prefixkit.engine_adapter.ray.settings import serve_http_options

CRD_SCHEMA = Path(__file__).parents[1] / "data" / "kuberay" / "ray.io_rayservices.v1.schema.json"
MODEL = Path("/models/SmolLM2-135M-Instruct")
ENGINE = EngineConfig(model=MODEL, block_size=32, kv_cache_space_gib=2, dtype="float32")
OPTIONS = KubeRayOptions(image="registry.example/prefixkit-ray:0.1.0")


def closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others, as the API
    server prunes unknown fields (unless x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: closed(value) for key, value in schema.items()}
    if (
        "properties" in result
        and "additionalProperties" not in result
        and not result.get("x-kubernetes-preserve-unknown-fields")
    ):
        result["additionalProperties"] = False
    return result


@pytest.fixture(scope="module")
def crd_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(CRD_SCHEMA.read_text())["openAPIV3Schema"]
    return jsonschema.Draft202012Validator(closed(schema))


def pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = manifest["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [group["template"] for group in groups]


def serve_config(manifest: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    return config


def application(manifest: dict[str, Any]) -> dict[str, Any]:
    (app,) = serve_config(manifest)["applications"]
    return app  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "settings",
    [
        RaySettings(),
        RaySettings(router="prefix-affinity", replicas=2, min_replicas=1, max_replicas=4),
        RaySettings(router="kv-aware", replicas=3),
        RaySettings(gpus_per_replica=1, cpus_per_replica=4, replica_resources={"replica_slot": 1}),
    ],
    ids=["prefixkit", "autoscaling", "kv-aware", "gpu"],
)
def test_the_manifest_is_valid_against_the_rayservice_crd_and_kubernetes(
    settings: RaySettings, crd_validator: jsonschema.Draft202012Validator
) -> None:
    engine = (
        ENGINE
        if not settings.gpus_per_replica
        else ENGINE.derive(device="gpu", kv_cache_space_gib=None, gpu_memory_utilization=0.8)
    )
    manifest, policy = yaml.safe_load_all(
        kuberay_yaml(kuberay_manifests(engine, settings, OPTIONS))
    )
    crd_validator.validate(manifest)
    version = kubernetes_validate.utils.latest_version()
    for index, template in enumerate(pod_templates(manifest)):
        pod_template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"group-{index}"},
            "template": template,
        }
        kubernetes_validate.validate(pod_template, version, strict=True)
    kubernetes_validate.validate(policy, version, strict=True)


def test_an_unknown_field_fails_the_crd_validation(
    crd_validator: jsonschema.Draft202012Validator,
) -> None:
    manifest = rayservice_manifest(ENGINE, RaySettings(), OPTIONS)
    broken = copy.deepcopy(manifest)
    broken["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParameters"] = {}
    with pytest.raises(jsonschema.ValidationError, match="rayStartParameters"):
        crd_validator.validate(broken)


def test_a_misspelled_pod_field_fails_the_kubernetes_validation() -> None:
    (head, _) = pod_templates(rayservice_manifest(ENGINE, RaySettings(), OPTIONS))
    head["spec"]["containers"][0]["volumeMount"] = []
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "x"},
        "template": head,
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            template, kubernetes_validate.utils.latest_version(), strict=True
        )


def test_a_misspelled_network_policy_field_fails_the_kubernetes_validation() -> None:
    policy = network_policy(RaySettings(), OPTIONS)
    policy["spec"]["ingress"][0]["form"] = policy["spec"]["ingress"][0].pop("from")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            policy, kubernetes_validate.utils.latest_version(), strict=True
        )


def test_the_manifests_are_the_rayservice_then_its_network_policy() -> None:
    manifests = kuberay_manifests(ENGINE, RaySettings(), OPTIONS)
    assert [m["kind"] for m in manifests] == ["RayService", "NetworkPolicy"]
    assert list(yaml.safe_load_all(kuberay_yaml(manifests))) == manifests


def test_the_network_policy_selects_every_ray_pod_of_the_rayservice() -> None:
    options = KubeRayOptions(image="img:1", name="acme-llm", namespace="llm")
    manifest, policy = kuberay_manifests(ENGINE, RaySettings(), options)
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector == pod_labels(options)
    assert selector["app.kubernetes.io/instance"] == "acme-llm"
    for template in pod_templates(manifest):
        assert template["metadata"]["labels"].items() >= selector.items()
    assert policy["metadata"]["namespace"] == manifest["metadata"]["namespace"] == "llm"
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_the_policy_admits_serve_from_anywhere_the_rest_from_the_cluster() -> None:
    options = KubeRayOptions(image="img:1", name="acme-llm", operator_namespace="ray-system")
    policy = network_policy(RaySettings(http_port=8100), options)
    ray_pods = {"podSelector": {"matchLabels": pod_labels(options)}}
    assert policy["spec"]["ingress"] == [
        # every port (Ray's own, the KV-event range) from the cluster's own pods only
        {"from": [ray_pods]},
        # the Serve port from anywhere
        {"ports": [{"protocol": "TCP", "port": 8100}]},
        # the dashboard from the KubeRay operator, which deploys the Serve app through it
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "ray-system"}
                    },
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
                }
            ],
            "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}],
        },
    ]


def test_the_serve_application_is_the_ray_backends_own() -> None:
    settings = RaySettings(router="prefixkit", replicas=2, replica_resources={"replica_slot": 1})
    app = application(rayservice_manifest(ENGINE, settings, OPTIONS))
    assert app["import_path"] == "prefixkit.engine_adapter.ray.app:build_app"
    llm = app["args"]["llm_config"]
    assert llm["model_loading_config"] == {"model_id": MODEL.name, "model_source": str(MODEL)}
    assert llm["placement_group_config"]["bundles"] == [{"CPU": 1.0, "replica_slot": 1.0}]
    assert llm["deployment_config"]["num_replicas"] == 2
    assert llm["engine_kwargs"]["block_size"] == 32
    assert llm["engine_kwargs"]["prefix_caching_hash_algo"] == "sha256_cbor"
    assert llm["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert app["args"]["router"] == "prefixkit"


def test_serve_listens_on_every_pod_on_the_serve_port_bounded_by_the_limits() -> None:
    limits = Limits(body_timeout_s=20, upstream_read_timeout_s=300)
    settings = RaySettings(http_port=8000, limits=limits)
    manifest = rayservice_manifest(ENGINE, settings, OPTIONS)
    options = serve_config(manifest)["http_options"]
    assert (options["host"], options["port"]) == ("0.0.0.0", 8000)
    assert options == serve_http_options(
        RaySettings(http_host="0.0.0.0", http_port=8000, limits=limits)
    )
    assert application(manifest)["args"]["limits"] == asdict(limits)
    (head, _) = pod_templates(manifest)
    ports = {p["name"]: p["containerPort"] for p in head["spec"]["containers"][0]["ports"]}
    assert ports["serve"] == 8000


def test_the_tenants_come_from_the_secret_mounted_where_the_gateway_reads_them() -> None:
    options = KubeRayOptions(image="img:1", tenants_secret="acme-tenants")
    manifest = rayservice_manifest(
        ENGINE, RaySettings(tenants_file="/home/me/tenants.toml"), options
    )
    assert application(manifest)["args"]["tenants_file"] == str(TENANTS_DIR / "tenants.toml")
    for template in pod_templates(manifest):
        (volume,) = template["spec"]["volumes"]
        assert volume["secret"]["secretName"] == "acme-tenants"
        (mount,) = template["spec"]["containers"][0]["volumeMounts"]
        assert (mount["mountPath"], mount["readOnly"]) == (str(TENANTS_DIR), True)
    assert "/home/me" not in kuberay_yaml([manifest])


def test_kv_aware_has_no_gateway_and_sets_its_flags_on_every_pod() -> None:
    manifest = rayservice_manifest(ENGINE, RaySettings(router="kv-aware"), OPTIONS)
    assert application(manifest)["args"]["tenants_file"] is None
    for template in pod_templates(manifest):
        (container,) = template["spec"]["containers"]
        assert {e["name"]: e["value"] for e in container["env"]} == KV_AWARE_ENV
        assert "volumes" not in template["spec"]


def test_autoscaling_bounds_size_the_worker_group() -> None:
    settings = RaySettings(replicas=2, min_replicas=1, max_replicas=5)
    cluster = rayservice_manifest(ENGINE, settings, OPTIONS)["spec"]["rayClusterConfig"]
    (group,) = cluster["workerGroupSpecs"]
    assert (group["minReplicas"], group["replicas"], group["maxReplicas"]) == (1, 2, 5)
    assert cluster["enableInTreeAutoscaling"] is True


def test_a_worker_pod_holds_one_replicas_resources() -> None:
    engine = ENGINE.derive(device="gpu", kv_cache_space_gib=None)
    settings = RaySettings(cpus_per_replica=4, gpus_per_replica=1)
    cluster = rayservice_manifest(engine, settings, OPTIONS)["spec"]["rayClusterConfig"]
    (container,) = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def test_a_model_claim_is_mounted_read_only_at_the_model_folders_parent() -> None:
    options = KubeRayOptions(image="img:1", model_claim="models")
    (head, worker) = pod_templates(rayservice_manifest(ENGINE, RaySettings(), options))
    for template in (head, worker):
        mounts = {m["name"]: m for m in template["spec"]["containers"][0]["volumeMounts"]}
        assert (mounts["model"]["mountPath"], mounts["model"]["readOnly"]) == ("/models", True)


@pytest.mark.parametrize(
    ("engine_config", "options", "message"),
    [
        (ENGINE, KubeRayOptions(image=" "), "--image is empty"),
        (ENGINE, KubeRayOptions(image="img:1", name="Prefix_Kit"), "RayService name 'Prefix_Kit'"),
        (
            EngineConfig(model=Path("models/m")),
            OPTIONS,
            "model models/m is relative: give the model folder's absolute path",
        ),
    ],
    ids=["image", "name", "model"],
)
def test_what_kubernetes_cannot_run_is_refused_naming_it(
    engine_config: EngineConfig, options: KubeRayOptions, message: str
) -> None:
    with pytest.raises(DeploymentConfigError, match=message):
        rayservice_manifest(engine_config, RaySettings(), options)


# Run in the Ray engine's interpreter: the config file as `serve deploy` and KubeRay read it
# (Ray Serve's own schema), then its application built as Ray Serve builds it (LLMConfig
# validates every field the Ray backend passes).
# Serve's HTTP options schema takes unknown fields: the check names any it does not know.
SERVE_CHECK = """
import sys, yaml
from ray.serve.schema import HTTPOptionsSchema, ServeDeploySchema
from prefixkit.engine_adapter.ray.app import build_app
raw = yaml.safe_load(open(sys.argv[1]))
config = ServeDeploySchema.model_validate(raw)
unknown = sorted(set(raw["http_options"]) - set(HTTPOptionsSchema.model_fields))
(app,) = config.applications
print(app.import_path, type(build_app(app.args)).__name__, unknown)
"""


def run_serve_check(serve_config: str, folder: Path) -> subprocess.CompletedProcess[str]:
    from prefixkit.engine_adapter.ray.install import ensure_ray_engine

    path = folder / "serve.yaml"
    path.write_text(serve_config)
    return subprocess.run(
        [str(ensure_ray_engine()), "-c", SERVE_CHECK, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.ray
def test_the_serve_config_parses_as_ray_serves_schema_and_its_application_builds(
    tmp_path: Path,
) -> None:
    manifest = rayservice_manifest(ENGINE, RaySettings(min_replicas=1, max_replicas=3), OPTIONS)
    checked = run_serve_check(manifest["spec"]["serveConfigV2"], tmp_path)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.splitlines()[-1] == (
        "prefixkit.engine_adapter.ray.app:build_app Application []"
    )


def test_serve_emit_kuberay_prints_the_manifest_of_its_options(
    capsys: pytest.CaptureFixture[str], crd_validator: jsonschema.Draft202012Validator
) -> None:
    from prefixkit.cli.main import main

    emit = ["serve", "--backend", "ray", "--emit", "kuberay", "--model", str(MODEL)]
    options = ["--image", "img:1", "--replicas", "3", "--cpus-per-replica", "2"]
    more = ["--block-size", "64", "--ray-router", "prefix-affinity", "--k8s-namespace", "llm"]
    code = main([*emit, *options, *more])
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    printed = documents[0]
    assert code == 0
    assert [document["kind"] for document in documents] == ["RayService", "NetworkPolicy"]
    crd_validator.validate(printed)
    assert printed["metadata"]["namespace"] == "llm"
    llm = application(printed)["args"]["llm_config"]
    assert (llm["deployment_config"]["num_replicas"], llm["engine_kwargs"]["block_size"]) == (3, 64)
    assert application(printed)["args"]["router"] == "prefix-affinity"
    (group,) = printed["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--emit", "kuberay", "--model", "/m", "--image", "i"], "add --backend ray"),
        (
            ["--backend", "ray", "--emit", "kuberay", "--model", "m", "--image", "i"],
            "absolute path",
        ),
        (["--backend", "ray", "--emit", "kuberay", "--embedded", "--image", "i"], "absolute path"),
        (["--backend", "ray", "--emit", "kuberay", "--model", "/m"], "needs --image"),
    ],
    ids=["local backend", "relative model", "embedded", "no image"],
)
def test_serve_emit_kuberay_refuses_what_it_cannot_describe(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixkit.cli.main import main

    assert main(["serve", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_a_gpu_engine_without_a_gpu_per_replica_is_refused_naming_the_setting() -> None:
    engine = ENGINE.derive(device="gpu", kv_cache_space_gib=None, tensor_parallel_size=2)
    with pytest.raises(DeploymentConfigError, match="give --gpus-per-replica N") as caught:
        rayservice_manifest(engine, RaySettings(), OPTIONS)
    assert caught.value.parts == ("gpus_per_replica",)
    assert "at least the tensor parallel size, 2" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("68719476736", 64 << 30),
        ("64Gi", 64 << 30),
        ("1.5Ki", 1536),
        (".5Mi", 1 << 19),
        ("100G", 10**11),
        ("2k", 2000),
        ("5e10", 5 * 10**10),
        ("5E+3", 5000),
        ("1500m", 2),
        ("+3M", 3 * 10**6),
        ("1E", 10**18),
    ],
)
def test_a_memory_quantity_is_read_in_every_form_kubernetes_takes(text: str, size: int) -> None:
    assert quantity_bytes(text) == size


@pytest.mark.parametrize("text", ["32GiB", "100GB", "64 Gi", "1e", "Gi", "", "1.2.3", "64gi"])
def test_a_memory_quantity_kubernetes_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity_bytes(text)


@pytest.mark.parametrize("text", ["0", "-1Gi", "0e5"])
def test_a_memory_that_is_not_positive_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="memory must be positive"):
        quantity_bytes(text)


@given(st.integers(min_value=1, max_value=1 << 50))
def test_a_size_written_as_a_quantity_reads_back_rounded_up_to_a_mebibyte(size: int) -> None:
    assert size <= quantity_bytes(kubernetes_quantity(size)) < size + (1 << 20)
