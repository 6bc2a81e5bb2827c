"""KV cache tiers below the GPU's: what `prefixkit serve --kv-tier` parses, and the vLLM 0.32
`--kv-transfer-config` that runs them (pure: no vLLM import, no I/O).

    tiers = parse_kv_tiers(["cpu:64GiB", "disk:/mnt/nvme:500GiB"])
    kv_transfer_config(tiers, kv_events=True)   # {"kv_connector": "OffloadingConnector", ...}

The tier kinds, by what runs them in vLLM 0.32 (read from its code):

``cpu:SIZE``
    vLLM's native CPU offloading: its ``OffloadingConnector`` keeps up to SIZE of pinned host
    RAM per replica (``cpu_bytes_to_use``), what ``--kv-offloading-size`` turns into.
``disk:PATH:SIZE``
    vLLM's native tiering under the CPU tier (``TieringOffloadingSpec`` with an ``fs``
    secondary tier): blocks evicted from host RAM are written as files under PATH, and read
    back through host RAM. Needs a ``cpu`` tier. vLLM 0.32's ``fs`` tier never deletes a
    file: SIZE sizes the volume (the KubeRay manifest's), vLLM does not bound the tier.
``lmcache:tcp://HOST:PORT``
    a shared store: an LMCache server in multi-process mode at HOST:PORT (vLLM's
    ``LMCacheMPConnector``); the server's own configuration sets its tiers and sizes.
``lmcache-disk:PATH:SIZE``
    LMCache inside the engine process (vLLM's ``LMCacheConnectorV1``) with its local disk
    backend at PATH, bounded to SIZE. Its keys do not carry the request's ``cache_salt``:
    refused unless the deployment serves a single tenant (`SALT_IN_KEYS`).

Sizes take a unit: MiB, GiB, TiB (binary) or MB, GB, TB (decimal). Every kind at most once;
with several, vLLM's ``MultiConnector`` holds them, the native tiers first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "MEDIUM_OF_KIND",
    "SALT_IN_KEYS",
    "KVTier",
    "KVTierKind",
    "kubernetes_quantity",
    "kv_tier_env",
    "kv_tier_problems",
    "kv_transfer_config",
    "parse_kv_tier",
    "parse_kv_tiers",
]

KVTierKind = Literal["cpu", "disk", "lmcache", "lmcache-disk"]

_KINDS: tuple[KVTierKind, ...] = ("cpu", "disk", "lmcache", "lmcache-disk")
_UNITS = {
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)")
_HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?")
_EXAMPLES = "cpu:64GiB, disk:/mnt/nvme:500GiB, lmcache:tcp://lmcache.internal:5555"

SALT_IN_KEYS: Mapping[KVTierKind, str | None] = {
    "cpu": None,
    "disk": None,
    "lmcache": None,
    "lmcache-disk": (
        "LMCache's in-process connector keys a chunk by its tokens, the model and the rank "
        "only (lmcache/v1/token_database.py TokenDatabase._hash_tokens, lmcache/utils.py "
        "CacheEngineKey): the request's cache_salt never reaches the key "
        "(lmcache/integration/vllm/vllm_v1_adapter.py get_num_new_matched_tokens), so one "
        "tenant's prompt is served from another's cache (LMCache issue 2878, open in "
        "LMCache 0.5.6)"
    ),
}
"""Per tier kind, None when its keys carry the request's ``cache_salt``, else why not.

