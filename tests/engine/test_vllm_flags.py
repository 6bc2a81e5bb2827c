"""Every flag and variable the adapter can emit is accepted by the installed vLLM itself.

The engine's interpreter builds vLLM's own server argument parser (`make_arg_parser` on a
`FlexibleArgumentParser`, as `vllm.entrypoints.openai.api_server` does) and parses our argv;
GPU options are parsed by the same parser (the CPU build has the GPU flags).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from prefixkit.engine_adapter import EngineConfig, ensure_engine
from prefixkit.engine_adapter.engine import config as engine_config

pytestmark = pytest.mark.engine

PROBE = """
import importlib.util, inspect, json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
import vllm.envs
from vllm.config import KVTransferConfig
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.v1.kv_offload.factory import OffloadingSpecFactory
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory


def connectors(config):
    # each connector the engine would build (MultiConnector's children as it builds them),
    # resolved in vLLM's own registries; the parameters a secondary tier would not accept
    found = []
    children = [config]
    if config.kv_connector == "MultiConnector":
        children = [
            KVTransferConfig(**{"engine_id": config.engine_id, **child})
            for child in config.kv_connector_extra_config["connectors"]
        ]
    for child in children:
        entry = {
            "name": child.kv_connector,
            "registered": child.kv_connector in KVConnectorFactory._registry,
            "role": child.kv_role,
        }
        extra = child.kv_connector_extra_config
        if child.kv_connector == "OffloadingConnector":
            entry["spec"] = OffloadingSpecFactory.get_spec_cls(extra).__name__
            entry["tiers"] = []
            for tier in extra.get("secondary_tiers", []):
                tier_cls = SecondaryTierFactory.get_tier_class(tier)
                accepted = inspect.signature(tier_cls.__init__).parameters
                unknown = sorted(set(tier) - {"type", "module_path"} - set(accepted))
                entry["tiers"].append({"class": tier_cls.__name__, "unknown": unknown})
        found.append(entry)
    return found


def source(module):
    return open(importlib.util.find_spec(module).origin).read()


results = []
for argv in json.loads(sys.stdin.read()):
    parser = make_arg_parser(FlexibleArgumentParser(exit_on_error=False))
    try:
        namespace = parser.parse_args(argv)
    except (SystemExit, Exception) as error:
        results.append({"rejected": repr(error)})
        continue
    parsed = {key: repr(value) for key, value in vars(namespace).items()}
    if namespace.kv_transfer_config is not None:
        parsed["connectors"] = connectors(namespace.kv_transfer_config)
    results.append(parsed)
