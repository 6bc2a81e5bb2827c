"""What the tests of the fake vLLM replica share: a prompt of token ids, a completion of it
under a salt, the cached tokens its answer reports, the KV events published meanwhile."""

from __future__ import annotations

import time
from typing import Any

import httpx
import msgpack
import zmq
from prefixkit.testing.fake_vllm import FakeVLLM

TOKENS = list(range(1000, 1000 + 5 * 32 + 7))  # 5 full blocks and a partial one


def complete(replica: FakeVLLM, prompt: Any, salt: str | None = None) -> dict[str, Any]:
    """The answer of `replica` to a completion of `prompt` under `salt`."""
    body: dict[str, Any] = {"model": "fake-model", "prompt": prompt, "max_tokens": 1}
    if salt is not None:
        body["cache_salt"] = salt
    response = httpx.post(f"{replica.url}/v1/completions", json=body, timeout=10)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


def cached(answer: dict[str, Any]) -> int:
    """The prompt tokens `answer` read from the prefix cache."""
    return int(answer["usage"]["prompt_tokens_details"]["cached_tokens"])


def published(endpoint: str, send: Any) -> list[dict[str, Any]]:
    """The events published while `send()` runs."""
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(endpoint)
    try:
        time.sleep(0.3)  # let the subscription reach the publisher
        send()
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if socket.poll(100):
                _topic, _seq, payload = socket.recv_multipart()
                events += msgpack.unpackb(payload, raw=False, strict_map_key=False)[1]
        return events
    finally:
        socket.close(linger=0)
        context.term()
