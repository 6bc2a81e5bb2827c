"""prefixkit.testing: test doubles for code that uses prefixkit (``pip install
'prefixkit[testing]'``).

* `prefixkit.testing.providers`: a recording mock transport for the official
  ``anthropic`` and ``openai`` clients that answers like the provider APIs, with
  realistic usage payloads and the providers' documented prompt caching.
* `prefixkit.testing.fake_vllm`: a fake OpenAI-compatible vLLM replica, served on
  loopback, with a prefix cache of whole blocks, vLLM's block hashes and KV events.
* `prefixkit.testing.ttft`: the time to first token and the cached tokens of a streamed
  answer of vLLM (or the fake), read from its server-sent events.
"""

from prefixkit.sdk import require_extra

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