cpu and disk: vLLM's offloading keys a block by vLLM's own block hash
(``vllm/v1/kv_offload/base.py`` ``make_offload_key``, called with ``request.block_hashes`` in
``offloading/scheduler.py``; the disk file name is that hash,
``vllm/v1/kv_offload/file_mapper.py`` ``FileMapper.get_file_name``), and the first block's
hash includes ``("cache_salt", salt)`` (``vllm/v1/core/kv_cache_utils.py``
``generate_block_hash_extra_keys``), every later one chains from it.
lmcache: vLLM's ``LMCacheMPConnector`` sends ``request.cache_salt`` with every lookup, store
and retrieve, LMCache puts it in the key it compares (``IPCCacheServerKey.cache_salt``,
``lmcache/integration/vllm/vllm_multi_process_adapter.py``
``maybe_submit_lookup_request``) and in every stored object's key
(``lmcache/v1/distributed/api.py`` ``ipc_key_to_object_keys`` -> ``ObjectKey.cache_salt``)."""

MEDIUM_OF_KIND: Mapping[KVTierKind, str | None] = {
    "cpu": "CPU",
    "disk": "STORAGE",
    "lmcache": None,
    "lmcache-disk": None,
}
"""The ``medium`` vLLM 0.32's KV events give a block held in each tier (``vllm/distributed/
kv_events.py`` ``MEDIUM_CPU``, ``MEDIUM_STORAGE``), None for a tier whose blocks the router
cannot follow: ``LMCacheMPConnector.take_events`` yields nothing, and ``LMCacheConnectorV1``
publishes LMCache's own chunk hashes, not vLLM's block hashes."""


class KVTier(BaseModel):
    """One tier below the GPU's (module docstring); `spec` is its ``--kv-tier`` text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: KVTierKind
    size_bytes: int | None = None
    path: str | None = None
    url: str | None = None

    @property
    def spec(self) -> str:
        """The tier as ``--kv-tier`` takes it (sizes in the largest whole binary unit)."""
        if self.kind == "lmcache":
            return f"lmcache:{self.url}"
        size = _size_text(self.size_bytes or 0)
        if self.path is None:
            return f"{self.kind}:{size}"
        return f"{self.kind}:{self.path}:{size}"

    @property
    def size_gib(self) -> float:
        """The size in GiB (0 for a tier whose size is set elsewhere)."""
        return (self.size_bytes or 0) / (1 << 30)


def parse_kv_tier(text: str) -> KVTier:
    """One tier from its ``--kv-tier`` text; raises `ValueError` naming what is wrong and the
    form to use."""
    kind, separator, rest = text.strip().partition(":")
    if kind not in _KINDS or not separator:
        raise ValueError(
            f"KV tier {text!r}: the kind must be one of {', '.join(_KINDS)}, followed by ':' "
            f"(e.g. {_EXAMPLES})"
        )
    if kind == "cpu":
        return KVTier(kind="cpu", size_bytes=_parse_size(rest, text))
    if kind == "lmcache":
        return KVTier(kind="lmcache", url=_parse_url(rest, text))
    path, separator, size = rest.rpartition(":")
    if not separator or not path:
        raise ValueError(f"KV tier {text!r}: give a path and a size, e.g. {kind}:/mnt/nvme:500GiB")
    return KVTier(kind=kind, path=_parse_path(path, text), size_bytes=_parse_size(size, text))


def parse_kv_tiers(texts: Iterable[str | KVTier | Mapping[str, Any]]) -> tuple[KVTier, ...]:
    """Tiers from ``--kv-tier`` texts (or tiers, or their dicts), fastest first (cpu, disk,
    lmcache, lmcache-disk); raises `ValueError` for a bad one or a kind given twice."""
    tiers: list[KVTier] = []
    for item in texts:
        if isinstance(item, KVTier):
            tier = item
        elif isinstance(item, str):
            tier = parse_kv_tier(item)
        else:
            tier = KVTier(**item)
        if any(seen.kind == tier.kind for seen in tiers):
            raise ValueError(f"KV tier {tier.kind!r} is given twice: give each kind at most once")
        tiers.append(tier)
    return tuple(sorted(tiers, key=lambda tier: _KINDS.index(tier.kind)))


def kv_tier_problems(tiers: Sequence[KVTier], single_tenant: bool) -> list[tuple[str, str]]:
    """What does not fit together in `tiers`: (the tier's spec, what to change)."""
    problems: list[tuple[str, str]] = []
    kinds = {tier.kind for tier in tiers}
    for tier in tiers:
        if tier.kind == "disk" and "cpu" not in kinds:
            problems.append(
                (
                    tier.spec,
                    f"KV tier {tier.spec!r} is read and written through host RAM (vLLM's "
                    "TieringOffloadingSpec): add a cpu tier, e.g. --kv-tier cpu:64GiB",
                )
            )
        why = SALT_IN_KEYS[tier.kind]
        if why is not None and not single_tenant:
            problems.append(
                (
                    tier.spec,
                    f"KV tier {tier.spec!r} does not keep tenants apart: {why}. Use a tier "
                    "whose keys carry cache_salt (disk:PATH:SIZE under a cpu tier, or "
                    "lmcache:tcp://HOST:PORT), or declare a single tenant (--single-tenant)",
                )
            )
    paths = [tier.path for tier in tiers if tier.path is not None]
    if len(set(paths)) < len(paths):
        problems.append(
            (
                "path",
                f"KV tiers share the path {paths[0]}: give each disk tier its own directory",
            )
        )
    return problems


