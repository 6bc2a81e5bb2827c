"""Run N vLLM replicas: launch, wait for health, log to files, restart the dead, stop cleanly.

    configs = replica_configs(base_config, count=2, run_dir=run, first_port=18010)
    with ReplicaSet(configs, run_dir=run) as replicas:        # returns once all are healthy
        for replica in replicas.replicas:
            replica.base_url, replica.kv_events_endpoint, replica.pid, replica.restarts

`ReplicaSet.start()` checks each config first (`preflight`: interpreter, model directory, free
port; `EngineConfigError` says what to change), launches every replica in its own process
group with output appended to `run_dir/replica<i>.log`, and waits for `GET /health` with a
timeout. A replica that exits or stays unhealthy raises `ReplicaStartError` with its last log
lines, after stopping the others. Once started, a monitor thread restarts a replica whose
process dies, after a backoff that doubles from `backoff_initial` up to `backoff_max`, and gives
up after `max_restarts` consecutive failures (the replica's `state` becomes "failed").
`stop()` sends SIGTERM to every replica's process group, then SIGKILL after `grace` seconds;
it is idempotent, runs on `__exit__` (including Ctrl-C) and at interpreter exit.

The state (URLs, PIDs, restarts, logs, KV-event endpoints) is written to
`run_dir/replicas.json` whenever it changes; `prefixkit serve status` reads it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

import httpx

from ..errors import EngineConfigError, PortInUseError, ReplicaStartError
from .config import EngineConfig
from .install import cpu_build_of
from .setup_steps import Report, log_tail

__all__ = [
    "Replica",
    "ReplicaSet",
    "ReplicaState",
    "port_is_free",
    "preflight",
    "replica_configs",
]

ReplicaState = Literal["stopped", "starting", "healthy", "restarting", "failed"]
STATE_FILE = "replicas.json"


def replica_configs(
    base: EngineConfig,
    count: int,
    run_dir: Path,
    first_port: int,
    kv_events: bool = True,
) -> list[EngineConfig]:
    """`count` copies of `base` on consecutive ports.

    With `kv_events`, replica i publishes on `ipc://<run_dir>/replica<i>.ipc` and answers
    replay requests on `ipc://<run_dir>/replica<i>-replay.ipc`.
    """
    if count < 1:
        raise EngineConfigError(
            f"replica count {count} must be at least 1", field="replicas", value=count
        )
    if first_port + count - 1 > 65535:
        raise EngineConfigError(
            f"replica ports {first_port}..{first_port + count - 1} exceed 65535: give a "
            "lower first port (--engine-port)",
            field="port",
            value=first_port,
        )
    configs = []
    for index in range(count):
        changes: dict[str, object] = {"port": first_port + index}
        if kv_events:
            socket_base = f"ipc://{run_dir.resolve()}/replica{index}"
            changes["kv_events_endpoint"] = f"{socket_base}.ipc"
            changes["kv_events_replay_endpoint"] = f"{socket_base}-replay.ipc"
        configs.append(base.derive(**changes))
    return configs


def preflight(config: EngineConfig) -> None:
    """Checks that need the machine: interpreter (a GPU configuration needs a GPU build
    of vLLM, not the CPU build), model directory, free port."""
    if config.device == "gpu":
        _check_gpu_build(config)
    if not os.access(config.python, os.X_OK):
        raise EngineConfigError(
            f"engine interpreter {config.python} does not exist: run `prefixkit serve --embedded` "
            "to install the embedded CPU engine, or set python= to a vLLM environment's python",
            field="python",
            value=config.python,
        )
    if not config.model.is_dir():
        raise EngineConfigError(
            f"model directory {config.model} does not exist: point model= at a local directory "
            "with config.json, weights and tokenizer (`prefixkit serve --embedded` prepares "
            "SmolLM2-135M-Instruct)",
            field="model",
            value=config.model,
        )
    if not (config.model / "config.json").is_file():
        raise EngineConfigError(
            f"model directory {config.model} has no config.json: point model= at a directory "
            "holding a Hugging Face model (config.json, weights, tokenizer)",
            field="model",
            value=config.model,
        )
    if not port_is_free(config.host, config.port):
        raise PortInUseError(
            f"port {config.port} on {config.host} is already in use: choose another port "
            f"(--engine-port for prefixkit serve, port= for an EngineConfig) or stop the "
            f"process listening on {config.base_url}",
            port=config.port,
            host=config.host,
        )


_GPU_ENGINE = (
    "install vLLM 0.32 for CUDA in a virtualenv of its own (python -m venv /opt/vllm && "
    "/opt/vllm/bin/pip install vllm==0.32.0) and give its interpreter: --python "
    "/opt/vllm/bin/python for prefixkit serve, python= for an EngineConfig"
)


def _check_gpu_build(config: EngineConfig) -> None:
    """Refuse a GPU configuration whose interpreter is missing or runs vLLM's CPU build
    (which would start, on CPU, with the GPU-only flags)."""
    what = "its KV tiers and " if config.kv_tiers else ""
    if not os.access(config.python, os.X_OK):
        raise EngineConfigError(
            f"device gpu: engine interpreter {config.python} does not exist: {_GPU_ENGINE}",
            field="python",
            value=config.python,
        )
    build = cpu_build_of(config.python)
    if build is not None:
        raise EngineConfigError(
            f"device gpu: engine interpreter {config.python} runs vLLM's CPU build "
            f"({build}, the embedded CPU engine), which cannot run {what}the GPU settings: "
            f"{_GPU_ENGINE}; or serve on CPU (--device cpu, without --kv-tier)",
            field="python",
            value=config.python,
        )


@dataclass
class Replica:
    """One supervised vLLM server process."""

    index: int
    config: EngineConfig
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    state: ReplicaState = "stopped"
    failures_in_a_row: int = field(default=0, repr=False)
    next_restart_at: float = field(default=0.0, repr=False)
    launched_at: float = field(default=0.0, repr=False)

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`: the replica's OpenAI-compatible server."""
        return self.config.base_url

    @property
    def kv_events_endpoint(self) -> str | None:
        """The ZMQ endpoint the replica publishes KV cache events on (None when off)."""
        return self.config.kv_events_endpoint

    @property
    def pid(self) -> int | None:
        """PID of the current server process (changes on restart)."""
        return self.process.pid if self.process is not None else None

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def is_healthy(self, timeout: float = 2.0) -> bool:
        """True when the process runs and `GET /health` answers 200."""
        if not self.is_alive():
            return False
        try:
            return httpx.get(f"{self.base_url}/health", timeout=timeout).status_code == 200
        except httpx.HTTPError:
            return False


