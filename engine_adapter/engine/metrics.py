"""Prefix-cache metrics of a vLLM replica, parsed from its Prometheus `/metrics`.

    before = fetch_cache_metrics("http://127.0.0.1:18000")
    ... traffic ...
    after = fetch_cache_metrics("http://127.0.0.1:18000")
    interval = after.since(before)        # CacheInterval(queried_tokens, hit_tokens, hit_rate)

`parse_cache_metrics(text)` is pure (prometheus_client's text parser); it reads
`vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total` (token counts, summed over
the `engine` label), `vllm:kv_cache_usage_perc` (fraction of blocks in active use: 0 when idle,
although finished requests' blocks stay cached) and `vllm:cache_config_info` (block size, hash
algorithm, number of KV blocks). Hit rates are always over an interval, as a difference of
counters; a counter that went down means the replica restarted, and the interval then counts
from zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "CacheInterval",
    "CacheMetrics",
    "fetch_cache_metrics",
    "fetch_engine_version",
    "fleet_interval",
    "merge_replica_metrics",
    "parse_cache_metrics",
]

_QUERIES = "vllm:prefix_cache_queries"
_HITS = "vllm:prefix_cache_hits"
_USAGE = "vllm:kv_cache_usage_perc"
_CONFIG = "vllm:cache_config_info"


@dataclass(frozen=True)
class CacheInterval:
    """Prefix-cache traffic between two scrapes (tokens looked up and tokens found)."""

    queried_tokens: float
    hit_tokens: float

    @property
    def hit_rate(self) -> float:
        """hit_tokens / queried_tokens; 0.0 when nothing was queried."""
        return self.hit_tokens / self.queried_tokens if self.queried_tokens else 0.0


@dataclass(frozen=True)
class CacheMetrics:
    """One scrape of a replica's cache counters and cache configuration."""

    queried_tokens: float
    hit_tokens: float
    kv_usage: float
    block_size: int | None
    hash_algo: str | None
    num_blocks: int | None
    prefix_caching: bool | None

    def since(self, earlier: CacheMetrics) -> CacheInterval:
        """Traffic from `earlier` to this scrape; after a restart (counters went down), all of it."""
        if self.queried_tokens < earlier.queried_tokens or self.hit_tokens < earlier.hit_tokens:
            return CacheInterval(self.queried_tokens, self.hit_tokens)
        return CacheInterval(
            self.queried_tokens - earlier.queried_tokens, self.hit_tokens - earlier.hit_tokens
        )

    @property
    def lifetime(self) -> CacheInterval:
        """Traffic since the replica started."""
        return CacheInterval(self.queried_tokens, self.hit_tokens)


def fleet_interval(before: Sequence[CacheMetrics], after: Sequence[CacheMetrics]) -> CacheInterval:
    """Traffic of several replicas between two scrapes of each (same order), summed."""
    intervals = [a.since(b) for a, b in zip(after, before, strict=True)]
    return CacheInterval(
        sum(i.queried_tokens for i in intervals), sum(i.hit_tokens for i in intervals)
    )


def parse_cache_metrics(text: str) -> CacheMetrics:
    """Read the cache metrics out of a Prometheus text exposition."""
    queried = hits = usage = 0.0
    config: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == _QUERIES + "_total":
                queried += sample.value
            elif sample.name == _HITS + "_total":
                hits += sample.value
            elif sample.name == _USAGE:
                usage = max(usage, sample.value)
            elif sample.name == _CONFIG and not config:
                config = dict(sample.labels)
    return CacheMetrics(
        queried_tokens=queried,
        hit_tokens=hits,
        kv_usage=usage,
        block_size=_int_or_none(config.get("block_size")),
        hash_algo=config.get("prefix_caching_hash_algo"),
        num_blocks=_int_or_none(config.get("num_gpu_blocks")),
        prefix_caching=(
            config["enable_prefix_caching"] == "True" if "enable_prefix_caching" in config else None
        ),
    )


def fetch_cache_metrics(base_url: str, timeout: float = 5.0) -> CacheMetrics:
    """GET `{base_url}/metrics` and parse it; raises `httpx.HTTPError` if unreachable."""
    response = httpx.get(f"{base_url.rstrip('/')}/metrics", timeout=timeout)
    response.raise_for_status()
    return parse_cache_metrics(response.text)


def fetch_engine_version(base_url: str, timeout: float = 5.0) -> str:
    """The vLLM version a replica reports (``GET {base_url}/version``, e.g. ``"0.32.0"``);
    raises `httpx.HTTPError` if unreachable, `ValueError` if it answers without one."""
    response = httpx.get(f"{base_url.rstrip('/')}/version", timeout=timeout)
    response.raise_for_status()
    try:
        body = response.json()
    except ValueError:
        body = None
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str):
        raise ValueError(f"{base_url}/version answered without a version: {response.text[:200]!r}")
    return version


def merge_replica_metrics(texts: Sequence[str | None]) -> str:
    """The Prometheus text expositions of several replicas as one: each family once (its
    HELP and TYPE lines first, then its samples from every replica), each sample labelled
    ``replica="<index>"``. A replica with no exposition (None: it did not answer) adds
    nothing."""
    families: dict[str, tuple[list[str], list[str]]] = {}  # name -> (HELP/TYPE, samples)
    for replica, text in enumerate(texts):
        family = ""
        for line in (text or "").splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                family = line.split(" ", 3)[2]
                header, _ = families.setdefault(family, ([], []))
                if len(header) < 2 and line not in header:
                    header.append(line)
            elif line and not line.startswith("#"):
                name = line.split("{", 1)[0].split(" ", 1)[0]
                if not family or not name.startswith(family):
                    family = name
                families.setdefault(family, ([], []))[1].append(_labelled(line, replica))
    return "".join(
        line + "\n" for header, samples in families.values() for line in (*header, *samples)
    )


def _labelled(sample: str, replica: int) -> str:
    """A sample line with ``replica="<index>"`` as its first label."""
    label = f'replica="{replica}"'
    name, brace, rest = sample.partition("{")
    if brace:
        return f"{name}{{{label}{'' if rest.startswith('}') else ','}{rest}"
    name, _, value = sample.partition(" ")
    return f"{name}{{{label}}} {value}"


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
