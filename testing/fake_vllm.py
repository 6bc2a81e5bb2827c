"""A fake OpenAI-compatible vLLM replica, for tests and benches of what sits in front of vLLM
(gateways, routers) without a GPU, a model or minutes of start-up.

    with FakeVLLM(kv_events=True) as replica:          # served on a free loopback port
        deployment_endpoint = replica.endpoint         # a ReplicaEndpoint for `deploy`
        ...                                            # requests to replica.url
        replica.cache_salts                            # the salt of every request it got

What it does as vLLM does: ``/health``, ``/version``, ``/v1/models``, ``/tokenize``
(``prompt`` or ``messages``), ``/metrics`` (the prefix-cache counters and
``vllm:cache_config_info`` that prefixkit reads), and ``/v1/completions``,
``/v1/chat/completions``, ``/v1/responses``, streamed or not, with ``usage`` carrying
the cached prompt tokens. Its prefix cache is an LRU of whole blocks (`PrefixCache`:
a request's blocks are most recent head first, so its tail leaves first), keyed by
vLLM's own block hashes (`prefixkit.sdk.block_hashes`, ``cache_salt`` in the first
block): a repeated prefix hits in whole blocks, the last block of a prompt is never
served from cache, another salt never hits. With `kv_events` (True: on an ipc socket
of its own; or the ZMQ endpoint to bind, e.g. ``"ipc:///tmp/r0.ipc"``), it publishes the blocks
it stores and evicts as vLLM's KV events (ZMQ PUB, ``[topic, seq, msgpack batch]``,
``BlockStored`` / ``BlockRemoved`` maps with vLLM's fields).

What it does not do: generate (every answer is ``"ok"`` repeated), run a real
tokenizer (`chars_tokenizer`: one token per 4 characters, deterministic) or a real
chat template (`chat_text`). Faults for tests: `delay_headers_s`, `delay_first_chunk_s`,
`break_after_chunks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import tempfile
import time
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import msgpack
from prefixkit.engine_adapter import ReplicaEndpoint
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.engine_adapter.serving.router import responses_chat_messages
from prefixkit.sdk import HashAlgo, event_block_hashes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from .openai_answers import (
    Reply,
    chat_completion,
    chat_events,
    completion,
    completion_events,
    response_object,
    responses_events,
    sse,
)

__all__ = ["FakeVLLM", "PrefixCache", "chars_tokenizer", "chat_text", "free_port"]

Tokenizer = Callable[[str], list[int]]


def chars_tokenizer(text: str) -> list[int]:
    """One token per 4 characters (the last one shorter), a deterministic id each."""
    return [zlib.crc32(text[i : i + 4].encode()) % 49_152 for i in range(0, len(text), 4)]


def chat_text(messages: Sequence[dict[str, Any]], tools: Sequence[Any] | None = None) -> str:
    """The fake's chat template: tools first, then each message as ``<|role|>content``,
    then the generation prompt ``<|assistant|>``."""
    parts = [f"<|tools|>{json.dumps(tools, sort_keys=True)}"] if tools else []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        calls = message.get("tool_calls")
        parts.append(f"<|{message.get('role')}|>{content or ''}")
        if calls:
            parts.append(json.dumps(calls, sort_keys=True))
    return "".join(parts) + "<|assistant|>"


class PrefixCache:
    """One replica's prefix cache as vLLM keeps it: an LRU of `capacity` blocks in which
    a request's blocks are most recent head first (its tail is evicted first)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lru: OrderedDict[int, None] = OrderedDict()

    def cached_run(self, hashes: Sequence[int]) -> int:
        """How many of `hashes`, from the first, the cache holds."""
        return next((i for i, h in enumerate(hashes) if h not in self.lru), len(hashes))

    def admit(self, hashes: Sequence[int]) -> tuple[list[int], list[int]]:
        """Cache a request's blocks: (the blocks newly stored, the blocks evicted)."""
        lru = self.lru
        stored = [h for h in hashes if h not in lru]
        for block in reversed(hashes):
            lru[block] = None
            lru.move_to_end(block)
        evicted = []
        while len(lru) > self.capacity:
            evicted.append(lru.popitem(last=False)[0])
        return stored, evicted


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (for a server a test is about to start)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _error(status: int, message: str, kind: str = "BadRequestError") -> JSONResponse:
    # vLLM's error body
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": status}},
        status_code=status,
    )


