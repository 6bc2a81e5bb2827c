"""SMG is launched on loopback, with a short grace period and a tree sized to the replicas."""

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from prefixkit.engine_adapter import RouterStartError
from prefixkit.engine_adapter.engine.metrics import CacheMetrics
from prefixkit.engine_adapter.serving.smg import (
    SmgSettings,
    launch_smg,
    smg_argv,
    smg_max_tree_size,
    stop_smg,
    wait_until_ready,
)


def _metrics(blocks: int | None, block_size: int | None = 32) -> CacheMetrics:
    return CacheMetrics(0.0, 0.0, 0.0, block_size, "sha256_cbor", blocks, True)


def test_tree_size_is_one_workers_kv_tokens_in_characters() -> None:
    assert smg_max_tree_size([_metrics(100), _metrics(50)]) == 100 * 32 * 4


def test_tree_size_follows_the_traffics_characters_per_token() -> None:
    assert smg_max_tree_size([_metrics(100)], chars_per_token=5.7) == 100 * 32 * 5.7


def test_a_ratio_that_is_not_positive_is_refused_saying_how_to_measure_it() -> None:
    with pytest.raises(ValueError, match="len\\(text\\) / tokens"):
        smg_max_tree_size([_metrics(100)], chars_per_token=0)


def test_tree_size_needs_the_cache_config_metric() -> None:
    with pytest.raises(ValueError, match="num_gpu_blocks"):
        smg_max_tree_size([_metrics(None)])


def test_every_port_is_on_loopback_with_a_short_grace() -> None:
    argv = smg_argv(SmgSettings(["http://127.0.0.1:18130"], port=18180, max_tree_size=1000))
    flags = dict(zip(argv[2::2], argv[3::2], strict=False))
    assert flags["--host"] == "127.0.0.1"
    assert flags["--prometheus-host"] == "127.0.0.1"
    assert flags["--prometheus-port"] == "18181"
    assert flags["--max-tree-size"] == "1000"
    assert int(flags["--shutdown-grace-period-secs"]) <= 5
    assert argv[-2:] == ["--worker-urls", "http://127.0.0.1:18130"]


def test_real_smg_starts_and_stops_promptly(tmp_path: Path) -> None:
    process = launch_smg(SmgSettings(["http://127.0.0.1:18139"], port=18182), tmp_path / "smg.log")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get("http://127.0.0.1:18182/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(f"SMG did not listen: {(tmp_path / 'smg.log').read_text()[-2000:]}")
    finally:
        started = time.monotonic()
        stop_smg(process)
    assert time.monotonic() - started < 8
    assert process.poll() is not None


def test_a_router_that_exits_at_start_carries_its_url_and_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "router.log"
    log.write_text("error: --worker-urls is required\n")
    with subprocess.Popen(["true"]) as process:
        process.wait()
        with pytest.raises(RouterStartError) as caught:
            wait_until_ready(process, "http://127.0.0.1:18183", 10.0, log)
    error = caught.value
    assert (error.router, error.url) == ("smg", "http://127.0.0.1:18183")
    assert error.log_tail == "error: --worker-urls is required"
