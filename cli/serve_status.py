"""`prefixkit serve status`: each replica of a local `prefixkit serve` run directory with its
health, block size, KV cache use and prefix-cache hit rate; each tenant's requests and hit
rate, from the gateway's ``/metrics``; and how the precise router got its requests' tokens
(itself, or from a replica's ``/tokenize``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .serve_state import SERVE_STATE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["TenantCounts", "show_status", "tenant_counts", "tenants_table"]


@dataclass(frozen=True)
class TenantCounts:
    """One tenant's counters from the gateway's ``/metrics``."""

    requests: float = 0.0
    prompt_tokens: float = 0.0
    cached_tokens: float = 0.0

    def since(self, earlier: TenantCounts | None) -> TenantCounts:
        if earlier is None:
            return self
        return TenantCounts(
            self.requests - earlier.requests,
            self.prompt_tokens - earlier.prompt_tokens,
            self.cached_tokens - earlier.cached_tokens,
        )


def show_status(
    run_dir: Path, interval: float, console: Console, operator_key: str | None = None
) -> int:
    """Print the replicas' table (the hit rate over `interval` seconds, or since each
    replica started when 0) and the precise router's tokenization counts (read with
    `operator_key` when the deployment has tenants); returns 0 when every replica is
    healthy, else 1."""
    import httpx
    from prefixkit.engine_adapter import fetch_cache_metrics
    from prefixkit.engine_adapter.engine.replicas import STATE_FILE
    from rich.table import Table

    state_path = run_dir / STATE_FILE
    if not state_path.exists():
        console.print(
            f"nothing served from {run_dir} (no {STATE_FILE}): start `prefixkit serve`, "
            "or pass the --run-dir it used"
        )
        return 1
    replicas = json.loads(state_path.read_text())
    serve_state = run_dir / SERVE_STATE
    endpoint = None
    if serve_state.exists():
        endpoint = json.loads(serve_state.read_text())["endpoint"]
        console.print(f"endpoint: {endpoint}")

    def scrape(url: str) -> Any:
        try:
            return fetch_cache_metrics(url)
        except httpx.HTTPError:
            return None

    before = {r["url"]: scrape(r["url"]) for r in replicas}
    tenants_before = None if endpoint is None else tenant_counts(endpoint, operator_key)
    if interval > 0:
        time.sleep(interval)
    table = Table(title=f"replicas in {run_dir}")
    columns = (
        "#",
        "url",
        "pid",
        "state",
        "health",
        "restarts",
        "block",
        "KV use",
        "hit rate",
        "queried",
    )
    for column in columns:
        table.add_column(column)
    all_healthy = True
    for replica in replicas:
        url = replica["url"]
        try:
            healthy = httpx.get(f"{url}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            healthy = False
        all_healthy &= healthy
        metrics = scrape(url)
        earlier = before[url]
        if metrics is None:
            block = usage = rate = queried = "-"
        else:
            interval_stats = (
                metrics.since(earlier) if interval > 0 and earlier else metrics.lifetime
            )
            block = str(metrics.block_size)
            usage = f"{metrics.kv_usage:.1%}"
            rate = f"{interval_stats.hit_rate:.1%}"
            queried = f"{interval_stats.queried_tokens:,.0f}"
        table.add_row(
            str(replica["index"]),
            url,
            str(replica["pid"]),
            replica["state"],
            "[green]ok[/]" if healthy else "[red]down[/]",
            str(replica["restarts"]),
            block,
            usage,
            rate,
            queried,
        )
    console.print(table)
    span = f"over {interval:g} s" if interval > 0 else "since each replica started"
    console.print(f"hit rate = prefix-cache hit tokens / queried prompt tokens, {span}")
    if endpoint is not None:
        tenants = tenant_counts(endpoint, operator_key)
        if isinstance(tenants, str):
            console.print(tenants)
        elif tenants:
            earlier = tenants_before if interval > 0 and isinstance(tenants_before, dict) else {}
            since = f"over {interval:g} s" if interval > 0 else "since the gateway started"
            console.print(tenants_table(tenants, earlier, since))
        router_line = _router_tokens(endpoint, operator_key)
        if router_line is not None:
            console.print(router_line)
    return 0 if all_healthy else 1


def tenant_counts(endpoint: str, operator_key: str | None) -> dict[str, TenantCounts] | str:
    """Every tenant's counters from the gateway's ``/metrics`` (read with `operator_key`),
    or the line that says why there are none."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    headers = {} if operator_key is None else {"authorization": f"Bearer {operator_key}"}
    try:
        answer = httpx.get(f"{endpoint}/metrics", headers=headers, timeout=5.0)
    except httpx.HTTPError as exc:
        return f"tenants: the gateway is unreachable ({exc})"
    if answer.status_code in (401, 403):
        return (
            "tenants: their numbers need an operator's key: give the tenants file "
            "(--tenants FILE) or set PREFIXKIT_OPERATOR_KEYS"
        )
    if answer.status_code != 200:
        return f"tenants: /metrics answered HTTP {answer.status_code}"
    counts: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            name = sample.name.removeprefix("prefixkit_tenant_").removesuffix("_total")
            if sample.name.startswith("prefixkit_tenant_") and "tenant" in sample.labels:
                counts.setdefault(sample.labels["tenant"], {})[name] = sample.value
    return {
        tenant: TenantCounts(
            numbers.get("requests", 0.0),
            numbers.get("prompt_tokens", 0.0),
            numbers.get("cached_tokens", 0.0),
        )
        for tenant, numbers in sorted(counts.items())
    }


def tenants_table(
    now: dict[str, TenantCounts], earlier: dict[str, TenantCounts], span: str
) -> Table:
    """Each tenant's requests, prompt tokens and hit rate (cached / prompt tokens), since
    `earlier` (or since the gateway started, when it has no counts)."""
    from rich.table import Table

    table = Table(title=f"tenants, {span}")
    for column in ("tenant", "requests", "prompt tokens", "cached tokens", "hit rate"):
        table.add_column(column)
    for tenant, counts in now.items():
        shown = counts.since(earlier.get(tenant))
        rate = f"{shown.cached_tokens / shown.prompt_tokens:.1%}" if shown.prompt_tokens else "-"
        table.add_row(
            tenant,
            f"{shown.requests:,.0f}",
            f"{shown.prompt_tokens:,.0f}",
            f"{shown.cached_tokens:,.0f}",
            rate,
        )
    return table


def _router_tokens(endpoint: str, operator_key: str | None) -> str | None:
    """The precise router's line: requests it tokenized itself and those it asked a
    replica's ``/tokenize`` for (None: the deployment has no precise router)."""
    import httpx

    headers = {} if operator_key is None else {"authorization": f"Bearer {operator_key}"}
    try:
        answer = httpx.get(f"{endpoint}/router/state", headers=headers, timeout=2.0)
    except httpx.HTTPError as exc:
        return f"router: unreachable ({exc})"
    if answer.status_code == 404:
        return None
    if answer.status_code in (401, 403):
        return (
            "router: its state needs an operator's key: give the tenants file "
            "(--tenants FILE) or set PREFIXKIT_OPERATOR_KEYS"
        )
    if answer.status_code != 200:
        return f"router: /router/state answered HTTP {answer.status_code}"
    state = answer.json()
    here = int(state.get("tokenized_here", 0))
    asked = int(state.get("tokenize_fallbacks", 0))
    share = f" ({asked / (here + asked):.1%})" if here + asked else ""
    return (
        f"router: {here:,} requests tokenized in the router, {asked:,} asked of a "
        f"replica's /tokenize{share}"
    )
