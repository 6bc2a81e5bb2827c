"""How long prefixkit's HTTP hops keep an idle connection open (client ->
gateway or precise router -> engines).

A request written on a pooled connection just as its server closes that
connection for idleness fails with a reset (httpx: ``ReadError``) although the
server was healthy. uvicorn closes idle connections after 5 s, vLLM's API
server too (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``), and httpx, the transport of the
OpenAI and Anthropic SDKs, expires them after 5 s: every hop where both ends
keep their defaults races (Kludex/uvicorn#824 and its kin; three of fifteen
`bench/router_load.py` runs here failed that way). A client must give up an idle
connection before its server does, so:

* our servers (the tenant gateway, the precise router) keep an idle client
  connection `SERVED_IDLE_S` (75 s, nginx's default), far past the clients' 5 s;
* our clients of the engines drop an idle connection after `UPSTREAM_IDLE_S`
  (2 s), well before the engines' 5 s.

A connection still sending its request is not idle: each request head (request line and
headers) must arrive within `HEADER_TIMEOUT_S` of the connection opening or of the
request's first byte, and be at most `MAX_HEAD_BYTES` long (`http_server`).

`served` is the uvicorn server every one of our servers runs as; `served_in_thread`
runs one in a background thread for the length of a ``with`` block.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..engine.replicas import port_is_free
from ..errors import PortInUseError

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = [
    "HEADER_TIMEOUT_S",
    "MAX_HEAD_BYTES",
    "SERVED_IDLE_S",
    "UPSTREAM_IDLE_S",
    "served",
    "served_in_thread",
]

SERVED_IDLE_S = 75
UPSTREAM_IDLE_S = 2.0
HEADER_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024


def served(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    max_head_bytes: int = MAX_HEAD_BYTES,
) -> uvicorn.Server:
    """A uvicorn server for `app` on `host`:`port` as prefixkit runs its HTTP hops:
    idle client connections kept `SERVED_IDLE_S`; each request head given
    `header_timeout_s` to arrive (else 408) and `max_head_bytes` at most (else 431);
    warnings and errors logged, no access log, ``X-Forwarded-*`` headers not applied to
    the request's client address and scheme. `.run()` it, or run it in a thread and set
    `should_exit` to stop it."""
    import uvicorn

    from .http_server import bounded_protocol

    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            http=bounded_protocol(header_timeout_s, max_head_bytes),
            log_level="warning",
            timeout_keep_alive=SERVED_IDLE_S,
            # nothing reads the client's address or scheme, and the access log is off
            # at this level: per request, one ASGI layer and one logging call less
            proxy_headers=False,
            access_log=False,
        )
    )


@contextlib.contextmanager
def served_in_thread(
    app: ASGIApp,
    host: str,
    port: int,
    name: str = "prefixkit-server",
    timeout: float = 60.0,
    *,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    max_head_bytes: int = MAX_HEAD_BYTES,
) -> Iterator[str]:
    """Serve `app` (`served`) in a background thread until the block ends; yields its base
    URL once it accepts connections (its lifespan has started). Raises `PortInUseError`
    when the port is taken."""
    if not port_is_free(host, port):
        raise PortInUseError(
            f"port {port} on {host} is already in use: choose another port or stop the "
            f"process listening on http://{host}:{port}",
            port=port,
            host=host,
        )
    server = served(
        app, host, port, header_timeout_s=header_timeout_s, max_head_bytes=max_head_bytes
    )
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(10.0)
            raise PortInUseError(
                f"{name} did not start on {host}:{port}; its log says why (a port taken "
                "since it was checked, or an error in its start-up)",
                port=port,
                host=host,
            )
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10.0)
