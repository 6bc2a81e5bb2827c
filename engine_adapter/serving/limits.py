"""The bounds the serving app keeps, so that one tenant cannot hold what others need.

    deploy(config, topology, tenants=tenants, limits=Limits(max_body_bytes=4 << 20))

Every bound answers in OpenAI's error shape when it is reached: a body over
`max_body_bytes` is 413, a body not read whole within `body_timeout_s` 408, a JSON body
nested deeper than `max_json_depth` 400, a tenant's request beyond
`max_inflight_per_tenant` 429. `header_timeout_s` is how long the server waits for a
request's head (`keepalive.served`); the upstream timeouts bound a connection to an
engine and the wait for each chunk of its answer. `body_workers` processes admit large
bodies (`bodies.BodyWorkers`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from starlette.types import Receive

from ..errors import DeploymentConfigError
from .http_server import TIMER_RESOLUTION_S
from .refused import Refused

__all__ = ["Limits", "TenantSlots", "read_body"]


@dataclass(frozen=True)
class Limits:
    """The serving app's bounds (module docstring); each must be positive."""

    max_body_bytes: int = 16 << 20
    max_json_depth: int = 64
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_inflight_per_tenant: int = 64
    upstream_connect_timeout_s: float = 10.0
    upstream_read_timeout_s: float = 600.0
    body_workers: int = 2

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise DeploymentConfigError(
                    f"limit {name} = {value!r}: give a positive number", parts=(name,)
                )


async def read_body(receive: Receive, headers: Mapping[str, str], limits: Limits) -> bytes:
    """A request's body, read whole within ``body_timeout_s`` and at most
    ``max_body_bytes`` (a declared larger length is refused before reading); raises
    `Refused` (413, 408, or 400 for a client gone before its body)."""
    limit = limits.max_body_bytes
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout_s + TIMER_RESOLUTION_S):
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    raise Refused(400, "the client left before its body", "client_gone")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
                more = message.get("more_body", False)
    except TimeoutError:
        raise Refused(
            408,
            f"the request body did not arrive within {limits.body_timeout_s} s",
            "request_timeout",
        ) from None
    return b"".join(chunks)


def _too_large(limit: int) -> Refused:
    return Refused(
        413,
        f"request body is larger than {limit} bytes, the most this deployment accepts",
        "request_too_large",
    )


class TenantSlots:
    """Each tenant's requests in flight, at most `per_tenant` at a time."""

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._inflight: Counter[str] = Counter()

    @contextlib.contextmanager
    def slot(self, tenant: str | None) -> Iterator[Refused | None]:
        """Hold one of `tenant`'s slots for the block; yields the 429 to answer instead
        when it has none left (None for an operator or a deployment without tenants)."""
        if tenant is None:
            yield None
            return
        if self._inflight[tenant] >= self.per_tenant:
            yield Refused(
                429,
                f"tenant {tenant!r} has {self.per_tenant} requests in flight, the most this "
                "deployment allows: wait for one to end",
                "rate_limit_exceeded",
            )
            return
        self._inflight[tenant] += 1
        try:
            yield None
        finally:
            self._inflight[tenant] -= 1
