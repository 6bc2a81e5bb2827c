"""Prompt roll-out warm-up: put a new prompt version's static prefix in every replica's
prefix cache before the first real request needs it.

    prefix = warm_prefix("support@v4", prompt, tokenizer, block_size=32)
    report = warm([prefix], replica_targets(deployment.replica_urls), model=name, tenants=tenants)
    for result in report.results: print(result.target, result.tenant, result.cached_after)

A warm request is a `/v1/completions` request with `max_tokens=1` whose prompt is the
token ids the application's requests start with: the prompt rendered as
`prefixkit.sdk.render_vllm` renders it (its static prefix padded to a block boundary of the
full chat-templated sequence, with the model's own tokenizer and template), cut after the
last token of the static prefix plus one token, so that every block of the prefix is full
and cached (vLLM caches whole blocks only). A real chat or token-id request rendered from the
same prompt starts with the same tokens, so its prefix blocks hash alike and are found.

On a Ray deployment (`prefixkit serve --backend ray`) every request enters through its
gateway: `pinned_replica_targets` reaches each replica there with prefixkit's router (the
``x-prefixkit-replica`` header pins a request to one replica); with another router, one
target through the gateway lets the router place the prefix where it will place the real
requests. Through the gateway, warm-up is an operator's job: its requests carry an
operator's API key and name the tenant whose salt to use (``x-prefixkit-tenant``); tenant
keys can neither pin a replica nor name a tenant.

Salting: vLLM keys a block by its tokens and the request's `cache_salt`, so a prefix is
warmed once per tenant. Sent straight to a replica (`WarmTarget(..., gateway=False)`), a
warm request carries the salt the tenant gateway gives that tenant's requests
(`Tenants.salted`, what the gateway stage does); sent through the gateway (and so through the
router, to the replica the router will pick for that prefix), it carries an operator's API
key and the tenant's name, and the gateway salts it. Without `tenants` nothing is salted (a deployment
without the gateway).

Planning (`warm_prefix`, `plan_warmup`) is pure; `send_warmup` does the I/O: each warm
request, then the same request again as a probe, whose cached tokens are what the next real
request will find (`WarmResult.cached_after`); the targets in parallel, each target's
requests one after another.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
from prefixkit.sdk import HFTokenizer, Prompt, Segment, align_static_prefix, vllm_tool

from ..errors import GatewayConfigError, WarmupError
from .gateway import PIN_HEADER, TENANT_HEADER
from .tenants import Tenants

__all__ = [
    "WarmPrefix",
    "WarmReport",
    "WarmRequest",
    "WarmResult",
    "WarmTarget",
    "check_gateway_access",
    "pinned_replica_targets",
    "plan_warmup",
    "registered_prompt",
    "replica_targets",
    "send_warmup",
    "warm",
    "warm_prefix",
]

_PLACEHOLDER_QUESTION = "?"  # stands for the dynamic tail; only the tokens before it are sent


@dataclass(frozen=True)
class WarmPrefix:
    """What to warm for one prompt version: the token ids a request of it starts with.

    `prefix_tokens`: the block-aligned static prefix (whole blocks, what a real request
    finds cached); `token_ids`: those tokens and the one after them (so the prefix's
    last block is full and gets cached)."""

    key: str
    token_ids: tuple[int, ...]
    prefix_tokens: int
    block_size: int


@dataclass(frozen=True)
class WarmTarget:
    """Where warm requests go: a replica itself (`gateway=False`: the request carries its
    tenant's salt), or the tenant gateway in front of the router (`gateway=True`: the request
    carries the tenant's API key; the gateway salts it, the router places it)."""

    name: str
    url: str
    gateway: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WarmRequest:
    """One planned warm request: its target, prefix, tenant, headers and exact body."""

    target: WarmTarget
    prefix: WarmPrefix
    tenant: str | None
    headers: Mapping[str, str] = field(repr=False)  # an API key: never printed
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class WarmResult:
    """What one warm request did. `cached_before`: prefix tokens the warm request already
    found cached; `cached_after`: tokens the probe after it found cached (None when the
    server does not report cached tokens: start vLLM with --enable-prompt-tokens-details);
    `seconds`: the warm request's time."""

    target: str
    url: str
    key: str
    tenant: str | None
    prefix_tokens: int
    cached_before: int | None
    cached_after: int | None
    seconds: float

    @property
    def warmed(self) -> bool:
        """Whether the probe found the whole prefix cached."""
        return self.cached_after is not None and self.cached_after >= self.prefix_tokens


@dataclass(frozen=True)
class WarmReport:
    """Every warm request's result, in plan order."""

    results: tuple[WarmResult, ...]

    @property
    def all_warmed(self) -> bool:
        return all(result.warmed for result in self.results)


def replica_targets(urls: Sequence[str]) -> list[WarmTarget]:
    """Each replica of a deployment as a direct target (`Deployment.replica_urls`)."""
    return [WarmTarget(f"replica {index}", url) for index, url in enumerate(urls)]


def pinned_replica_targets(url: str, replicas: int) -> list[WarmTarget]:
    """Each replica of a Ray deployment routed by prefixkit's policy, through its gateway:
    the ``x-prefixkit-replica`` header pins a request to one replica."""
    return [
        WarmTarget(f"replica {index}", url, gateway=True, headers={PIN_HEADER: str(index)})
        for index in range(replicas)
    ]


def registered_prompt(segment: Segment) -> Prompt:
    """The prompt an application builds from a registered prompt (`PromptRegistry.load`):
    the registered text as the system message, then the request's own question."""
    return Prompt(system=[segment], messages=[Segment.dynamic(_PLACEHOLDER_QUESTION)])


def warm_prefix(
    key: str,
    prompt: Prompt,
    tokenizer: HFTokenizer,
    block_size: int,
    *,
    max_pad_tokens: int | None = None,
) -> WarmPrefix:
    """The tokens to warm for `prompt`, aligned exactly as `render_vllm` aligns it (same
    tools shape, same padding budget). Only the static prefix is kept: the prompt's
    dynamic part never reaches the engine. Raises `WarmupError` when the static prefix is
    shorter than one block (vLLM caches whole blocks: nothing would be cached)."""
    tools = [vllm_tool(json.loads(segment.text)) for segment in prompt.tools]
    _, report = align_static_prefix(
        prompt, tokenizer, block_size, max_pad_tokens=max_pad_tokens, tools=tools
    )
    # unaligned, only the static prefix's whole blocks are shared with real requests
    prefix_tokens = report.static_tokens // block_size * block_size
    if prefix_tokens == 0 or len(report.token_ids) <= prefix_tokens:
        why = f" ({report.reason})" if report.reason else ""
        raise WarmupError(
            f"prompt {key}: its static prefix is {report.static_tokens} tokens{why}, less than "
            f"one {block_size}-token block, so vLLM caches none of it: nothing to warm",
            url=None,
            prompt=key,
        )
    return WarmPrefix(key, report.token_ids[: prefix_tokens + 1], prefix_tokens, block_size)


def plan_warmup(
    prefixes: Sequence[WarmPrefix],
    targets: Sequence[WarmTarget],
    *,
    model: str,
    tenants: Tenants | None = None,
    tenant_ids: Sequence[str] | None = None,
) -> list[WarmRequest]:
    """One warm request per prefix, target and tenant (pure).

    `tenants`: the deployment's tenant config (None: requests are not salted);
    `tenant_ids`: which of its tenants to warm for (None: every tenant). Raises
    `GatewayConfigError` for a tenant the config does not have, tenant ids without a
    config, and a gateway target without a config (the gateway needs an API key)."""
    chosen: list[str | None]
    if tenants is None:
        if tenant_ids:
            raise GatewayConfigError(
                f"tenants {', '.join(tenant_ids)} given without a tenants config: give the "
                "deployment's tenants file (--tenants FILE or PREFIXKIT_TENANT_KEYS and "
                "PREFIXKIT_SALT_SECRET)",
                setting="tenant_ids",
                tenant=tenant_ids[0],
            )
        check_gateway_access(targets, tenants)
        chosen = [None]
    else:
        known = tenants.tenant_ids
        check_gateway_access(targets, tenants)
        operator_key = tenants.operator_key()
        unknown = [tenant for tenant in tenant_ids or () if tenant not in known]
        if unknown:
            raise GatewayConfigError(
                f"unknown tenant {', '.join(unknown)}: the tenants config has {', '.join(known)}",
                setting="tenant_ids",
                tenant=unknown[0],
            )
        chosen = list(dict.fromkeys(tenant_ids)) if tenant_ids else list(known)
    requests = []
    for prefix in prefixes:
        body = json.dumps(
            {
                "model": model,
                "prompt": list(prefix.token_ids),
                "max_tokens": 1,
                "temperature": 0,
            }
        ).encode()
        for target in targets:
            for tenant in chosen:
                headers = {"content-type": "application/json", **target.headers}
                sent = body
                if tenants is not None and tenant is not None:
                    if target.gateway:
                        headers["authorization"] = f"Bearer {operator_key}"
                        headers[TENANT_HEADER] = tenant
                    else:
                        sent = tenants.salted(body, tenant)
                requests.append(WarmRequest(target, prefix, tenant, headers, sent))
    return requests


def check_gateway_access(targets: Sequence[WarmTarget], tenants: Tenants | None) -> None:
    """Raise `GatewayConfigError` when a target is reached through the gateway and
    `tenants` has no operator key: only operators may name a tenant or pin a replica."""
    if not any(target.gateway for target in targets):
        return
    if tenants is None or tenants.operator_key() is None:
        raise GatewayConfigError(
            "warming through the gateway needs an operator's API key (tenant keys cannot "
            "pin a replica or name a tenant): give the deployment's tenants file with an "
            "[operators] table (--tenants FILE), or set PREFIXKIT_OPERATOR_KEYS='ops=KEY' "
            "beside PREFIXKIT_TENANT_KEYS and PREFIXKIT_SALT_SECRET",
            setting="operators",
        )


def send_warmup(
    plan: Sequence[WarmRequest], *, client: httpx.Client | None = None, timeout: float = 300.0
) -> WarmReport:
    """Send each warm request, then its probe: the targets in parallel, each target's
    requests one at a time (a replica prefills one prefix after another either way).
    Raises `WarmupError` naming the target that is unreachable or answered an error."""
    by_target: dict[tuple[str, str], list[int]] = {}
    for index, request in enumerate(plan):
        by_target.setdefault((request.target.name, request.target.url), []).append(index)
    results: list[WarmResult | None] = [None] * len(plan)

    def send(indices: list[int], http: httpx.Client) -> None:
        for index in indices:
            results[index] = _warm_one(http, plan[index])

    with contextlib.ExitStack() as stack:
        http = client or stack.enter_context(httpx.Client(timeout=timeout))
        with ThreadPoolExecutor(max_workers=max(1, len(by_target))) as pool:
            for future in [pool.submit(send, group, http) for group in by_target.values()]:
                future.result()
    return WarmReport(tuple(result for result in results if result is not None))


def _warm_one(http: httpx.Client, request: WarmRequest) -> WarmResult:
    started = time.perf_counter()
    before = _cached_tokens(_post(http, request))
    seconds = time.perf_counter() - started
    after = _cached_tokens(_post(http, request))
    return WarmResult(
        target=request.target.name,
        url=request.target.url,
        key=request.prefix.key,
        tenant=request.tenant,
        prefix_tokens=request.prefix.prefix_tokens,
        cached_before=before,
        cached_after=after,
        seconds=seconds,
    )


def warm(
    prefixes: Sequence[WarmPrefix],
    targets: Sequence[WarmTarget],
    *,
    model: str,
    tenants: Tenants | None = None,
    tenant_ids: Sequence[str] | None = None,
    client: httpx.Client | None = None,
) -> WarmReport:
    """Warm every prefix on every target for every tenant (`plan_warmup`, then
    `send_warmup`)."""
    plan = plan_warmup(prefixes, targets, model=model, tenants=tenants, tenant_ids=tenant_ids)
    return send_warmup(plan, client=client)


def _post(http: httpx.Client, request: WarmRequest) -> dict[str, Any]:
    target = request.target
    url = f"{target.url}/v1/completions"
    try:
        response = http.post(url, content=request.body, headers=dict(request.headers))
    except httpx.HTTPError as error:
        raise WarmupError(
            f"{target.name} at {target.url} is unreachable ({type(error).__name__}: {error}): "
            "check that the deployment is running (`prefixkit serve status`) and that the "
            "address is right",
            url=target.url,
            prompt=request.prefix.key,
        ) from None
    if response.status_code != 200:
        raise WarmupError(
            f"{target.name} at {target.url} answered the warm request for {request.prefix.key} "
            f"with HTTP {response.status_code}: {response.text[:300]}",
            url=target.url,
            status=response.status_code,
            prompt=request.prefix.key,
        )
    body: dict[str, Any] = response.json()
    return body


def _cached_tokens(body: Mapping[str, Any]) -> int | None:
    details = (body.get("usage") or {}).get("prompt_tokens_details")
    if not isinstance(details, dict) or details.get("cached_tokens") is None:
        return None
    return int(details["cached_tokens"])
