"""`serve_on_ray`: deploy prefixkit on a Ray cluster (a running one, or a local one it
starts), from prefixkit's own environment.

    with serve_on_ray(engine_config, RaySettings(replicas=2, tenants_file="tenants.toml"),
                      run_dir, nodes=2) as deployment:
        httpx.post(f"{deployment.url}/v1/completions", headers={"Authorization": "Bearer KEY"}, ...)

Ray, Ray Serve LLM and vLLM live in the Ray engine's virtualenv (`install.ensure_ray_engine`,
installed on first use), so the driver runs there as a child process
(``python -m prefixkit.engine_adapter.ray.cluster``, its log in ``RUN_DIR/ray-driver.log``).
Leaving the context stops the child, which deletes the app and shuts down the local cluster
it started; any process of that cluster still alive afterwards (found by its own temporary
directory on its command line) is stopped by PID. A cluster given by ``address`` is left
running, without the app.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.config import EngineConfig
from ..engine.setup_steps import Report, log_tail
from ..errors import ReplicaStartError
from ..serving.tenants import Tenants
from .install import ensure_ray_engine
from .settings import RaySettings, app_args, serve_http_options

__all__ = ["KV_AWARE_ENV", "RayDeployment", "serve_on_ray"]

# what Ray's KVAwareRouter needs in the cluster's and the driver's environment
KV_AWARE_ENV = {
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1",
    "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY": "1",
}
STATE_FILE = "ray-serve.json"


@dataclass(frozen=True)
class RayDeployment:
    """A running deployment: its URL, the Ray cluster's address, the replicas' actor names
    (namespace ``serve``), the Ray engine's interpreter, the run directory, and the local
    cluster's temporary directory (its logs: ``session_latest/logs``; None for a cluster
    given by address)."""

    url: str
    address: str
    replicas: list[str]
    ray_python: Path
    run_dir: Path
    settings: RaySettings
    ray_temp_dir: Path | None

    @property
    def log_path(self) -> Path:
        return self.run_dir / "ray-driver.log"


@contextlib.contextmanager
def serve_on_ray(
    engine: EngineConfig,
    settings: RaySettings,
    run_dir: Path,
    *,
    address: str | None = None,
    nodes: int = 1,
    report: Report = lambda message: None,
    start_timeout: float = 900.0,
    grace: float = 60.0,
    ray_python: Path | None = None,
) -> Iterator[RayDeployment]:
    """Deploy (module docstring); yields the running `RayDeployment`."""
    if settings.router != "kv-aware":
        Tenants.load(settings.tenants_file)  # a bad tenants file fails here, not in the cluster
    if address is None and nodes > 1 and "replica_slot" not in settings.replica_resources:
        settings = RaySettings(
            **{
                **settings.model_dump(),
                "replica_resources": {**settings.replica_resources, "replica_slot": 1.0},
            }
        )
    python = ray_python or ensure_ray_engine(report)
    run_dir.mkdir(parents=True, exist_ok=True)
    temp_dir = "/tmp/pk-ray-" + hashlib.sha256(str(run_dir).encode()).hexdigest()[:10]
    state_file = run_dir / STATE_FILE
    state_file.unlink(missing_ok=True)
    spec = {
        "app_args": app_args(engine, settings),
        "address": address,
        "nodes": nodes,
        "replicas": settings.most_replicas,
        "cpus_per_replica": settings.cpus_per_replica,
        "temp_dir": temp_dir,
        "http_host": settings.http_host,
        "http_port": settings.http_port,
        "http_options": serve_http_options(settings),
        "app_name": settings.app_name,
        "state_file": str(state_file),
    }
    spec_path = run_dir / "ray-spec.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    # RAY_TMPDIR: Ray's "current cluster" file goes to this cluster's own directory, so a
    # bare `ray.init()` elsewhere on the machine never finds (and joins) this cluster
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONUNBUFFERED": "1",
        "RAY_TMPDIR": temp_dir,
    }
    env.pop("PYTHONHASHSEED", None)  # it seeds the engines' block hashes
    if settings.router == "kv-aware":
        env |= KV_AWARE_ENV
    log_path = run_dir / "ray-driver.log"
    report(f"deploying on Ray ({settings.router} router, log {log_path})")
    with log_path.open("a") as log:
        child = subprocess.Popen(
            [str(python), "-m", "prefixkit.engine_adapter.ray.cluster", str(spec_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        url = f"http://{settings.http_host}:{settings.http_port}"
        state = _wait_ready(child, state_file, log_path, start_timeout, report, url)
        yield RayDeployment(
            url=state["url"],
            address=state["address"],
            replicas=list(state["replicas"]),
            ray_python=python,
            run_dir=run_dir,
            settings=settings,
            ray_temp_dir=Path(temp_dir) if address is None else None,
        )
    finally:
        _stop(child, grace)
        if address is None:
            _stop_leftovers(temp_dir)


def _wait_ready(
    child: subprocess.Popen[bytes],
    state_file: Path,
    log_path: Path,
    timeout: float,
    report: Report,
    url: str,
) -> dict[str, Any]:
    started = time.monotonic()
    while not state_file.exists():
        if child.poll() is not None:
            tail = log_tail(log_path)
            raise ReplicaStartError(
                f"the Ray driver exited with code {child.returncode} before the app was "
                f"ready; last lines of {log_path}:\n{tail}",
                replica=None,
                url=url,
                log_tail=tail,
            )
        elapsed = time.monotonic() - started
        if elapsed > timeout:
            tail = log_tail(log_path)
            raise ReplicaStartError(
                f"the Ray app was not ready after {timeout:.0f} s; last lines of "
                f"{log_path}:\n{tail}",
                replica=None,
                url=url,
                log_tail=tail,
            )
        report(f"starting the Ray cluster and the replicas ({elapsed:.0f} s)")
        time.sleep(1.0)
    state: dict[str, Any] = json.loads(state_file.read_text())
    return state


def _stop(child: subprocess.Popen[bytes], grace: float) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _stop_leftovers(temp_dir: str) -> None:
    """Stop, by PID, every process whose command line names this cluster's temp dir."""
    mine = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if temp_dir.encode() in cmdline:
            mine.append(int(entry.name))
    for pid in mine:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while mine and time.monotonic() < deadline:
        mine = [pid for pid in mine if Path(f"/proc/{pid}").exists()]
        time.sleep(0.2)
    for pid in mine:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