class ReplicaSet:
    """Supervises replicas built from `configs` (see the module docstring)."""

    def __init__(
        self,
        configs: Sequence[EngineConfig],
        run_dir: Path,
        *,
        start_timeout: float = 600.0,
        grace: float = 10.0,
        max_restarts: int = 5,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        report: Report = lambda message: None,
    ) -> None:
        if not configs:
            raise EngineConfigError(
                "a replica set needs at least one config", field="configs", value=[]
            )
        _check_distinct(configs)
        self.run_dir = run_dir
        self.start_timeout = start_timeout
        self.grace = grace
        self.max_restarts = max_restarts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.report = report
        self.replicas = [
            Replica(index, config, run_dir / f"replica{index}.log")
            for index, config in enumerate(configs)
        ]
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    @property
    def base_urls(self) -> list[str]:
        return [replica.base_url for replica in self.replicas]

    def start(self) -> ReplicaSet:
        """Launch every replica and wait until all are healthy; raises on the first failure."""
        for replica in self.replicas:
            preflight(replica.config)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._stopping.clear()
        _LIVE_SETS.add(self)
        try:
            with self._lock:
                for replica in self.replicas:
                    self._launch(replica)
            self._wait_healthy(self.replicas)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        self._monitor = threading.Thread(
            target=self._watch, name="prefixkit-replica-monitor", daemon=True
        )
        self._monitor.start()
        return self

    def stop(self) -> None:
        """SIGTERM every replica's process group, SIGKILL after `grace` s. Idempotent."""
        self._stopping.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=5.0)
        with self._lock:
            live = [r for r in self.replicas if r.process is not None]
            for replica in live:
                _signal_group(replica.process, signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            # the server and its engine-core child share the group: wait for the whole group
            while any(_group_alive(r.process) for r in live) and time.monotonic() < deadline:
                time.sleep(0.2)
            for replica in live:
                assert replica.process is not None
                if _group_alive(replica.process):
                    self.report(f"replica {replica.index} ignored SIGTERM; sending SIGKILL")
                    _signal_group(replica.process, signal.SIGKILL)
                replica.process.wait()
                replica.state = "stopped"
            self._write_state()
        _LIVE_SETS.discard(self)

    def wait_healthy(self, timeout: float) -> None:
        """Block until every replica is healthy (e.g. after a restart); raises on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(r.state == "healthy" for r in self.replicas):
                    return
                failed = [r for r in self.replicas if r.state == "failed"]
            if failed:
                raise _start_error(failed[0], "gave up restarting")
            time.sleep(0.5)
        unhealthy = next(r for r in self.replicas if r.state != "healthy")
        raise ReplicaStartError(
            "replicas not healthy after "
            f"{timeout:.0f} s: {[(r.index, r.state) for r in self.replicas]}",
            replica=unhealthy.index,
            url=unhealthy.base_url,
            log_tail=log_tail(unhealthy.log_path),
        )

    def __enter__(self) -> ReplicaSet:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _launch(self, replica: Replica) -> None:
        config = replica.config
        env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        env.update(config.env())
        with replica.log_path.open("ab") as log:
            log.write(
                f"\n=== prefixkit: launch {replica.restarts} at {time.ctime()} ===\n".encode()
            )
            log.write((" ".join(config.argv()) + "\n").encode())
            log.flush()
            replica.process = subprocess.Popen(
                config.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # we, not the terminal's Ctrl-C, decide shutdown order
            )
        replica.state = "starting"
        replica.launched_at = time.monotonic()

    def _wait_healthy(self, replicas: Sequence[Replica]) -> None:
        deadline = time.monotonic() + self.start_timeout
        pending = list(replicas)
        started = time.monotonic()
        while pending:
            for replica in list(pending):
                if not replica.is_alive():
                    raise _start_error(replica, "exited during start-up")
                if replica.is_healthy():
                    replica.state = "healthy"
                    pending.remove(replica)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise _start_error(
                    pending[0], f"not healthy after {self.start_timeout:.0f} s (start_timeout)"
                )
            self.report(
                f"starting {len(replicas)} replica(s): {len(replicas) - len(pending)} healthy "
                f"({time.monotonic() - started:.0f} s)"
            )
            time.sleep(0.5)

    def _watch(self) -> None:
        while not self._stopping.wait(0.5):
            with self._lock:
                if self._stopping.is_set():
                    return
                changed = False
                for replica in self.replicas:
                    changed |= self._tend(replica)
                if changed:
                    self._write_state()

    def _tend(self, replica: Replica) -> bool:
        """One supervision step for `replica`; True when its state changed."""
        now = time.monotonic()
        if replica.state == "failed":
            return False
        hung = replica.state == "starting" and now - replica.launched_at > self.start_timeout
        if replica.state in ("healthy", "starting") and (hung or not replica.is_alive()):
            _signal_group(replica.process, signal.SIGKILL)
            code = replica.process.wait() if replica.process is not None else None
            replica.failures_in_a_row += 1
            if replica.failures_in_a_row > self.max_restarts:
                replica.state = "failed"
                self.report(
                    f"replica {replica.index} died {self.max_restarts + 1} times; giving up"
                )
                return True
            delay = min(
                self.backoff_max, self.backoff_initial * 2 ** (replica.failures_in_a_row - 1)
            )
            replica.next_restart_at = now + delay
            replica.state = "restarting"
            self.report(
                f"replica {replica.index} exited (code {code}); restarting in {delay:.0f} s"
            )
            return True
        if replica.state == "restarting" and now >= replica.next_restart_at:
            replica.restarts += 1
            self._launch(replica)
            return True
        if replica.state == "starting" and replica.is_healthy():
            replica.state = "healthy"
            replica.failures_in_a_row = 0
            self.report(f"replica {replica.index} is healthy again (restart {replica.restarts})")
            return True
        return False

    def _write_state(self) -> None:
        state = [
            {
                "index": r.index,
                "url": r.base_url,
                "pid": r.pid,
                "state": r.state,
                "restarts": r.restarts,
                "log": str(r.log_path),
                "kv_events_endpoint": r.kv_events_endpoint,
                "model": r.config.name,
            }
            for r in self.replicas
        ]
        with contextlib.suppress(OSError):
            (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def _start_error(replica: Replica, what: str) -> ReplicaStartError:
    code = replica.process.poll() if replica.process is not None else None
    exit_note = f" (exit code {code})" if code is not None else ""
    tail = log_tail(replica.log_path)
    return ReplicaStartError(
        f"replica {replica.index} at {replica.base_url} {what}{exit_note}.\n"
        f"last lines of {replica.log_path}:\n{tail}",
        replica=replica.index,
        url=replica.base_url,
        log_tail=tail,
    )


def _check_distinct(configs: Sequence[EngineConfig]) -> None:
    ports = [(c.host, c.port) for c in configs]
    if len(set(ports)) != len(ports):
        raise EngineConfigError(
            f"replicas share a host:port ({ports}): give each its own port",
            field="port",
            value=next(p for p in ports if ports.count(p) > 1)[1],
        )
    endpoints = [c.kv_events_endpoint for c in configs if c.kv_events_endpoint is not None]
    if len(set(endpoints)) != len(endpoints):
        raise EngineConfigError(
            f"replicas share a KV-event endpoint ({endpoints}): give each its own ipc path",
            field="kv_events_endpoint",
            value=next(e for e in endpoints if endpoints.count(e) > 1),
        )


def port_is_free(host: str, port: int) -> bool:
    """True when a server could bind `host:port` now (TIME_WAIT sockets do not count)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # uvicorn binds with SO_REUSEADDR: sockets in TIME_WAIT do not count as in use
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            if error.errno == errno.EADDRNOTAVAIL:
                raise EngineConfigError(
                    f"{host} is not an address of this machine, so nothing can listen on it: "
                    "give one of its own (127.0.0.1, or 0.0.0.0 for every interface)",
                    field="host",
                    value=host,
                ) from None
            raise
    return True


def _group_alive(process: subprocess.Popen[bytes] | None) -> bool:
    """True while any process of the replica's group exists (the leader is reaped as we go)."""
    if process is None:
        return False
    process.poll()
    try:
        os.killpg(process.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(process: subprocess.Popen[bytes] | None, sig: signal.Signals) -> None:
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


_LIVE_SETS: weakref.WeakSet[ReplicaSet] = weakref.WeakSet()


@atexit.register
def _stop_live_sets() -> None:
    for replica_set in list(_LIVE_SETS):
        replica_set.stop()
