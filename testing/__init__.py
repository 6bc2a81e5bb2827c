"""prefixkit.testing: test doubles for code that uses prefixkit (``pip install
'prefixkit[testing]'``).

* `prefixkit.testing.providers`: a recording mock transport for the official
  ``anthropic`` and ``openai`` clients that answers like the provider APIs, with
  realistic usage payloads and the providers' documented prompt caching.
* `prefixkit.testing.fake_vllm`: a fake vLLM replica serving vLLM's routes on loopback,
  with a prefix cache of whole blocks, vLLM's block hashes and KV events, and a log of
  every request it received (`ReceivedRequest`, also exported here).
* `prefixkit.testing.ttft`: the time to first token and the cached tokens of a streamed
  answer of vLLM (or the fake), read from its server-sent events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixkit.sdk import require_extra
from prefixkit.sdk.exports import lazy_exports

require_extra(
    "testing",
    "prefixkit.testing",
    "anthropic",
    "openai",
    "httpx",
    "starlette",
    "uvicorn",
    "zmq",
    "msgpack",
)

if TYPE_CHECKING:
    from .request_log import ReceivedRequest as ReceivedRequest

_EXPORTS: dict[str, str] = {"ReceivedRequest": "request_log"}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
