"""Admission of a request body: parsed once, checked, salted, and a bounded view of it kept
for the routing stage. Pure functions (`admit_body`), and `BodyWorkers`, which runs them in
worker processes for large bodies so that one tenant's 8 MB body never stalls the event
loop every other tenant's requests (and ``/health``) are answered on.

A body the gateway forwards is a JSON object it has read whole: uncompressed
(``Content-Encoding`` other than identity: 415), ``Content-Type: application/json``
(else 415), valid JSON (400), an object (400), nested at most `max_depth` deep (400),
valid Unicode (a lone surrogate escape such as ``"\\ud800"``: 400). A client's
``cache_salt`` and the router's pin field are removed, and the tenant's salt is set when
the route is salted; under a salt, the ``uuid`` a media part of a message carries (the key
of vLLM's multimodal caches) is prefixed with it (`namespace_media_ids`). Nothing else
in the body changes: user content passes through as given.

A body that holds none of the keys to remove passes byte for byte, the salt (and pin) added
as its last keys. One that holds them, or that may read differently to another JSON parser,
is serialised again as compact JSON from the parsed object, so that each key is left once
with the value the gateway read (the last of duplicates, as Python's and vLLM's parsers
keep): a body with a ``\\u`` escape (a lone surrogate such as ``\\ud800`` is refused there, a
key spelled with escapes is one the gateway sees), one of the keys the gateway reads
(``stream``, ``stream_options``, ``include_usage``) written twice, a byte order mark, or
text that is not strict UTF-8 (UTF-16, surrogates encoded in UTF-8). Any other key written
twice passes as written: what the routing stage read of it (the last) only places the
request, and vLLM's server (Python's parser) reads the last too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import multiprocessing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .refused import Refused

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "INLINE_BODY_BYTES",
    "AdmittedBody",
    "BodyWorkers",
    "admit_body",
    "bounded",
    "namespace_media_ids",
]

DEFAULT_MAX_DEPTH = 64
# bodies up to this size are admitted on the event loop (well under a millisecond)
INLINE_BODY_BYTES = 256 * 1024
_NO_FIELDS: Mapping[str, object] = MappingProxyType({})
# the keys the gateway reads a body's meaning from besides those it sets (`tenant_usage`),
# as JSON strings: a body holding one twice is serialised again, its last value kept
_READ_KEYS = (b'"stream"', b'"stream_options"', b'"include_usage"')


@dataclass(frozen=True)
class AdmittedBody:
    """The body to forward, and the request as the routing stage reads it (`bounded`)."""

    body: bytes
    view: dict[str, Any]


def admit_body(
    raw: bytes,
    *,
    content_type: str,
    content_encoding: str,
    fields: Mapping[str, object] = _NO_FIELDS,
    strip: Iterable[str] = ("cache_salt",),
    max_depth: int = DEFAULT_MAX_DEPTH,
    view_budget: int = 1 << 17,
) -> AdmittedBody:
    """Check `raw` and return it without the `strip` keys and with `fields` set (the
    tenant's ``cache_salt``, a pin: module docstring); raises `Refused`."""
    encoding = content_encoding.strip().lower()
    if encoding not in ("", "identity"):
        raise Refused(
            415,
            f"Content-Encoding {content_encoding!r} is not accepted: send the body uncompressed",
            "unsupported_media_type",
        )
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise Refused(
            415,
            f"Content-Type {content_type or '(none)'!r} is not accepted: send a JSON object "
            "with Content-Type: application/json",
            "unsupported_media_type",
        )
    try:
        payload = json.loads(raw)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as error:
        raise Refused(
            400, f"request body is not valid JSON: {error}", "invalid_request_error"
        ) from None
    if not isinstance(payload, dict):
        raise Refused(
            400,
            f"request body must be a JSON object, got {_json_type(payload)}",
            "invalid_request_error",
        )
    if raw.count(b"[") + raw.count(b"{") > max_depth and _depth(payload) > max_depth:
        raise _too_deep(max_depth)
    salt = fields.get("cache_salt")
    namespaced = (
        isinstance(salt, str)
        and (b"uuid" in raw or b"\\u" in raw)
        and namespace_media_ids(payload, salt)
    )
    as_sent = None if namespaced else _as_sent(raw, payload, fields, strip)
    for key in strip:
        payload.pop(key, None)
    payload.update(fields)
    if as_sent is not None:
        body = as_sent + _fields_after(fields, len(payload) > len(fields))
    else:
        body = _serialised(payload)
    # a body of at most `view_budget` bytes is within the budget as it is: no copy
    view = payload if len(raw) <= view_budget else bounded(payload, view_budget)
    return AdmittedBody(body, view)


def _as_sent(
    raw: bytes, payload: dict[str, Any], fields: Mapping[str, object], strip: Iterable[str]
) -> bytes | None:
    """`raw` without its closing brace, when the body passes as the client sent it (module
    docstring), else None (it is serialised again)."""
    if any(key in payload for key in strip) or any(key in payload for key in fields):
        return None
    if b"\\u" in raw or b"\x00" in raw or raw.startswith(b"\xef\xbb\xbf"):
        return None
    if any(raw.count(key) > 1 for key in _READ_KEYS):
        return None
    try:
        raw.decode()  # strictly: json.loads passes surrogates encoded in UTF-8
    except UnicodeDecodeError:
        return None
    return raw.rstrip(b" \t\r\n")[:-1]


def namespace_media_ids(payload: dict[str, Any], salt: str) -> bool:
    """Prefix the ``uuid`` of every item of the body's messages (Chat and Messages
    ``messages``, Responses ``input``) and of their content parts, at any depth, with
    `salt`; whether there was one. vLLM takes a media part's ``uuid`` as the item's hash,
    the key of its processor and encoder caches, which the salt does not reach: another
    tenant sending the same ``uuid`` would be given this tenant's image. Under its own salt
    a tenant's ``uuid`` still names its item."""
    found = False
    pending = [payload.get("messages"), payload.get("input")]
    while pending:
        parts = pending.pop()
        if not isinstance(parts, list):
            continue
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("uuid") is not None:
                part["uuid"] = f"{salt}:{part['uuid']}"
                found = True
            pending.append(part.get("content"))  # a tool result's own parts
    return found


def _fields_after(fields: Mapping[str, object], after_keys: bool) -> bytes:
    """The closing brace of a body, `fields` before it (after its keys: `after_keys`)."""
    if not fields:
        return b"}"
    pairs = _serialised(dict(fields))[1:]
    return b"," + pairs if after_keys else pairs


def _serialised(payload: dict[str, Any]) -> bytes:
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        raise Refused(
            400,
            "request body has a lone surrogate escape (such as \\ud800), which is not valid "
            "Unicode: send text as UTF-8 or as escaped surrogate pairs",
            "invalid_request_error",
        ) from None


def bounded(value: Any, budget: int) -> Any:
    """A copy of a parsed JSON value cut to about `budget` units (a character of a string,
    an item of a list): the start of a request, all a router needs to place it. A JSON
    text of `budget` bytes or fewer has fewer units than that."""
    left = [budget]
    return _bounded(value, left)


def _bounded(value: Any, left: list[int]) -> Any:
    if isinstance(value, str):
        kept = value[: max(left[0], 0)]
        left[0] -= len(kept)
        return kept
    if isinstance(value, list):
        items = []
        for item in value:
            if left[0] <= 0:
                break
            left[0] -= 1
            items.append(_bounded(item, left))
        return items
    if isinstance(value, dict):
        return {key: _bounded(item, left) for key, item in value.items()}
    return value


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (a scalar: 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest if isinstance(value, (dict, list)) else 0


def _too_deep(max_depth: int) -> Refused:
    return Refused(
        400,
        f"request body nests JSON deeper than {max_depth} levels",
        "invalid_request_error",
    )


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


class BodyWorkers:
    """Admits bodies: small ones on the event loop, large ones (over `inline_bytes`) in a
    pool of `workers` processes, started on first use and stopped by `close`.

    The processes start in a thread, all at once: starting one blocks its caller for tens
    of milliseconds, which on the event loop is every other request's wait."""

    def __init__(self, workers: int = 2, inline_bytes: int = INLINE_BODY_BYTES) -> None:
        self.workers = workers
        self.inline_bytes = inline_bytes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._starting = asyncio.Lock()

    async def admit(self, raw: bytes, **options: Any) -> AdmittedBody:
        """`admit_body(raw, **options)`, off the event loop when `raw` is large."""
        if len(raw) <= self.inline_bytes:
            return admit_body(raw, **options)
        async with self._starting:
            if self._pool is None:
                self._pool = await asyncio.to_thread(self._started_pool)
        call = functools.partial(admit_body, raw, **options)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def _started_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        """A pool whose `workers` processes have all started (a pool starts one process per
        task submitted while none is idle)."""
        pool = concurrent.futures.ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("forkserver")
        )
        for started in [pool.submit(int) for _ in range(self.workers)]:
            started.result()
        return pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
