"""A deployment: replicas -> router -> gateway, assembled and torn down as one.

    topology = Topology(replicas=2, router="precise", port=8000)
    with deploy(prepare_embedded(), topology, tenants=Tenants.load(path), run_dir=run) as d:
        ...  # clients send requests to d.url; d.replicas supervises the vLLM processes

`deploy` starts, in order, and stops in reverse (also on Ctrl-C or an error):

1. the replicas: from an `EngineConfig`, ``topology.replicas`` vLLM processes on
   consecutive ports from ``topology.engine_port`` (`ReplicaSet`: healthy on entry,
   restarted if they die), each publishing KV events on an ipc socket in `run_dir`; or
   replicas already running, given as `ReplicaEndpoint`s (tests, benches, a fleet run
   elsewhere);
2. with more than one replica, the router: ``"smg"``, real SMG ``cache_aware`` (PyPI
   ``smg``) on ``topology.router_port`` (and the port after it, its Prometheus metrics),
   its tree sized from the replicas' KV capacity (`smg.smg_max_tree_size`), log in
   ``run_dir/router.log``; or ``"precise"``, prefixkit's KV-event router, which runs
   inside the serving app (with ``topology.decision_log``, every decision is appended
   to ``run_dir/decisions.jsonl``);
3. the serving app (`app.serving_app`) on ``topology.host:topology.port``: the tenant
   gateway stage when `tenants` is given, then the routing stage. A single replica
   without tenants needs no app: the deployment's URL is the replica's own. With
   ``topology.router_workers`` above 1 (the precise router only), that many worker
   processes each run the serving app on that port (`workers.RouterWorkers`: each
   follows every replica's KV events, they share their load, a dead one is restarted);
   otherwise the app runs in a thread of this process.

`Topology` checks that its parts fit together when it is made, and `deploy` that the
replicas can do what the router needs, before anything starts (`DeploymentConfigError`,
naming the option to change); a port taken by another process is a `PortInUseError`.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import httpx
from prefixkit.sdk import DEFAULT_NONE_HASH_SEED, HashAlgo, VllmVersion, vllm_version_of
from prefixkit.sdk.errors import UsageError

from ..engine.config import EngineConfig
from ..engine.metrics import CacheMetrics, fetch_cache_metrics, fetch_engine_version
from ..engine.replicas import ReplicaSet, port_is_free, replica_configs
from ..engine.setup_steps import Report
from ..errors import DeploymentConfigError, PortInUseError
from ..routing.router_state import RouterSettings, RouterState
from .app import serving_app
from .keepalive import served_in_thread
from .limits import Limits
from .router import DirectRoute, PreciseRoute, Routing, SmgRoute
from .smg import (
    CHARS_PER_TOKEN,
    SmgSettings,
    launch_smg,
    smg_executable,
    smg_max_tree_size,
    stop_smg,
    wait_until_ready,
)
from .tenants import Tenants
from .workers import RouterWorkers, WorkerSpec

__all__ = ["ROUTERS", "Deployment", "ReplicaEndpoint", "RouterName", "Topology", "deploy"]

RouterName = Literal["smg", "precise"]
ROUTERS: tuple[RouterName, ...] = ("smg", "precise")
_REPRODUCIBLE = ("sha256", "sha256_cbor")  # block hashes a router can compute itself


def _quiet(message: str) -> None:
    return None


@dataclass(frozen=True)
class ReplicaEndpoint:
    """A running replica as the routers see it: its URL, where it publishes KV events
    (None: it does not), how it hashes blocks, and the model folder it loads (the
    precise router tokenizes prompts from it itself; None: it asks the replica)."""

    url: str
    kv_events: str | None = None
    kv_events_replay: str | None = None
    kv_topic: str = "kv"
    block_size: int = 32
    hash_algo: str = "sha256_cbor"
    hash_seed: str | None = None  # PYTHONHASHSEED of the engine; None: vLLM's default seed
    model: Path | None = None  # the model folder it loads (None: not known to the router)

    @classmethod
    def of(cls, config: EngineConfig) -> ReplicaEndpoint:
        """The endpoint of a replica launched from `config`."""
        return cls(
            url=config.base_url,
            kv_events=config.kv_events_endpoint,
            kv_events_replay=config.kv_events_replay_endpoint,
            kv_topic=config.kv_events_topic,
            block_size=config.block_size,
            hash_algo=config.prefix_caching_hash_algo,
            hash_seed=config.hash_seed,
            model=config.model,
        )


@dataclass(frozen=True)
class Topology:
    """How the parts are laid out: replica count, router, ports and router options."""

    replicas: int = 1
    router: RouterName = "smg"
    host: str = "127.0.0.1"
    port: int = 8000  # the serving app (gateway)
    engine_port: int = 8100  # the first replica's, when `deploy` launches them
    router_port: int = 8090  # SMG's, and the next port its Prometheus metrics
    decision_log: bool = False  # the precise router appends each decision to a file
    smg_chars_per_token: float | None = None  # sizes SMG's tree; None: CHARS_PER_TOKEN
    router_workers: int = 1  # processes serving the app on `port` (precise router only)
    # the precise router's weight of a block by the tier holding it (GPU, CPU, DISK): the
    # share of its prefill a hit there saves (`RouterSettings.savings`; all 1.0: tier-blind)
    tier_savings: tuple[float, ...] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise DeploymentConfigError(
                f"--replicas {self.replicas}: give at least 1", parts=("replicas",)
            )
        if self.router not in ROUTERS:
            raise DeploymentConfigError(
                f"unknown router {self.router!r}: use {' or '.join(ROUTERS)}", parts=("router",)
            )
        if self.decision_log and (self.replicas < 2 or self.router != "precise"):
            raise DeploymentConfigError(
                "--decision-log logs the precise router's decisions: "
                "give --replicas 2 or more and --router precise, or drop --decision-log",
                parts=("decision_log", "replicas", "router"),
            )
        if self.router_workers < 1:
            raise DeploymentConfigError(
                f"--router-workers {self.router_workers}: give at least 1",
                parts=("router_workers",),
            )
        if self.router_workers > 1 and (self.replicas < 2 or self.router != "precise"):
            raise DeploymentConfigError(
                f"--router-workers {self.router_workers} runs that many precise routers on "
                "one port: give --replicas 2 or more and --router precise, or drop "
                "--router-workers",
                parts=("router_workers", "replicas", "router"),
            )
        self._check_tier_savings()
        if self.tier_savings != (1.0, 1.0, 1.0) and self.router != "precise":
            raise DeploymentConfigError(
                "--tier-savings weighs blocks in the precise router's decision: give "
                "--router precise, or drop it",
                parts=("tier_savings", "router"),
            )
        ratio = self.smg_chars_per_token
        if ratio is not None and (
            self.replicas < 2 or self.router != "smg" or not 0 < ratio < math.inf
        ):
            raise DeploymentConfigError(
                f"--smg-chars-per-token {ratio} sizes SMG's tree: give a positive ratio "
                "(len(text) / tokens of your traffic) with --replicas 2 or more and "
                "--router smg, or drop it",
                parts=("smg_chars_per_token", "replicas", "router"),
            )

    def _check_tier_savings(self) -> None:
        """Refuse savings the router refuses, here rather than after the replicas started;
        pad them as `RouterSettings` does (the tiers not given save what the last one
        given saves)."""
        try:
            savings = tuple(float(value) for value in self.tier_savings)
        except (TypeError, ValueError):
            savings = ()
        if not 1 <= len(savings) <= 3 or not all(
            math.isfinite(value) and value <= 1.0 for value in savings
        ):
            raise DeploymentConfigError(
                f"tier_savings {tuple(self.tier_savings)!r}: give 1 to 3 finite fractions "
                "of at most 1.0, fastest tier first (GPU, CPU, DISK), e.g. (1.0, 0.9, 0.4) "
                "(--tier-savings 1,0.9,0.4); all 1.0 routes tier-blind",
                parts=("tier_savings",),
            )
        object.__setattr__(self, "tier_savings", savings + savings[-1:] * (3 - len(savings)))

    @property
    def routed(self) -> bool:
        """Whether a router stands in front of the replicas."""
        return self.replicas > 1

    @property
    def uses_smg(self) -> bool:
        return self.routed and self.router == "smg"

    def ports(self, launching: bool, app: bool) -> dict[str, int]:
        """Each role's port (`launching`: deploy starts the replicas; `app`: the serving
        app runs); raises `DeploymentConfigError` when two roles would share one."""
        roles: dict[str, int] = {}
        if launching:
            roles |= {f"replica {i}": self.engine_port + i for i in range(self.replicas)}
        if self.uses_smg:
            roles |= {"router": self.router_port, "router metrics": self.router_port + 1}
        if app:
            roles["gateway"] = self.port
        owners: dict[int, str] = {}
        for role, port in roles.items():
            if port in owners:
                raise DeploymentConfigError(
                    f"the {role} and the {owners[port]} would both use port {port}: "
                    "change --port, --router-port or --engine-port",
                    parts=(_port_setting(owners[port]), _port_setting(role)),
                    port=port,
                )
            owners[port] = role
        return roles

    def check_free(self, launching: bool, app: bool) -> None:
        """Raise `PortInUseError` if another process holds a port of the deployment."""
        for role, port in self.ports(launching, app).items():
            host = self.host if role == "gateway" else "127.0.0.1"
            if not port_is_free(host, port):
                option = {"gateway": "--port", "router": "--router-port"}.get(
                    role, "--router-port" if role == "router metrics" else "--engine-port"
                )
                raise PortInUseError(
                    f"the {role}'s port {port} on {host} is already in use: choose another "
                    f"{option}, or stop the process listening there",
                    port=port,
                    host=host,
                )


def _port_setting(role: str) -> str:
    """The `Topology` field that sets a role's port."""
    if role == "gateway":
        return "port"
    return "router_port" if role.startswith("router") else "engine_port"


