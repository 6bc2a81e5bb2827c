"""A raw HTTP/1.1 client for hostile-tenant tests: the request target, headers and body go on
the wire exactly as given (an HTTP client library would normalise ``/x/../v1`` first)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class RawAnswer:
    status: int | None  # None: the server closed the connection without an answer
    head: bytes
    body: bytes


def raw_request(
    url: str,
    method: str,
    target: bytes,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    timeout: float = 10.0,
) -> RawAnswer:
    """Send one request on a new connection to the server at `url` and read its answer."""
    parts = urlsplit(url)
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: gateway"]
    lines += [f"{name}: {value}".encode() for name, value in headers]
    lines += [f"Content-Length: {len(body)}".encode(), b"Connection: close", b"", b""]
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(b"\r\n".join(lines) + body)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 "):
        return RawAnswer(None, head, rest)
    return RawAnswer(int(head[9:12]), head, rest)
