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

from dataclasses import dataclass

from ..errors import DeploymentConfigError

__all__ = ["Limits"]


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
