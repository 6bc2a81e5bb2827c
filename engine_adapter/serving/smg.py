"""Launch SMG (Shepherd Model Gateway, PyPI `smg`) `cache_aware` in front of the replicas.

    tree = smg_max_tree_size([CacheMetrics...])     # from each replica's /metrics
    process = launch_smg(SmgSettings(worker_urls=urls, port=18180, max_tree_size=tree))

`--max-tree-size` bounds SMG's approximate tree of routing history. Its
default (67,108,864) is far above what small replicas can hold, so SMG would
keep believing in blocks the engines evicted long ago. We derive it from the
replicas' real KV capacity: ``num_gpu_blocks x block_size`` tokens of the
largest replica (from ``vllm:cache_config_info``) in the unit SMG counts,
characters for HTTP workers, at `CHARS_PER_TOKEN` = 4 characters per token
(the usual figure for English BPE text) unless the traffic's own ratio is given
(`prefixkit serve --smg-chars-per-token`). SMG's tree is one per model, but the
limit is per worker: its `evict_tenant_by_size` trims each worker's share of
the tree, least recently used leaves first, to `--max-tree-size`. Every port (router, Prometheus) is on loopback,
and the shutdown grace period is short so `prefixkit serve` stops promptly.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prefixkit.sdk import MissingExtraError

from ..engine.metrics import CacheMetrics
from ..engine.setup_steps import log_tail
from ..errors import RouterStartError

__all__ = [
    "CHARS_PER_TOKEN",
    "SmgSettings",
    "launch_smg",
    "smg_argv",
    "smg_executable",
    "smg_max_tree_size",
    "stop_smg",
    "wait_until_ready",
]

CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class SmgSettings:
    worker_urls: Sequence[str]
    port: int
    prometheus_port: int | None = None
    host: str = "127.0.0.1"
    policy: str = "cache_aware"
    max_tree_size: int | None = None
    shutdown_grace_s: int = 2
    log_level: str = "warn"


def smg_max_tree_size(
    replicas: Sequence[CacheMetrics], chars_per_token: float = CHARS_PER_TOKEN
) -> int:
    """SMG's per-worker tree budget (characters): the largest replica's KV capacity."""
    if not 0 < chars_per_token < math.inf:
        raise ValueError(
            f"characters per token must be a positive number, got {chars_per_token}: "
            "measure it as len(text) / tokens on a sample of your traffic"
        )
    tokens = 0
    for metrics in replicas:
        if metrics.num_blocks is None or metrics.block_size is None:
            raise ValueError(
                "a replica's /metrics has no vllm:cache_config_info num_gpu_blocks/block_size: "
                "wait until it is healthy, or pass max_tree_size explicitly"
            )
        tokens = max(tokens, metrics.num_blocks * metrics.block_size)
    return round(tokens * chars_per_token)


def smg_executable() -> str:
    """The `smg` command (on PATH, or beside this Python); raises `MissingExtraError`."""
    found = shutil.which("smg") or str(Path(sys.executable).parent / "smg")
    if not Path(found).exists():
        raise MissingExtraError(
            "the SMG router needs the `smg` command, which this installation lacks: "
            "pip install 'prefixkit[serve]' (or give --router precise)"
        )
    return found


def smg_argv(settings: SmgSettings) -> list[str]:
    """`smg launch ...` for `settings` (the executable first)."""
    prometheus_port = settings.prometheus_port or settings.port + 1
    argv = [
        smg_executable(),
        "launch",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--prometheus-host",
        settings.host,
        "--prometheus-port",
        str(prometheus_port),
        "--policy",
        settings.policy,
        "--shutdown-grace-period-secs",
        str(settings.shutdown_grace_s),
        "--log-level",
        settings.log_level,
    ]
    if settings.max_tree_size is not None:
        argv += ["--max-tree-size", str(settings.max_tree_size)]
    return [*argv, "--worker-urls", *settings.worker_urls]


def launch_smg(settings: SmgSettings, log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start SMG in its own process group (stop it with `stop_smg`)."""
    with contextlib.ExitStack() as stack:
        # the child holds its own copy of the log's descriptor: the parent's is closed here
        output = stack.enter_context(log.open("ab")) if log is not None else subprocess.DEVNULL
        return subprocess.Popen(
            smg_argv(settings), stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_smg(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM its process group, SIGKILL after `timeout` seconds."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until_ready(
    process: subprocess.Popen[bytes], url: str, timeout: float, log: Path | None = None
) -> None:
    """Wait until SMG at `url` answers ``/v1/models``; raises `RouterStartError` (with the
    last lines of `log`) if it exits or is not ready within `timeout` seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_tail(log) if log is not None else ""
            shown = f"\nlast lines of {log}:\n{tail}" if log is not None else ""
            raise RouterStartError(
                f"SMG at {url} exited during start-up{shown}", router="smg", url=url, log_tail=tail
            )
        try:
            if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RouterStartError(
        f"SMG at {url} was not ready after {timeout:.0f} s",
        router="smg",
        url=url,
        log_tail=log_tail(log) if log is not None else "",
    )