@dataclass(frozen=True)
class Deployment:
    """A running deployment: where clients send requests, and its parts."""

    url: str
    replica_urls: list[str]
    topology: Topology
    replicas: ReplicaSet | None = None  # when `deploy` launched them
    router_url: str | None = None  # SMG's own URL
    state: RouterState | None = field(default=None, repr=False)  # the precise router's
    # the router worker processes (``topology.router_workers`` > 1; `state` is then None:
    # each worker keeps its own)
    workers: RouterWorkers | None = field(default=None, repr=False)


@contextlib.contextmanager
def deploy(
    engines: EngineConfig | Sequence[ReplicaEndpoint],
    topology: Topology = Topology(),
    *,
    tenants: Tenants | None = None,
    limits: Limits | None = None,
    run_dir: Path | None = None,
    kv_events: bool = True,
    start_timeout: float = 600.0,
    grace: float = 10.0,
    report: Report = _quiet,
) -> Iterator[Deployment]:
    """Start the deployment (see the module docstring) and stop it when the block ends.

    `engines`: an `EngineConfig` to launch ``topology.replicas`` replicas from (with
    `kv_events`, each publishes KV events), or the endpoints of replicas already
    running (their count is the topology's replica count). `tenants`: the gateway
    stage's keys and secret (None: no gateway). `limits`: the serving app's bounds
    (body size and time, header time, requests in flight per tenant, upstream timeouts;
    `Limits()` when None). `run_dir`: logs, sockets, decision log (a temporary folder
    when None)."""
    limits = limits or Limits()
    launching = isinstance(engines, EngineConfig)
    app = topology.routed or tenants is not None
    topology.check_free(launching, app)
    with contextlib.ExitStack() as stack:
        if run_dir is None:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prefixkit-")))
        configs: list[EngineConfig] = []
        if isinstance(engines, EngineConfig):
            configs = replica_configs(
                engines, topology.replicas, run_dir, topology.engine_port, kv_events=kv_events
            )
            endpoints = [ReplicaEndpoint.of(config) for config in configs]
        else:
            endpoints = list(engines)
        _check_fit(topology, endpoints)
        if topology.uses_smg:
            smg_executable()
        replica_set = None
        if configs:
            replica_set = stack.enter_context(
                ReplicaSet(
                    configs, run_dir, start_timeout=start_timeout, grace=grace, report=report
                )
            )
        urls = [endpoint.url for endpoint in endpoints]
        if not app:
            yield Deployment(urls[0], urls, topology, replica_set)
            return
        router_url = None
        routing: Routing
        if not topology.routed:
            routing = DirectRoute(urls[0], urls, name="replica 0")
        else:
            metrics = [fetch_cache_metrics(url) for url in urls]  # the replicas' KV capacity
            vllm = _engine_version(urls)
            settings = _router_settings(endpoints, metrics, vllm, topology, run_dir)
            if topology.router_workers > 1:
                spec = WorkerSpec(settings, tenants, limits, topology.host, topology.port)
                workers = stack.enter_context(
                    RouterWorkers(
                        spec, topology.router_workers, run_dir, grace=grace, report=report
                    )
                )
                report(
                    f"{topology.router_workers} router workers route {len(urls)} replicas "
                    f"on {workers.url} (logs in {run_dir / 'router-worker<i>.log'})"
                )
                yield Deployment(workers.url, urls, topology, replica_set, workers=workers)
                return
            precise = PreciseRoute(RouterState(settings))
            if topology.router == "precise":
                routing = precise
                report(f"the precise router routes {len(urls)} replicas")
                if topology.decision_log:
                    report(f"routing decisions are appended to {run_dir / 'decisions.jsonl'}")
            else:
                router_url = stack.enter_context(_smg(urls, metrics, topology, run_dir, report))
                routing = SmgRoute(router_url, precise)
        url = stack.enter_context(
            served_in_thread(
                serving_app(routing, tenants, limits),
                topology.host,
                topology.port,
                "prefixkit-serving",
                header_timeout_s=limits.header_timeout_s,
            )
        )
        yield Deployment(url, urls, topology, replica_set, router_url, routing.state())