class FakeVLLM:
    """A fake vLLM replica (see the module docstring), served in a background thread from
    `start` (or entering it as a context manager) to `stop`."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        block_size: int = 32,
        capacity_blocks: int = 2000,
        kv_events: bool | str = False,
        hash_algo: HashAlgo = "sha256_cbor",
        tokenizer: Tokenizer = chars_tokenizer,
        prefill_s_per_block: float = 0.0,
        chunks: int = 8,
        chunk_interval_s: float = 0.0,
        max_model_len: int = 1 << 20,
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        self.model = model
        self.block_size = block_size
        self.hash_algo: HashAlgo = hash_algo
        self.tokenizer = tokenizer
        self.prefill_s_per_block = prefill_s_per_block
        self.chunks = chunks
        self.chunk_interval_s = chunk_interval_s
        self.max_model_len = max_model_len
        self.host = host
        self.port = port or free_port(host)
        self.cache = PrefixCache(capacity_blocks)
        # faults a test sets
        self.delay_headers_s = 0.0
        self.delay_first_chunk_s = 0.0
        self.break_after_chunks: int | None = None
        # what it saw
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.tokenized = 0
        self.streams_cancelled = 0
        self.queried_tokens = 0
        self.hit_tokens = 0
        self._events_dir: tempfile.TemporaryDirectory[str] | None = None
        self.kv_events_endpoint = kv_events if isinstance(kv_events, str) else None
        if kv_events is True:
            self._events_dir = tempfile.TemporaryDirectory(prefix="pkfake-")
            self.kv_events_endpoint = f"ipc://{self._events_dir.name}/kv.ipc"
        self._publisher: Any = None
        self._sequence = itertools.count()
        self._serving = contextlib.ExitStack()  # the server thread, while it runs

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> ReplicaEndpoint:
        """This replica as `deploy` and the routers take it."""
        return ReplicaEndpoint(
            url=self.url,
            kv_events=self.kv_events_endpoint,
            block_size=self.block_size,
            hash_algo=self.hash_algo,
        )

    @property
    def cache_salts(self) -> list[str | None]:
        """The ``cache_salt`` of every generation request, in order."""
        return [body.get("cache_salt") for _, body in self.requests]

    def token_ids(self, body: dict[str, Any], path: str) -> list[int]:
        """The prompt's token ids as this replica sees them."""
        if path.endswith("/responses"):
            messages, tools = responses_chat_messages(body)
            return self.tokenizer(chat_text(messages, tools))
        if "messages" in body:
            return self.tokenizer(chat_text(body["messages"], body.get("tools")))
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        if isinstance(prompt, list):
            prompt = "".join(str(p) for p in prompt)
        return self.tokenizer(str(prompt))

    def start(self) -> FakeVLLM:
        if self.kv_events_endpoint is not None:
            import zmq

            self._publisher = zmq.Context.instance().socket(zmq.PUB)
            self._publisher.setsockopt(zmq.LINGER, 0)
            self._publisher.bind(self.kv_events_endpoint)
        self._serving.enter_context(served_in_thread(self.app(), self.host, self.port, "fake-vllm"))
        return self

    def stop(self) -> None:
        """Stop serving (idempotent): connections to it are refused from now on."""
        self._serving.close()
        if self._publisher is not None:
            self._publisher.close(linger=0)
            self._publisher = None

    def __enter__(self) -> FakeVLLM:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        if self._events_dir is not None:
            self._events_dir.cleanup()

    def _publish(
        self, stored: list[int], parent: int | None, ids: list[int], evicted: list[int]
    ) -> None:
        if self._publisher is None or not (stored or evicted):
            return
        events: list[dict[str, Any]] = []
        if stored:
            events.append(
                {
                    "type": "BlockStored",
                    "block_hashes": stored,
                    "parent_block_hash": parent,
                    "token_ids": ids,
                    "block_size": self.block_size,
                    "lora_id": None,
                    "medium": "CPU",
                    "lora_name": None,
                    "group_idx": 0,
                }
            )
        if evicted:
            events.append(
                {"type": "BlockRemoved", "block_hashes": evicted, "medium": "CPU", "group_idx": 0}
            )
        payload = msgpack.packb([time.time(), events, None])
        sequence = next(self._sequence).to_bytes(8, "big")
        self._publisher.send_multipart([b"kv", sequence, payload])

    def metrics_text(self) -> str:
        """The Prometheus exposition of ``/metrics``."""
        labels = f'engine="0",model_name="{self.model}"'
        usage = len(self.cache.lru) / self.cache.capacity if self.cache.capacity else 0.0
        return "".join(
            f"{line}\n"
            for line in (
                "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in tokens.",
                "# TYPE vllm:prefix_cache_queries_total counter",
                f"vllm:prefix_cache_queries_total{{{labels}}} {float(self.queried_tokens)}",
                "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.",
                "# TYPE vllm:prefix_cache_hits_total counter",
                f"vllm:prefix_cache_hits_total{{{labels}}} {float(self.hit_tokens)}",
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f"vllm:kv_cache_usage_perc{{{labels}}} {usage}",
                "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                "# TYPE vllm:cache_config_info gauge",
                f'vllm:cache_config_info{{block_size="{self.block_size}",'
                'enable_prefix_caching="True",engine="0",'
                f'num_gpu_blocks="{self.cache.capacity}",'
                f'prefix_caching_hash_algo="{self.hash_algo}"}} 1.0',
            )
        )

    def app(self) -> Starlette:
        """The ASGI app of this replica."""

        async def health(request: Request) -> Response:
            return Response(status_code=200)

        async def version(request: Request) -> JSONResponse:
            return JSONResponse({"version": "0.0.0+fake"})

        async def models(request: Request) -> JSONResponse:
            model = {
                "id": self.model,
                "object": "model",
                "created": 0,
                "owned_by": "vllm",
                "root": self.model,
                "max_model_len": self.max_model_len,
            }
            return JSONResponse({"object": "list", "data": [model]})

        async def metrics(request: Request) -> PlainTextResponse:
            return PlainTextResponse(self.metrics_text())

        async def tokenize(request: Request) -> JSONResponse:
            self.tokenized += 1
            body = await request.json()
            messages = body.get("messages")
            if "messages" in body and not (
                isinstance(messages, list)
                and messages
                and all(isinstance(m, dict) and "role" in m for m in messages)
            ):
                return _error(400, "messages must be a non-empty list of messages with a role")
            ids = self.token_ids(body, "/tokenize")
            return JSONResponse(
                {
                    "count": len(ids),
                    "max_model_len": self.max_model_len,
                    "tokens": ids,
                    "token_strs": None,
                }
            )

        async def generate(request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return _error(400, "the request body is not JSON")
            if not isinstance(body, dict):
                return _error(400, "the request body must be a JSON object")
            path = request.url.path
            if body.get("model") != self.model:
                return _error(
                    404, f"The model `{body.get('model')}` does not exist.", "NotFoundError"
                )
            salt = body.get("cache_salt")
            if salt is not None and (not isinstance(salt, str) or not salt):
                return _error(400, "cache_salt must be a non-empty string")
            self.requests.append((path, body))
            if self.delay_headers_s:
                await asyncio.sleep(self.delay_headers_s)
            ids = self.token_ids(body, path)
            hashes = event_block_hashes(ids, self.block_size, algo=self.hash_algo, cache_salt=salt)
            run = self.cache.cached_run(hashes)
            cached = min(run, (len(ids) - 1) // self.block_size if ids else 0) * self.block_size
            self.queried_tokens += len(ids)
            self.hit_tokens += cached
            prefill_s = (len(hashes) - run) * self.prefill_s_per_block
            answer = _Answer(path, body, self.model, len(ids), cached, self.chunks)
            if not body.get("stream"):
                await asyncio.sleep(prefill_s)
                self._cache(hashes, ids)
                return JSONResponse(answer.whole())
            return StreamingResponse(
                self._stream(answer, prefill_s, hashes, ids), media_type="text/event-stream"
            )

        routes = [
            Route("/health", health),
            Route("/version", version),
            Route("/v1/models", models),
            Route("/metrics", metrics),
            Route("/tokenize", tokenize, methods=["POST"]),
            *(
                Route(path, generate, methods=["POST"])
                for path in ("/v1/completions", "/v1/chat/completions", "/v1/responses")
            ),
        ]
        return Starlette(routes=routes)

    def _cache(self, hashes: list[int], ids: list[int]) -> None:
        run = self.cache.cached_run(hashes)
        stored, evicted = self.cache.admit(hashes)
        parent = hashes[run - 1] if run else None
        self._publish(
            stored, parent, ids[run * self.block_size : len(hashes) * self.block_size], evicted
        )

    async def _stream(
        self, answer: _Answer, prefill_s: float, hashes: list[int], ids: list[int]
    ) -> AsyncIterator[bytes]:
        try:
            await asyncio.sleep(prefill_s + self.delay_first_chunk_s)
        except asyncio.CancelledError:
            self.streams_cancelled += 1
            raise
        self._cache(hashes, ids)
        for number, event in enumerate(answer.events()):
            if self.break_after_chunks is not None and number >= self.break_after_chunks:
                raise RuntimeError("the fake replica broke the stream off")
            yield event
            if self.chunk_interval_s:
                await asyncio.sleep(self.chunk_interval_s)


class _Answer:
    """One generation's answer in the shape of its API, whole or as server-sent events."""

    def __init__(
        self, path: str, body: dict[str, Any], model: str, prompt: int, cached: int, chunks: int
    ) -> None:
        self.path = path
        self.body = body
        self.model = model
        self.prompt = prompt
        self.cached = cached
        limit = (
            body.get("max_tokens")
            or body.get("max_completion_tokens")
            or body.get("max_output_tokens")
        )
        self.reply = Reply(["ok"] * (min(int(limit), chunks) if limit else chunks), "length")

    def usage(self) -> dict[str, Any]:
        output = len(self.reply.pieces)
        if self.path.endswith("/responses"):
            return {
                "input_tokens": self.prompt,
                "input_tokens_details": {"cached_tokens": self.cached},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt + output,
            }
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": output,
            "total_tokens": self.prompt + output,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        }

    def whole(self) -> dict[str, Any]:
        if self.path.endswith("/responses"):
            return response_object(self.model, "fake", self.usage(), self.reply)
        if self.path.endswith("/chat/completions"):
            return chat_completion(self.model, "fake", self.usage(), self.reply)
        return completion(self.model, "fake", self.usage(), self.reply)

    def events(self) -> list[bytes]:
        """The server-sent events of the streamed answer, in order."""
        if self.path.endswith("/responses"):
            return sse(responses_events(self.whole(), self.reply))
        if self.path.endswith("/chat/completions"):
            return sse(chat_events(self.body, "fake", self.usage(), self.reply))
        return sse(completion_events(self.body, "fake", self.usage(), self.reply))
