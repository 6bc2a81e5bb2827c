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


def test_a_gpu_engine_with_tiers_and_no_gpu_per_replica_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*EMIT, *GPU, *TIERS, "--replicas", "2"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--device gpu and its KV tiers (cpu:64GiB, disk:/mnt/nvme:500GiB) need a GPU" in err
    assert "give --gpus-per-replica N" in err


@pytest.mark.parametrize(
    ("memory", "fix"), [("32GiB", "write 32Gi"), ("100GB", "write 100G"), ("96 Gi", "e.g. 96Gi")]
)
def test_a_worker_memory_kubernetes_would_refuse_is_refused_with_the_form_to_use(
    memory: str, fix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*EMIT, *GPU, *TIERS, *RAY, "--memory-per-replica", memory]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--memory-per-replica {memory}: not a Kubernetes quantity" in err
    assert fix in err


@pytest.mark.parametrize("memory", ["5e10", "6.8e10", "0.0625Ti"])
def test_a_worker_memory_in_any_kubernetes_form_is_checked_against_the_cpu_tier(
    memory: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*EMIT, *GPU, *TIERS, *RAY, "--memory-per-replica", memory]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--memory-per-replica {memory} does not hold the cpu KV tier (64Gi" in err


@pytest.mark.parametrize("memory", ["1e11", "100G", "0.1Ti", "102400Mi"])
def test_a_worker_memory_in_any_kubernetes_form_above_the_cpu_tier_is_taken_as_given(
    memory: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = emitted(capsys, "--memory-per-replica", memory)
    (container,) = worker(next(yaml.safe_load_all(text)))["spec"]["containers"]
    assert container["resources"]["limits"]["memory"] == memory


@pytest.mark.parametrize(
    ("tier", "extra", "clash"),
    [
        (
            "disk:/etc/prefixkit/tenants:5GiB",
            [],
            "be mounted at the same path as the mount of the tenants Secret (/etc/prefixkit/tenants)",
        ),
        ("disk:/etc/prefixkit:5GiB", [], "hide the mount of the tenants Secret"),
        (
            "disk:/models:5GiB",
            ["--model-claim", "models"],
            "be mounted at the same path as the mount of the model claim 'models' (/models)",
        ),
        ("disk:/models/Qwen3-8B:5GiB", [], "be mounted at the same path as the model folder"),
        ("disk:/models:5GiB", [], "hide the model folder (/models/Qwen3-8B)"),
        ("disk:/models/Qwen3-8B/kv:5GiB", [], "be mounted inside the model folder"),
    ],
    ids=["tenants", "tenants parent", "model claim", "model folder", "model parent", "in model"],
)
def test_a_disk_tier_on_another_mount_or_the_model_folder_is_refused_with_the_reason(
    tier: str, extra: list[str], clash: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tiers = ["--kv-tier", "cpu:64GiB", "--kv-tier", tier]
    assert main([*EMIT, *GPU, *tiers, *RAY, *extra]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"KV tier {tier!r}: its volume at" in err
    assert clash in err
    assert "give the tier a directory of its own" in err


def test_two_tier_volumes_one_inside_the_other_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    more = ["--kv-tier", "lmcache-disk:/mnt/nvme/lmcache:100GiB", "--single-tenant"]
    assert main([*EMIT, *GPU, *TIERS, *RAY, *more]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "be mounted inside the volume of KV tier 'disk:/mnt/nvme:500GiB' (/mnt/nvme)" in err


def test_a_tier_on_the_cpu_engine_is_refused_in_the_command_lines_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*EMIT, "--model", "/models/m", "--kv-tier", "cpu:64GiB"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "drop --kv-tier or use --device gpu" in err
    assert "device='gpu'" not in err


def test_a_cpu_block_size_is_refused_with_the_option_to_give(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*EMIT, "--model", "/models/m", "--block-size", "48"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--block-size 48 is not supported on CPU" in err
    assert "use --block-size 64" in err
