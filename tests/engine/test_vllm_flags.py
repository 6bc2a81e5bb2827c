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
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
import vllm.envs

results = []
for argv in json.loads(sys.stdin.read()):
    parser = make_arg_parser(FlexibleArgumentParser(exit_on_error=False))
    try:
        parsed = vars(parser.parse_args(argv))
    except (SystemExit, Exception) as error:
        results.append({"rejected": repr(error)})
        continue
    results.append({key: repr(value) for key, value in parsed.items()})
print(json.dumps({"results": results, "env": sorted(vllm.envs.environment_variables)}))
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


def _server_args(config: EngineConfig) -> list[str]:
    return config.argv()[3:]  # drop interpreter, -m, module


@pytest.fixture(scope="module")
def parsed() -> dict[str, object]:
    python = ensure_engine()
    argvs = [_server_args(CPU), _server_args(GPU), [*_server_args(CPU), "--not-a-vllm-flag"]]
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
    covered = {arg for arg in _server_args(CPU) + _server_args(GPU) if arg.startswith("--")}
    assert emittable <= covered, f"add these flags to CPU or GPU above: {emittable - covered}"


def test_every_vllm_variable_in_the_environment_is_known_to_vllm(parsed: dict[str, object]) -> None:
    env = parsed["env"]
    assert isinstance(env, list)
    known = set(env)
    ours = {name for name in CPU.env() | GPU.env() if name.startswith("VLLM_")}
    assert ours <= known, ours - known