def kv_transfer_config(tiers: Sequence[KVTier], kv_events: bool) -> dict[str, Any]:
    """The JSON object for vLLM 0.32's ``--kv-transfer-config`` running `tiers` (one
    connector, or vLLM's ``MultiConnector`` over several, the native one first).

    With `kv_events`, the native tiers publish their blocks on the engine's KV-event
    publisher (the scheduler drains ``connector.take_events()`` into the same batch as the
    GPU's): stores carry the full block payload (``self_describing_kv_events``) and the disk
    tier publishes too (its ``enable_kv_events``)."""
    connectors: list[dict[str, Any]] = []
    by_kind = {tier.kind: tier for tier in tiers}
    cpu = by_kind.get("cpu")
    if cpu is not None:
        extra: dict[str, Any] = {"cpu_bytes_to_use": cpu.size_bytes}
        if kv_events:
            extra["self_describing_kv_events"] = True
        disk = by_kind.get("disk")
        if disk is not None:
            extra["spec_name"] = "TieringOffloadingSpec"
            extra["secondary_tiers"] = [
                {
                    "type": "fs",
                    "root_dir": disk.path,
                    "enable_kv_events": kv_events,
                    "locality": "LOCAL",
                }
            ]
        connectors.append(_connector("OffloadingConnector", extra))
    shared = by_kind.get("lmcache")
    if shared is not None:
        host, _, port = (shared.url or "").rpartition(":")
        connectors.append(
            _connector(
                "LMCacheMPConnector", {"lmcache.mp.host": host, "lmcache.mp.port": int(port)}
            )
        )
    if "lmcache-disk" in by_kind:
        connectors.append(_connector("LMCacheConnectorV1", {}))
    if not connectors:
        return {}
    if len(connectors) == 1:
        return connectors[0]
    return _connector("MultiConnector", {"connectors": connectors})


def kv_tier_env(tiers: Sequence[KVTier]) -> dict[str, str]:
    """Variables the engine needs for `tiers`: LMCache's in-process connector reads its
    configuration from ``LMCACHE_*`` (its local disk at PATH, up to SIZE in GiB, which
    LMCache calls GB and multiplies by 1024**3)."""
    for tier in tiers:
        if tier.kind == "lmcache-disk":
            return {
                "LMCACHE_LOCAL_DISK": f"file://{tier.path}/",
                "LMCACHE_MAX_LOCAL_DISK_SIZE": _number(tier.size_gib),
            }
    return {}


def kubernetes_quantity(size_bytes: int) -> str:
    """`size_bytes` as a Kubernetes quantity, rounded up to a whole Mi (or Gi, Ti)."""
    mebibytes = -(-size_bytes // (1 << 20))
    for unit, scale in (("Ti", 1 << 20), ("Gi", 1 << 10)):
        if mebibytes % scale == 0:
            return f"{mebibytes // scale}{unit}"
    return f"{mebibytes}Mi"


def _connector(name: str, extra: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"kv_connector": name, "kv_role": "kv_both"}
    if extra:
        config["kv_connector_extra_config"] = extra
    return config


def _parse_size(text: str, spec: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    if match is None or match["unit"] not in _UNITS:
        raise ValueError(
            f"KV tier {spec!r}: size {text!r} needs a number and a unit "
            f"({', '.join(_UNITS)}), e.g. 64GiB"
        )
    size = round(float(match["number"]) * _UNITS[match["unit"]])
    if size < 1 << 20:
        raise ValueError(f"KV tier {spec!r}: size {text!r} is below 1 MiB: give a real size")
    return size


def _parse_path(text: str, spec: str) -> str:
    path = PurePosixPath(text)
    if not path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"KV tier {spec!r}: path {text!r} must be absolute without '..', e.g. /mnt/nvme"
        )
    if str(path) == "/":
        raise ValueError(f"KV tier {spec!r}: give a directory of its own, not '/'")
    return str(path)


def _parse_url(text: str, spec: str) -> str:
    scheme, separator, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if (
        scheme != "tcp"
        or not separator
        or not colon
        or not _HOST.fullmatch(host)
        or not port.isdigit()
        or not 1 <= int(port) <= 65535
    ):
        raise ValueError(
            f"KV tier {spec!r}: an LMCache server is tcp://HOST:PORT, "
            "e.g. lmcache:tcp://lmcache.internal:5555"
        )
    return f"tcp://{host}:{int(port)}"


def _size_text(size_bytes: int) -> str:
    for unit in ("TiB", "GiB", "MiB"):
        scale = _UNITS[unit]
        if size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{_number(size_bytes / (1 << 20))}MiB"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(round(value, 6))