def _check_fit(topology: Topology, endpoints: Sequence[ReplicaEndpoint]) -> None:
    """The replicas are as many as the topology says, and the precise router can follow
    their KV events and hash blocks as they do."""
    if len(endpoints) != topology.replicas:
        raise DeploymentConfigError(
            f"{len(endpoints)} replica endpoints for a topology of {topology.replicas} "
            "replicas: make them agree",
            parts=("endpoints", "replicas"),
        )
    if not topology.routed or topology.router != "precise":
        return
    algo = endpoints[0].hash_algo
    if algo not in _REPRODUCIBLE:
        raise DeploymentConfigError(
            f"--router precise needs a reproducible block hash; the replicas use {algo}: "
            "use sha256_cbor (the default)",
            parts=("router", "prefix_caching_hash_algo"),
        )
    if any(endpoint.kv_events is None for endpoint in endpoints):
        raise DeploymentConfigError(
            "--router precise needs KV events: drop --no-kv-events", parts=("router", "kv_events")
        )


def _engine_version(urls: Sequence[str]) -> VllmVersion:
    """The vLLM version whose block hash the replicas compute, from their ``/version``:
    one version they all run, and one prefixkit reproduces."""
    reported: dict[str, str] = {}
    for url in urls:
        try:
            reported[url] = fetch_engine_version(url)
        except (httpx.HTTPError, ValueError) as error:
            raise DeploymentConfigError(
                f"replica {url} did not say its vLLM version ({error}): the router hashes "
                "blocks as the engine's version does and reads it from GET /version",
                parts=("endpoints",),
            ) from None
    try:
        versions = {url: vllm_version_of(version) for url, version in reported.items()}
    except UsageError as error:
        raise DeploymentConfigError(str(error), parts=("endpoints",)) from None
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"{url}: {reported[url]}" for url in urls)
        raise DeploymentConfigError(
            f"the replicas run different vLLM versions ({listed}), which hash blocks "
            "differently: run one version behind one router",
            parts=("endpoints",),
        )
    return versions[urls[0]]