from vllm.v1.core import kv_cache_utils
from vllm.v1.kv_offload import file_mapper
connector = "vllm.distributed.kv_transfer.kv_connector.v1."
facts = {
    "block_hash_extra_keys": inspect.getsource(kv_cache_utils.generate_block_hash_extra_keys),
    "offloading_scheduler": source(connector + "offloading.scheduler"),
    "file_name": inspect.getsource(file_mapper.FileMapper.get_file_name),
    "lmcache_mp_connector": source(connector + "lmcache_mp_connector"),
}
print(json.dumps(
    {"results": results, "env": sorted(vllm.envs.environment_variables), "facts": facts}
))
"""

CPU = EngineConfig(
    model=Path("/models/smol"),
    served_model_name="smol",
    port=18000,
    block_size=64,
    prefix_caching_hash_algo="sha256_cbor",
    max_model_len=2048,
    dtype="float32",
    enforce_eager=True,
    num_gpu_blocks_override=40,
    kv_events_endpoint="ipc:///tmp/prefixkit-r0.ipc",
    kv_events_replay_endpoint="ipc:///tmp/prefixkit-r0-replay.ipc",
    kv_cache_space_gib=1,
    cpu_omp_threads_bind="0-1",
    cpu_reserved_cores=0,
    hash_seed="0",
    dev_endpoints=True,
    tool_call_parser="pythonic",
)
GPU = EngineConfig(
    model=Path("/models/smol"),
    device="gpu",
    block_size=16,
    gpu_memory_utilization=0.85,
    tensor_parallel_size=2,
    kv_offloading_size=8,
    kv_offloading_backend="native",
)

# every tier kind at once (LMCache's in-process disk only for a single tenant)
GPU_TIERS = EngineConfig(
    model=Path("/models/smol"),
    device="gpu",
    block_size=16,
    kv_tiers=(
        "cpu:64GiB",
        "disk:/mnt/nvme:500GiB",
        "lmcache:tcp://lmcache.internal:5555",
        "lmcache-disk:/mnt/lmcache:100GiB",
    ),
    single_tenant=True,
    kv_events_endpoint="ipc:///tmp/prefixkit-r0.ipc",
)
MULTI_TENANT_TIERS = GPU_TIERS.derive(
    kv_tiers=("cpu:64GiB", "disk:/mnt/nvme:500GiB"), single_tenant=False
)


def _server_args(config: EngineConfig) -> list[str]:
    return config.argv()[3:]  # drop interpreter, -m, module


@pytest.fixture(scope="module")
def parsed() -> dict[str, object]:
    python = ensure_engine()
    argvs = [
        _server_args(CPU),
        _server_args(GPU),
        [*_server_args(CPU), "--not-a-vllm-flag"],
        _server_args(GPU_TIERS),
        _server_args(MULTI_TENANT_TIERS),
    ]
    result = subprocess.run(
        [str(python), "-c", PROBE],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return output


def test_cpu_flags_parse_to_the_intended_values(parsed: dict[str, object]) -> None:
    cpu = parsed["results"][0]  # type: ignore[index]
    assert "rejected" not in cpu, cpu
    assert cpu["block_size"] == "64"
    assert cpu["prefix_caching_hash_algo"] == "'sha256_cbor'"
    assert cpu["enable_prefix_caching"] == "True"
    assert cpu["enable_prompt_tokens_details"] == "True"
    assert cpu["max_model_len"] == "2048"
    assert cpu["num_gpu_blocks_override"] == "40"
    assert "ipc:///tmp/prefixkit-r0-replay.ipc" in cpu["kv_events_config"]
    assert cpu["enable_auto_tool_choice"] == "True"
    assert cpu["tool_call_parser"] == "'pythonic'"


def test_gpu_flags_parse_to_the_intended_values(parsed: dict[str, object]) -> None:
    gpu = parsed["results"][1]  # type: ignore[index]
    assert "rejected" not in gpu, gpu
    assert gpu["gpu_memory_utilization"] == "0.85"
    assert gpu["tensor_parallel_size"] == "2"
    assert gpu["kv_offloading_size"] == "8.0"
    assert gpu["kv_offloading_backend"] == "'native'"


def test_the_probe_rejects_an_unknown_flag(parsed: dict[str, object]) -> None:
    assert "rejected" in parsed["results"][2]  # type: ignore[index]


def test_every_flag_in_the_adapter_is_covered_by_these_configs() -> None:
    source = Path(engine_config.__file__).read_text()
    emittable = set(re.findall(r'"(--[a-z][a-z0-9-]+)"', source))
    covered = {
        arg
        for arg in _server_args(CPU) + _server_args(GPU) + _server_args(GPU_TIERS)
        if arg.startswith("--")
    }
    assert emittable <= covered, f"add these flags to CPU or GPU above: {emittable - covered}"


def test_every_vllm_variable_in_the_environment_is_known_to_vllm(parsed: dict[str, object]) -> None:
    env = parsed["env"]
    assert isinstance(env, list)
    known = set(env)
    ours = {name for name in CPU.env() | GPU.env() | GPU_TIERS.env() if name.startswith("VLLM_")}
    assert ours <= known, ours - known


def test_every_tier_kind_parses_into_connectors_vllm_registers(parsed: dict[str, object]) -> None:
    tiers = parsed["results"][3]  # type: ignore[index]
    assert "rejected" not in tiers, tiers
    assert "MultiConnector" in tiers["kv_transfer_config"]
    assert [connector["name"] for connector in tiers["connectors"]] == [
        "OffloadingConnector",
        "LMCacheMPConnector",
        "LMCacheConnectorV1",
    ]
    assert all(c["registered"] and c["role"] == "kv_both" for c in tiers["connectors"])


def test_the_disk_tier_is_vllms_file_system_tier_under_its_tiering_spec(
    parsed: dict[str, object],
) -> None:
    native = parsed["results"][4]["connectors"][0]  # type: ignore[index]
    assert native["spec"] == "TieringOffloadingSpec"
    assert native["tiers"] == [{"class": "FileSystemTierManager", "unknown": []}]


def test_the_installed_vllm_keys_offloaded_blocks_by_the_salted_block_hash(
    parsed: dict[str, object],
) -> None:
    """The code facts the tiers' isolation rests on (engine_adapter/engine/kv_tiers.py
    SALT_IN_KEYS), read from the installed vLLM: the first block's hash takes cache_salt, the
    offloading keys are those block hashes, a disk tier's file is named by that hash, and
    the LMCache multi-process connector sends the request's salt to LMCache."""
    facts = parsed["facts"]
    assert isinstance(facts, dict)
    assert '("cache_salt", request.cache_salt)' in facts["block_hash_extra_keys"]
    assert "make_offload_key(request.block_hashes[" in facts["offloading_scheduler"]
    assert "get_offload_block_hash(key)" in facts["file_name"]
    assert "request.cache_salt" in facts["lmcache_mp_connector"]
    assert "cache_salt=" in facts["lmcache_mp_connector"]
