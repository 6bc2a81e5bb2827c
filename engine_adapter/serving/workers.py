"""Several router workers behind one port: ``Topology(router_workers=N)``, ``prefixkit serve
--router-workers N``.

    with RouterWorkers(WorkerSpec(settings, tenants, limits, host, port), 2, run_dir) as workers:
        workers.url, workers.pids, workers.restarts

Each worker is a process of its own (started with ``spawn``, in its own session, output
appended to ``run_dir/router-worker<i>.log``) running the whole serving app, the gateway
stage and the precise routing stage, on the same port: every worker binds its own
listening socket with ``SO_REUSEPORT`` and the kernel spreads new connections over them
(by a hash of the client's address and port; a kept-alive connection stays with its
worker). The parent holds the port with a socket bound the same way that never listens,
so a restarting worker finds it free. A worker only listens once its app has started, so
no connection waits on a worker that is starting.

Each worker follows every replica's KV events itself (its own ZMQ subscriptions and
replays), so each has the whole block index. What they share, through a small table in a
file mapped into every worker (`WorkerTable`, ``run_dir/router-workers.load``):

* per replica, each worker's requests in flight and queued prefill blocks: one row per
  worker, written only by its worker, read by the others at every decision
  (`RouterState.peers`), so a decision sees the whole fleet's load;
* per tenant, each worker's requests in flight (`SharedTenantSlots`): a tenant's bound
  holds across workers, checked and taken under a file lock that a dying worker drops.

* the gateway's counters (`metrics.SharedCounters`, ``run_dir/router-workers.counters``):
  one row per worker, summed by whichever worker answers ``GET /metrics``, kept by a
  worker that is restarted;
* every placement and its end (`placements.PlacementLog`,
  ``run_dir/router-workers.placements``): requests numbered across the workers, and
  before each decision a worker applies what the others placed since its last one, so
  its block index (blocks coming, LRU order), work shares and reuse model are the ones a
  single router would have. Two decisions taken at the same moment on two workers do not
  see each other.

Each worker keeps its own decision log (``decisions-<i>.jsonl``).

A monitor thread in the parent restarts a worker that dies, after a backoff that doubles
(from `BACKOFF_INITIAL_S` to `BACKOFF_MAX_S`) while it keeps dying within
`STEADY_S` of its start, and reports it; the dead worker's rows are zeroed and its
placement ring starts a new epoch first (its requests died with it: the others end them). `close` (or the end of the ``with`` block) asks every worker to
finish its requests and stop, then kills those still running after `grace` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..engine.setup_steps import Report, log_tail
from ..errors import PortInUseError, RouterStartError
from ..routing.router_state import Peers, Placement, RouterSettings, RouterState
from .app import serving_app
from .keepalive import served
from .limits import Limits, TenantSlots
from .metrics import COUNTERS_FILE, RouterCounters, SharedCounters
from .placements import PLACEMENTS_FILE, PeerEnded, PlacementLog, PlacementReader
from .refused import Refused
from .router import PreciseRoute
from .shared_file import SharedFile
from .tenant_usage import TenantUsage
from .tenants import Tenants

__all__ = [
    "BACKOFF_INITIAL_S",
    "BACKOFF_MAX_S",
    "STEADY_S",
    "WORKER_HEADER",
    "RouterWorkers",
    "SharedTenantSlots",
    "WorkerSpec",
    "WorkerTable",
    "join_peers",
    "named_worker",
    "peers",
    "run_worker",
]

log = logging.getLogger(__name__)

WORKER_HEADER = "x-prefixkit-worker"  # on every answer of a worker: its number
LOAD_FILE = "router-workers.load"
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 10.0
STEADY_S = 30.0  # a worker that ran this long before dying is restarted at once
PEER_CATCH_UP_S = 0.05  # an idle worker applies the others' placements this often
_CELL = 8  # bytes: an int64 or a float64


def _quiet(message: str) -> None:
    return None


class WorkerTable:
    """The load the workers share, in a file every worker maps into memory: per worker
    and replica its requests in flight (int64) and queued prefill blocks (float64), per
    worker and tenant its requests in flight (int64). Each cell has one writer, its
    worker (the parent zeroes a dead worker's); tenant slots are taken under `locked`."""

    def __init__(self, path: Path, workers: int, replicas: int, tenants: Sequence[str]) -> None:
        self.path = path
        self.workers = workers
        self.replicas = replicas
        self.tenants = list(tenants)
        loads = workers * replicas
        size = (2 * loads + workers * len(self.tenants)) * _CELL
        self._shared = SharedFile(path, size)
        view = memoryview(self._shared.map)
        self.inflight = view[: loads * _CELL].cast("q")
        self.queued = view[loads * _CELL : 2 * loads * _CELL].cast("d")
        self.tenant_inflight = view[2 * loads * _CELL :].cast("q")
        view.release()

    @classmethod
    def create(cls, path: Path, workers: int, replicas: int, tenants: Sequence[str]) -> WorkerTable:
        """A new table of zeros at `path` (an older file there is replaced)."""
        path.unlink(missing_ok=True)
        return cls(path, workers, replicas, tenants)

    def clear(self, worker: int) -> None:
        """Zero `worker`'s cells: it died, and its requests with it."""
        for replica in range(self.replicas):
            self.inflight[worker * self.replicas + replica] = 0
            self.queued[worker * self.replicas + replica] = 0.0
        for column in range(len(self.tenants)):
            self.tenant_inflight[worker * len(self.tenants) + column] = 0

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Exclusive among the processes that opened the table (released if one dies)."""
        return self._shared.locked()

    def close(self) -> None:
        for view in (self.inflight, self.queued, self.tenant_inflight):
            view.release()
        self._shared.close()


def peers(table: WorkerTable, placements: PlacementLog, worker: int) -> Peers:
    """The other workers as worker `worker` sees them (`RouterState.peers`): their load
    from `table`, their placements from `placements`, where it publishes its own."""
    return _Peers(table, placements, worker)


def join_peers(
    state: RouterState, table: WorkerTable, placements: PlacementLog, worker: int
) -> Peers:
    """Make `state` worker `worker`'s: it decides with the others' load and placements and
    applies their placements before each batch of KV events (a placement is made before
    its engine computes the blocks those events report)."""
    others = state.peers = peers(table, placements, worker)
    state.follower.before_batch = lambda: others.catch_up(state)
    return others


class _Peers:
    """`Peers` for worker `worker` of a `WorkerTable` and a `PlacementLog`."""

    def __init__(self, table: WorkerTable, placements: PlacementLog, worker: int) -> None:
        self.table = table
        self.placements = placements
        self.reader = PlacementReader(placements, worker)
        self.worker = worker
        self.own = worker * table.replicas
        self.others = [w * table.replicas for w in range(table.workers) if w != worker]

    def inflight(self, replica: int) -> int:
        cells = self.table.inflight
        return sum(cells[row + replica] for row in self.others)

    def queued_blocks(self, replica: int) -> float:
        cells = self.table.queued
        return sum(cells[row + replica] for row in self.others)

    def publish(self, replica: int, inflight: int, queued_blocks: float) -> None:
        self.table.inflight[self.own + replica] = inflight
        self.table.queued[self.own + replica] = queued_blocks

    def next_request(self) -> int:
        return self.placements.next_request()

    def placed(self, placement: Placement, routed: bool) -> None:
        self.placements.placed(
            self.worker,
            placement.replica,
            placement.hashes,
            placement.run,
            placement.request,
            routed,
        )

    def ended(self, placement: Placement) -> None:
        self.placements.ended(self.worker, placement.replica, placement.request)

    def catch_up(self, state: RouterState) -> None:
        for news in self.reader.news():
            if isinstance(news, PeerEnded):
                state.peer_ended(news.replica, news.hashes)
            else:
                state.peer_placed(news.replica, news.hashes, news.run, news.request, news.routed)


class SharedTenantSlots(TenantSlots):
    """`TenantSlots` whose count is the sum over every worker of a `WorkerTable`: a
    tenant's ``max_inflight_per_tenant`` bounds its requests on all workers together."""

    def __init__(self, table: WorkerTable, worker: int, per_tenant: int) -> None:
        super().__init__(per_tenant)
        self.table = table
        self.columns = {tenant: column for column, tenant in enumerate(table.tenants)}
        width = len(table.tenants)
        self.own = worker * width
        self.rows = [w * width for w in range(table.workers)]

    @contextlib.contextmanager
    def slot(self, tenant: str | None) -> Iterator[Refused | None]:
        column = None if tenant is None else self.columns.get(tenant)
        if tenant is None or column is None:  # no tenant, or one the table does not know
            with super().slot(tenant) as refused:
                yield refused
            return
        cells = self.table.tenant_inflight
        with self.table.locked():
            full = sum(cells[row + column] for row in self.rows) >= self.per_tenant
            if not full:
                cells[self.own + column] += 1
        if full:
            yield Refused(
                429,
                f"tenant {tenant!r} has {self.per_tenant} requests in flight, the most this "
                "deployment allows: wait for one to end",
                "rate_limit_exceeded",
            )
            return
        try:
            yield None
        finally:
            cells[self.own + column] -= 1  # this worker's cell: no other writer


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker serves: the precise router's settings, the gateway's tenants
    (None: no gateway stage) and limits, and the address all workers share."""

    settings: RouterSettings
    tenants: Tenants | None
    limits: Limits
    host: str
    port: int


def named_worker(app: ASGIApp, worker: int) -> ASGIApp:
    """`app` with ``x-prefixkit-worker: <worker>`` on every answer."""
    header = (WORKER_HEADER.encode(), str(worker).encode())

    async def named(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        await app(scope, receive, sending)

    return named


def _reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` with ``SO_REUSEPORT`` (not listening yet)."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((address, port))
    except BaseException:
        sock.close()
        raise
    return sock


def run_worker(
    spec: WorkerSpec, worker: int, workers: int, run_dir: Path, ready: Connection, life: Connection
) -> None:
    """A worker process: the serving app with the precise routing stage on the shared
    port, until the parent closes `life` (or dies); `ready` gets its pid once it listens."""
    os.setsid()  # the parent, not the terminal's Ctrl-C, decides when workers stop
    with (run_dir / f"router-worker{worker}.log").open("ab", buffering=0) as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    tenants = [] if spec.tenants is None else spec.tenants.tenant_ids
    table = WorkerTable(run_dir / LOAD_FILE, workers, len(spec.settings.replica_urls), tenants)
    settings = spec.settings
    if settings.decision_log is not None:
        decisions = settings.decision_log.with_name(f"decisions-{worker}.jsonl")
        settings = dataclasses.replace(settings, decision_log=decisions)
    state = RouterState(settings)
    placements = PlacementLog(run_dir / PLACEMENTS_FILE, workers)
    others = join_peers(state, table, placements, worker)
    app = serving_app(PreciseRoute(state), spec.tenants, spec.limits)
    app.slots = SharedTenantSlots(table, worker, spec.limits.max_inflight_per_tenant)
    counters = SharedCounters(run_dir / COUNTERS_FILE, workers, worker, tenants)
    app.usage = TenantUsage(counters)
    app.router_counts = RouterCounters(counters)
    server = served(
        named_worker(app, worker),
        spec.host,
        spec.port,
        header_timeout_s=spec.limits.header_timeout_s,
    )
    listener = _reuseport_socket(spec.host, spec.port)

    def watch_parent() -> None:
        with contextlib.suppress(EOFError, OSError):
            life.recv()
        server.should_exit = True

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()

    async def served_until_stopped() -> int:
        try:
            await server.serve(sockets=[listener])
        except SystemExit as exit:  # uvicorn's answer to an app that failed to start
            return exit.code if isinstance(exit.code, int) else 1
        return 0

    async def follow_peers() -> None:
        """Apply the other workers' placements while this one routes nothing, so that
        its next decision has little to catch up on and no ring outruns it."""
        while True:
            await asyncio.sleep(PEER_CATCH_UP_S)
            others.catch_up(state)

    async def serve() -> int:
        following = asyncio.ensure_future(follow_peers())
        serving = asyncio.ensure_future(served_until_stopped())
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            ready.send(os.getpid())
        try:
            return await serving
        finally:
            following.cancel()

    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        code = runner.run(serve())
    sys.exit(code)


@dataclass
class _Worker:
    process: BaseProcess
    life: Connection  # closed by the parent: the worker stops
    started: float
    backoff_s: float = BACKOFF_INITIAL_S


class RouterWorkers:
    """`count` worker processes serving `spec` on one port (module docstring), started on
    entry (all listening) and stopped on exit."""

    def __init__(
        self,
        spec: WorkerSpec,
        count: int,
        run_dir: Path,
        *,
        start_timeout: float = 60.0,
        grace: float = 10.0,
        report: Report = _quiet,
    ) -> None:
        self.spec = spec
        self.count = count
        self.run_dir = run_dir
        self.start_timeout = start_timeout
        self.grace = grace
        self.report = report
        self.restarts = [0] * count
        self._context = multiprocessing.get_context("spawn")
        self._workers: list[_Worker | None] = [None] * count
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._table: WorkerTable | None = None
        self._placements: PlacementLog | None = None
        self._reserved: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://{self.spec.host}:{self.spec.port}"

    @property
    def pids(self) -> list[int | None]:
        """Each worker's process id now (None while it is down)."""
        with self._lock:
            return [None if w is None else w.process.pid for w in self._workers]

    def __enter__(self) -> RouterWorkers:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start every worker and return once each listens; raises `RouterStartError`
        (after stopping the others) when one exits or is not listening within
        `start_timeout`."""
        spec = self.spec
        try:
            self._reserved = _reuseport_socket(spec.host, spec.port)
        except OSError as error:
            raise PortInUseError(
                f"port {spec.port} on {spec.host} cannot be bound for the router workers "
                f"({error}): choose another --port, or stop the process listening there",
                port=spec.port,
                host=spec.host,
            ) from error
        tenants = [] if spec.tenants is None else spec.tenants.tenant_ids
        self._table = WorkerTable.create(
            self.run_dir / LOAD_FILE, self.count, len(spec.settings.replica_urls), tenants
        )
        SharedCounters.create(self.run_dir / COUNTERS_FILE, self.count, tenants)
        self._placements = PlacementLog.create(self.run_dir / PLACEMENTS_FILE, self.count)
        try:
            launched = [self._launch(worker) for worker in range(self.count)]
            for worker, ready in enumerate(launched):
                self._await_ready(worker, ready, raise_error=True)
        except BaseException:
            self.close()
            raise
        self._monitor = threading.Thread(
            target=self._watch, name="router-workers-monitor", daemon=True
        )
        self._monitor.start()

    def _launch(self, worker: int) -> Connection:
        """Start worker `worker`; the connection its pid arrives on once it listens."""
        ready_in, ready_out = self._context.Pipe(duplex=False)
        life_in, life_out = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_worker,
            args=(self.spec, worker, self.count, self.run_dir, ready_out, life_in),
            name=f"prefixkit-router-worker-{worker}",
            daemon=False,
        )
        process.start()
        ready_out.close()
        life_in.close()
        with self._lock:
            self._workers[worker] = _Worker(process, life_out, time.monotonic())
        return ready_in

    def _await_ready(self, worker: int, ready: Connection, *, raise_error: bool) -> bool:
        """Wait until worker `worker` listens; False (or `RouterStartError`) if it exits,
        stays silent for `start_timeout` or the workers are stopping."""
        entry = self._workers[worker]
        assert entry is not None
        deadline = time.monotonic() + self.start_timeout
        try:
            while time.monotonic() < deadline and not self._stopping.is_set():
                if not wait([ready, entry.process.sentinel], timeout=0.1):
                    continue
                if ready.poll():
                    try:
                        ready.recv()
                        return True
                    except EOFError:  # it exited before listening
                        break
                if not entry.process.is_alive():
                    break
        finally:
            ready.close()
        if not raise_error:
            return False
        log_path = self.run_dir / f"router-worker{worker}.log"
        code = entry.process.exitcode
        what = "did not listen" if code is None else f"exited with code {code}"
        raise RouterStartError(
            f"router worker {worker} {what} within {self.start_timeout:g} s of its start; its "
            f"log ({log_path}) ends with:\n{log_tail(log_path)}",
            router="precise",
            url=self.url,
            log_tail=log_tail(log_path),
        )

    def _watch(self) -> None:
        """Restart a worker that dies, until the workers are stopping."""
        while not self._stopping.is_set():
            with self._lock:
                running = [w for w in self._workers if w is not None]
            wait([w.process.sentinel for w in running], timeout=0.2)
            for worker, entry in enumerate(list(self._workers)):
                if self._stopping.is_set():
                    return
                if entry is None or entry.process.is_alive():
                    continue
                self._restart(worker, entry)

    def _restart(self, worker: int, dead: _Worker) -> None:
        code = dead.process.exitcode
        assert self._table is not None
        self._table.clear(worker)  # its requests in flight died with it
        assert self._placements is not None
        self._placements.restarted(worker)  # the others forget its placements
        dead.life.close()
        lived = time.monotonic() - dead.started
        backoff = 0.0 if lived >= STEADY_S else dead.backoff_s
        message = (
            f"router worker {worker} (pid {dead.process.pid}) exited with code {code} after "
            f"{lived:.1f} s: restarting it"
            + (f" in {backoff:g} s" if backoff else "")
            + "; the other workers keep serving"
        )
        log.warning("%s", message)
        self.report(message)
        if self._stopping.wait(backoff):
            return
        self.restarts[worker] += 1
        ready = self._launch(worker)
        entry = self._workers[worker]
        assert entry is not None
        entry.backoff_s = (
            BACKOFF_INITIAL_S if lived >= STEADY_S else min(2 * dead.backoff_s, BACKOFF_MAX_S)
        )
        if self._await_ready(worker, ready, raise_error=False):
            self.report(f"router worker {worker} is serving again (pid {entry.process.pid})")

    def close(self) -> None:
        """Stop every worker (idempotent): each finishes its requests in flight, for at
        most `grace` seconds, then is killed."""
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join()
            self._monitor = None
        with self._lock:
            entries = [w for w in self._workers if w is not None]
            self._workers = [None] * self.count
        for entry in entries:
            entry.life.close()
        deadline = time.monotonic() + self.grace
        for entry in entries:
            entry.process.join(max(0.0, deadline - time.monotonic()))
        for entry in entries:
            if entry.process.is_alive():
                entry.process.kill()
                entry.process.join(5.0)
        if self._table is not None:
            self._table.close()
            self._table.path.unlink(missing_ok=True)
            self._table = None
            (self.run_dir / COUNTERS_FILE).unlink(missing_ok=True)
        if self._placements is not None:
            self._placements.close()
            self._placements.path.unlink(missing_ok=True)
            self._placements = None
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None
