"""`prefixkit serve --backend ray --emit kuberay --kv-tier ...`: the RayService runs the same
tiers as the local backend (the replicas' ``kv_transfer_config``), its worker pods hold the
cpu tier's host RAM and a volume per disk tier, and the whole manifest is the golden file
tests/data/kuberay/rayservice-kv-tiers.yaml (``PREFIXKIT_UPDATE_FIXTURES=1`` rewrites it:
read the diff), valid against KubeRay's CRD and Kubernetes' pod schema."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prefixkit.cli.main import main

DATA = Path(__file__).parents[1] / "data" / "kuberay"
GOLDEN = DATA / "rayservice-kv-tiers.yaml"
EMIT = ["serve", "--backend", "ray", "--emit", "kuberay", "--image", "registry.example/pk:1"]
GPU = ["--model", "/models/Qwen3-8B", "--device", "gpu", "--block-size", "16"]
TIERS = ["--kv-tier", "cpu:64GiB", "--kv-tier", "disk:/mnt/nvme:500GiB"]
RAY = ["--gpus-per-replica", "1", "--cpus-per-replica", "8", "--replicas", "2"]


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


def emitted(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main([*EMIT, *GPU, *TIERS, *RAY, *extra]) == 0
    return capsys.readouterr().out


def worker(manifest: dict[str, Any]) -> dict[str, Any]:
    (group,) = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    template: dict[str, Any] = group["template"]
    return template


def engine_kwargs(manifest: dict[str, Any]) -> dict[str, Any]:
    (app,) = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
    kwargs: dict[str, Any] = app["args"]["llm_config"]["engine_kwargs"]
    return kwargs


def test_the_manifest_with_tiers_is_the_golden_file(capsys: pytest.CaptureFixture[str]) -> None:
    text = emitted(capsys)
    if os.environ.get("PREFIXKIT_UPDATE_FIXTURES"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_the_manifest_with_tiers_is_valid_for_kuberay_and_kubernetes() -> None:
    manifest, policy = yaml.safe_load_all(GOLDEN.read_text())
    schema = json.loads((DATA / "ray.io_rayservices.v1.schema.json").read_text())
    jsonschema.Draft202012Validator(closed(schema["openAPIV3Schema"])).validate(manifest)
    version = kubernetes_validate.utils.latest_version()
    pod_template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "replicas"},
        "template": worker(manifest),
    }
    kubernetes_validate.validate(pod_template, version, strict=True)
    kubernetes_validate.validate(policy, version, strict=True)


def test_the_replicas_run_the_tiers_as_the_local_backend_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    manifest = next(yaml.safe_load_all(emitted(capsys)))
    transfer = engine_kwargs(manifest)["kv_transfer_config"]
    extra = transfer["kv_connector_extra_config"]
    assert transfer["kv_connector"] == "OffloadingConnector"
    assert extra["cpu_bytes_to_use"] == 64 << 30
    assert extra["secondary_tiers"][0]["root_dir"] == "/mnt/nvme"
    # the Ray app turns KV events on: the tiers publish theirs to the router
    assert extra["self_describing_kv_events"] is True
    assert extra["secondary_tiers"][0]["enable_kv_events"] is True


def test_a_worker_pod_holds_the_cpu_tier_in_its_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (container,) = worker(next(yaml.safe_load_all(emitted(capsys))))["spec"]["containers"]
    assert container["resources"]["requests"]["memory"] == "96Gi"  # 32Gi + the 64GiB tier
    assert container["resources"]["limits"]["memory"] == "96Gi"


def test_a_disk_tier_is_a_volume_of_its_size_at_its_path_on_the_workers_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    manifest = next(yaml.safe_load_all(emitted(capsys)))
    template = worker(manifest)
    assert {"name": "kv-tier-disk", "emptyDir": {"sizeLimit": "500Gi"}} in template["spec"][
        "volumes"
    ]
    (container,) = template["spec"]["containers"]
    assert {"name": "kv-tier-disk", "mountPath": "/mnt/nvme"} in container["volumeMounts"]
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    assert all(volume["name"] != "kv-tier-disk" for volume in head.get("volumes", []))


def test_lmcaches_in_process_disk_reaches_the_pods_environment_for_a_single_tenant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    more = ["--kv-tier", "lmcache-disk:/mnt/lmcache:100GiB", "--single-tenant"]
    manifest = next(yaml.safe_load_all(emitted(capsys, *more)))
    (app,) = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
    env = app["args"]["llm_config"]["runtime_env"]["env_vars"]
    assert env["LMCACHE_LOCAL_DISK"] == "file:///mnt/lmcache/"
    assert env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == "100"


def test_a_manifest_is_refused_for_a_tier_that_drops_the_salt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    more = ["--kv-tier", "lmcache-disk:/mnt/lmcache:100GiB"]
    assert main([*EMIT, *GPU, *TIERS, *RAY, *more]) == 2
    assert "does not keep tenants apart" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("memory", ["64Gi", "16Gi", "68719476736", "60G"])
def test_a_worker_memory_that_does_not_hold_the_cpu_tier_is_refused(
    memory: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*EMIT, *GPU, *TIERS, *RAY, "--memory-per-replica", memory]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--memory-per-replica {memory} does not hold the cpu KV tier (64Gi" in err
    assert "(without --memory-per-replica: 96Gi)" in err


def test_a_worker_memory_above_the_cpu_tier_is_taken_as_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = emitted(capsys, "--memory-per-replica", "80Gi")
    (container,) = worker(next(yaml.safe_load_all(text)))["spec"]["containers"]
    assert container["resources"]["limits"]["memory"] == "80Gi"