def _router_settings(
    endpoints: Sequence[ReplicaEndpoint],
    metrics: Sequence[CacheMetrics],
    vllm: VllmVersion,
    topology: Topology,
    run_dir: Path,
) -> RouterSettings:
    """The precise router's settings for these replicas (their capacity from their
    `metrics`, their block hash from their `vllm` version). Replicas whose block hash it cannot compute give it no KV events to
    follow: it then places by load alone (SMG's Responses requests on such a fleet)."""
    first = endpoints[0]
    followed = first.hash_algo in _REPRODUCIBLE
    return RouterSettings(
        replica_urls=[e.url for e in endpoints],
        kv_endpoints=[e.kv_events if followed else None for e in endpoints],
        kv_replay_endpoints=[e.kv_events_replay if followed else None for e in endpoints],
        kv_topic=first.kv_topic,
        block_size=first.block_size,
        hash_algo=cast(HashAlgo, first.hash_algo if followed else "sha256_cbor"),
        hash_seed=first.hash_seed or DEFAULT_NONE_HASH_SEED,
        vllm=vllm,
        capacity_blocks=[m.num_blocks for m in metrics],
        decision_log=run_dir / "decisions.jsonl" if topology.decision_log else None,
        model_dir=first.model if all(e.model == first.model for e in endpoints) else None,
        savings=topology.tier_savings,
    )


@contextlib.contextmanager
def _smg(
    urls: Sequence[str],
    metrics: Sequence[CacheMetrics],
    topology: Topology,
    run_dir: Path,
    report: Report,
) -> Iterator[str]:
    """Real SMG ``cache_aware`` in front of the replicas, its tree sized to their KV."""
    ratio = topology.smg_chars_per_token or CHARS_PER_TOKEN
    tree = smg_max_tree_size(metrics, ratio)
    url = f"http://127.0.0.1:{topology.router_port}"
    report(f"starting SMG cache_aware on {url} (max tree size {tree:,} characters)")
    log = run_dir / "router.log"
    process = launch_smg(
        SmgSettings(worker_urls=urls, port=topology.router_port, max_tree_size=tree), log=log
    )
    try:
        wait_until_ready(process, url, 120.0, log)
        yield url
    finally:
        stop_smg(process)
