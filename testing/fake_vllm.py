"""A fake vLLM 0.32 replica, for tests and benches of what sits in front of vLLM (gateways,
routers) without a GPU, a model or minutes of start-up.

    with FakeVLLM(kv_events=True) as replica:          # served on a free loopback port
        deployment_endpoint = replica.endpoint         # a ReplicaEndpoint for `deploy`
        ...                                            # requests to replica.url
        replica.requests                               # every request it received, as sent
        replica.cache_salts                            # the salt of every generation request

It serves vLLM 0.32's routes, paths and methods as its ``/openapi.json`` lists them, the
development ones (``/reset_prefix_cache``, ``/sleep``, ``/collective_rpc``, ...) only with
`dev_mode` (``VLLM_SERVER_DEV_MODE=1``); other paths 404 and other methods 405, as FastAPI
answers. Every request is logged before routing (`ReceivedRequest`). Every generation route
(`GENERATION_PATHS`) looks its prompts up in one prefix cache: an LRU of whole blocks
(`PrefixCache`) keyed by vLLM's block hashes with the request's ``cache_salt`` in the first
block, so a repeated prefix hits in whole blocks but never its last block nor under another
salt; its block hashes are those of the vLLM version it reports on ``/version``
(`vllm_version`, 0.32 by default). A request's blocks are cached as it is looked up, before its prefill time
(`prefill_s_per_block` per uncached block) passes, as vLLM's scheduler caches the blocks
it allocates: a request sent while another with the same prefix is being prefilled reads
that one's blocks. With `offload_blocks` it also keeps a host-memory tier of that many
blocks, as vLLM's CPU offloading does when it offloads the blocks its GPU cache evicts:
those blocks move there (least recently used leave it), a prompt's cached run continues
over them (a hit there is loaded, `offload_load_s_per_block` each, instead of computed). ``usage`` reports the hits (``cached_tokens``; on ``/v1/messages``, Anthropic's
``cache_read_input_tokens`` and ``cache_creation_input_tokens``), ``/metrics`` the counters
prefixkit reads. With `kv_events` (True: on an ipc socket of its own; or the ZMQ endpoint to
bind) it publishes vLLM's KV events: ``BlockStored``, ``BlockRemoved`` (``medium``
``GPU`` for its cache, ``CPU`` for the offloaded tier), and ``AllBlocksCleared`` when a
development route empties the caches.

Its prompt tokens: by default no real tokenizer (`chars_tokenizer`: one token per 4
characters) nor chat template (`chat_text`); with `model_dir` (a model folder), the ids vLLM
0.32 computes from that folder's tokenizer and chat template
(`prefixkit.engine_adapter.routing.prompt_tokens.PromptTokenizer`, which needs the ``hf``
extra) for ``/tokenize``, the generation routes and their KV events, and the default way for
what that cannot reproduce exactly. What it does not do: generate (every answer is ``"ok"``
repeated), check bodies field by field as vLLM's models do, or hold requests while paused or
asleep. Faults for tests:
`delay_headers_s`, `delay_first_chunk_s`, `break_after_chunks`. A client that hangs up aborts
its request, as in vLLM (`streams_cancelled`, `requests_aborted` count them).
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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import msgpack
from prefixkit.engine_adapter import ReplicaEndpoint
from prefixkit.engine_adapter.serving.keepalive import served_in_thread
from prefixkit.engine_adapter.serving.router import responses_chat_messages
from prefixkit.sdk import HashAlgo, event_block_hashes, vllm_version_of
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from .anthropic_answers import chat_messages, token_count
from .openai_answers import Reply
from .request_log import ReceivedRequest, RequestLog, logged
from .vllm_answers import (
    Answer,
    Prefill,
    batch_chat_completion,
    batch_conversations,
    decision_conversations,
    generative_scores,
    openai_usage,
    scoring_prompts,
    structured_decision,
)
from .vllm_dev_routes import DevRoutes
from .vllm_http import (
    Refused,
    checked_salt,
    detail,
    fixed,
    json_body,
    json_object,
    not_routed,
    route,
)

__all__ = [
    "GENERATION_PATHS",
    "FakeVLLM",
    "PrefixCache",
    "ReceivedRequest",
    "chars_tokenizer",
    "chat_text",
    "free_port",
]

Tokenizer = Callable[[str], list[int]]

GENERATION_PATHS = frozenset(
    {
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/chat/completions/batch",
        "/invocations",
        "/generative_scoring",
        "/v1/systemone",
    }
)
_STORED_RESPONSES = 1000  # the Responses answers kept for GET /v1/responses/{id}
# the API whose prompt a request to a path renders, as `PromptTokenizer.tokens` takes it
_PROMPT_PATHS = {
    "/v1/completions": "/v1/completions",
    "/v1/chat/completions": "/v1/chat/completions",
    "/v1/responses": "/v1/responses",
    "/v1/messages": "/v1/messages",
}

PromptTokens = Callable[[str, Mapping[str, Any]], "list[int] | None"]


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


_APIS = {
    "/v1/completions": "completions",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


async def _disconnected(request: Request) -> None:
    """Return when the client of `request` (its body read already) hangs up."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _api(path: str, body: dict[str, Any]) -> str:
    """Which API answers a single-prompt generation: SageMaker's ``/invocations`` is Chat
    Completions for a body with ``messages``, Completions otherwise."""
    if path == "/invocations":
        return "chat" if "messages" in body else "completions"
    return _APIS[path]


def _check_chat_contents(body: dict[str, Any], path: str) -> None:
    """Raise `TypeError` for a Chat Completions message vLLM's request model refuses: not
    an object, or with content other than text, a list of parts or none."""
    messages = body.get("messages")
    if path not in ("/v1/chat/completions", "/tokenize", "/invocations") or not isinstance(
        messages, list
    ):
        return
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError("a message is not an object")
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise TypeError("a message's content is neither text nor a list of parts")


class FakeVLLM:
    """A fake vLLM replica (see the module docstring), served in a background thread from
    `start` (or entering it as a context manager) to `stop`."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        block_size: int = 32,
        capacity_blocks: int = 2000,
        offload_blocks: int = 0,
        offload_load_s_per_block: float = 0.0,
        kv_events: bool | str = False,
        hash_algo: HashAlgo = "sha256_cbor",
        tokenizer: Tokenizer = chars_tokenizer,
        prefill_s_per_block: float = 0.0,
        chunks: int = 8,
        chunk_interval_s: float = 0.0,
        max_model_len: int = 1 << 20,
        dev_mode: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        model_dir: Path | None = None,
        vllm_version: str = "0.32.0+fake",
    ) -> None:
        self.model = model
        self.model_dir = model_dir
        self._prompt_tokens = None if model_dir is None else _prompt_tokens(model_dir)
        self.block_size = block_size
        self.hash_algo: HashAlgo = hash_algo
        self.vllm_version = vllm_version  # `/version`; blocks hashed as that version does
        self._vllm = vllm_version_of(vllm_version)
        self.tokenizer = tokenizer
        self.prefill_s_per_block = prefill_s_per_block
        self.chunks = chunks
        self.chunk_interval_s = chunk_interval_s
        self.max_model_len = max_model_len
        self.dev_mode = dev_mode
        self.host = host
        self.port = port or free_port(host)
        self.cache = PrefixCache(capacity_blocks)
        # the host-memory tier the blocks evicted from `cache` move to (None: no offloading)
        self.offloaded = PrefixCache(offload_blocks) if offload_blocks else None
        self.offload_load_s_per_block = offload_load_s_per_block
        # faults a test sets
        self.delay_headers_s = 0.0
        self.delay_first_chunk_s = 0.0
        self.break_after_chunks: int | None = None
        # what it saw
        self.tokenized = 0
        self.streams_cancelled = 0
        self.requests_aborted = 0  # non-streaming requests whose client left first
        self.queried_tokens = 0
        self.hit_tokens = 0
        self._log = RequestLog()
        self._in_flight = 0
        self._answer_ids = itertools.count(1)
        self._responses: OrderedDict[str, dict[str, Any]] = OrderedDict()
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
            model=self.model_dir,
        )

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request received so far, in order of arrival (a copy): health checks,
        metrics, refused and unknown paths included."""
        return self._log.snapshot()

    @property
    def generations(self) -> list[ReceivedRequest]:
        """The requests to a generation route (`GENERATION_PATHS`), in order."""
        return [r for r in self.requests if r.path in GENERATION_PATHS]

    @property
    def cache_salts(self) -> list[str | None]:
        """The ``cache_salt`` of every request to a generation route, in order."""
        return [r.cache_salt for r in self.generations]

    def token_ids(self, body: dict[str, Any], path: str) -> list[int]:
        """The prompt's token ids as this replica sees them, for a request to `path`
        (``/tokenize`` reads a body with ``messages`` as a chat, else as a completion)."""
        if self._prompt_tokens is not None:
            if path in ("/tokenize", "/invocations"):
                path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            computed = self._prompt_tokens(_PROMPT_PATHS.get(path, path), body)
            if computed is not None:
                return computed
        if path.endswith("/responses"):
            messages, tools = responses_chat_messages(body)
            return self.tokenizer(chat_text(messages, tools))
        if path.startswith("/v1/messages"):
            return self.tokenizer(chat_text(chat_messages(body), body.get("tools")))
        if "messages" in body:
            return self.tokenizer(chat_text(body["messages"], body.get("tools")))
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            if not all(0 <= t < 1 << 64 for t in prompt):
                raise ValueError("a token id of the prompt is out of the vocabulary")
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

    def _publish(self, events: list[dict[str, Any]]) -> None:
        if self._publisher is None or not events:
            return
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

    def app(self) -> ASGIApp:
        """The ASGI app of this replica: its routes, behind the request log."""
        routes = self._routes()
        if self.dev_mode:
            info = {"model": self.model, "block_size": self.block_size, "hash": self.hash_algo}
            routes += DevRoutes(self._clear, info).routes()
        app = Starlette(routes=routes, exception_handlers={HTTPException: not_routed})
        return logged(app, self._log)

    def _routes(self) -> list[Route]:
        """The routes vLLM 0.32 serves in any mode."""
        return [
            route("/health", self._health, "GET"),
            route("/ping", self._health, "GET", "POST"),
            route("/load", self._load, "GET"),
            route("/version", fixed({"version": self.vllm_version}), "GET"),
            route("/kv_event_sources", self._kv_event_sources, "GET"),
            route("/metrics", self._metrics, "GET"),
            route("/v1/models", self._models, "GET"),
            route("/tokenize", self._tokenize, "POST"),
            route("/detokenize", self._detokenize, "POST"),
            *(
                route(path, self._generate, "POST")
                for path in (
                    "/v1/completions",
                    "/v1/chat/completions",
                    "/v1/responses",
                    "/v1/messages",
                    "/invocations",
                )
            ),
            route("/v1/messages/count_tokens", self._count_tokens, "POST"),
            route("/v1/chat/completions/batch", self._batch, "POST"),
            route("/generative_scoring", self._score, "POST"),
            route("/v1/systemone", self._decide, "POST"),
            route("/v1/responses/{response_id}", self._retrieve, "GET"),
            route("/v1/responses/{response_id}/cancel", self._cancel, "POST"),
            route("/scale_elastic_ep", self._scale_elastic_ep, "POST"),
            route("/is_scaling_elastic_ep", fixed({"is_scaling_elastic_ep": False}), "POST"),
        ]

    # the engine: one prefix cache behind every generation route

    def _prefill(self, ids: list[int], salt: str | None) -> Prefill:
        """Look `ids` up in the prefix cache under `salt` (vLLM's block hashes)."""
        size = self.block_size
        hashes = event_block_hashes(
            ids, size, algo=self.hash_algo, cache_salt=salt, vllm=self._vllm
        )
        run = self._cached_run(hashes)
        cached = min(run, (len(ids) - 1) // size if ids else 0) * size
        self.queried_tokens += len(ids)
        self.hit_tokens += cached
        seconds = (len(hashes) - run) * self.prefill_s_per_block
        if self.offloaded is not None:
            lru = self.cache.lru
            loaded = sum(1 for block in hashes[:run] if block not in lru)
            seconds += loaded * self.offload_load_s_per_block
        return Prefill(ids, hashes, cached, len(hashes) * size - cached, seconds)

    def _cached_run(self, hashes: Sequence[int]) -> int:
        """How many of `hashes`, from the first, its cache or its offloaded tier holds."""
        if self.offloaded is None:
            return self.cache.cached_run(hashes)
        gpu, cpu = self.cache.lru, self.offloaded.lru
        return next((i for i, h in enumerate(hashes) if h not in gpu and h not in cpu), len(hashes))

    async def _prefilled(self, prompts: list[list[int]], salt: str | None) -> list[Prefill]:
        """Prefill `prompts` (one request's) as vLLM's scheduler allocates them: looked up
        in the prefix cache, then their blocks cached (and published) at once, before the
        prefill time passes. A request sent while another with the same prefix is being
        prefilled reads that one's blocks; the prompts of one request do not read each
        other's."""
        prefills = [self._prefill(ids, salt) for ids in prompts]
        for prefill in prefills:
            self._commit(prefill)
        await asyncio.sleep(sum(prefill.seconds for prefill in prefills))
        return prefills

    def _commit(self, prefill: Prefill) -> None:
        """Cache a prefilled prompt's blocks, publishing what is stored and evicted."""
        hashes, ids = prefill.hashes, prefill.ids
        run = self.cache.cached_run(hashes)
        stored, evicted = self.cache.admit(hashes)
        events: list[dict[str, Any]] = []
        if stored:
            events.append(
                {
                    "type": "BlockStored",
                    "block_hashes": stored,
                    "parent_block_hash": hashes[run - 1] if run else None,
                    "token_ids": ids[run * self.block_size : len(hashes) * self.block_size],
                    "block_size": self.block_size,
                    "lora_id": None,
                    "medium": "GPU",
                    "lora_name": None,
                    "group_idx": 0,
                }
            )
        if evicted:
            events.append(
                {"type": "BlockRemoved", "block_hashes": evicted, "medium": "GPU", "group_idx": 0}
            )
            if self.offloaded is not None:
                events += self._offload(evicted)
        self._publish(events)

    def _offload(self, evicted: list[int]) -> list[dict[str, Any]]:
        """Move blocks the cache evicted to the offloaded tier: the events of what it
        newly stores (announced one block an event, as vLLM's CPU offloading does) and
        of what it evicts in turn."""
        assert self.offloaded is not None
        stored, dropped = self.offloaded.admit(list(reversed(evicted)))
        events: list[dict[str, Any]] = [
            {
                "type": "BlockStored",
                "block_hashes": [block],
                "parent_block_hash": None,
                "token_ids": [],
                "block_size": self.block_size,
                "lora_id": None,
                "medium": "CPU",
                "lora_name": None,
                "group_idx": 0,
                "locality": "LOCAL",
            }
            for block in stored
        ]
        if dropped:
            events.append(
                {
                    "type": "BlockRemoved",
                    "block_hashes": dropped,
                    "medium": "CPU",
                    "group_idx": 0,
                    "locality": "LOCAL",
                }
            )
        return events

    def _clear(self) -> None:
        """Empty the prefix cache and the offloaded tier, as vLLM's reset of its caches does."""
        self.cache.lru.clear()
        if self.offloaded is not None:
            self.offloaded.lru.clear()
        self._publish([{"type": "AllBlocksCleared"}])

    # generation routes

    async def _generate(self, request: Request) -> Response:
        """Completions, Chat Completions, Responses, Messages and SageMaker's invocations."""
        path = request.url.path
        try:
            body = await json_object(request)
            api = _api(path, body)
            salt = checked_salt(body, self.model, model_required=api == "messages")
            ids = self._readable_ids(body, path)
        except Refused as refused:
            return refused.answer(anthropic=path == "/v1/messages")
        if not body.get("stream"):
            # as vLLM's `with_cancellation`: a client that leaves aborts its request
            work = asyncio.ensure_future(self._answered(api, body, ids, salt))
            gone = asyncio.ensure_future(_disconnected(request))
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                self.requests_aborted += 1
                return Response(status_code=499)
            gone.cancel()
            return JSONResponse(work.result())
        if self.delay_headers_s:
            await asyncio.sleep(self.delay_headers_s)
        self._in_flight += 1
        stream = self._stream(api, body, ids, salt)
        return StreamingResponse(stream, media_type="text/event-stream")

    def _readable_ids(self, body: dict[str, Any], path: str) -> list[int]:
        """The prompt's token ids, or `Refused` (400) for a body vLLM's request types refuse
        (``"tools": 5``, ``"messages": 5``, a chat message whose content is a number or
        ``NaN``, a token id beyond 64 bits), as vLLM answers it."""
        try:
            _check_chat_contents(body, path)
            return self.token_ids(body, path)
        except (LookupError, TypeError, ValueError, AttributeError) as error:
            raise Refused(400, f"the request does not validate: {error}") from None

    async def _answered(
        self, api: str, body: dict[str, Any], ids: list[int], salt: str | None
    ) -> dict[str, Any]:
        """A non-streaming answer, after its delay and prefill time."""
        if self.delay_headers_s:
            await asyncio.sleep(self.delay_headers_s)
        (prefill,) = await self._prefilled([ids], salt)
        answer = self._answer(api, body, prefill)
        whole: dict[str, Any] = answer.whole()
        return whole

    def _answer(self, api: str, body: dict[str, Any], prefill: Prefill) -> Answer:
        """The answer to a prefilled request; a Responses one is kept for its id."""
        answer = Answer(api, body, self.model, prefill, self._reply(body), next(self._answer_ids))
        if api == "responses":
            self._remember(answer.whole())
        return answer

    def _reply(self, body: dict[str, Any]) -> Reply:
        limit = (
            body.get("max_tokens")
            or body.get("max_completion_tokens")
            or body.get("max_output_tokens")
        )
        return Reply(["ok"] * (min(int(limit), self.chunks) if limit else self.chunks), "length")

    async def _stream(
        self, api: str, body: dict[str, Any], ids: list[int], salt: str | None
    ) -> AsyncIterator[bytes]:
        try:
            try:
                (prefill,) = await self._prefilled([ids], salt)
                await asyncio.sleep(self.delay_first_chunk_s)
            except asyncio.CancelledError:
                self.streams_cancelled += 1
                raise
            answer = self._answer(api, body, prefill)
            for number, event in enumerate(answer.events()):
                if self.break_after_chunks is not None and number >= self.break_after_chunks:
                    raise RuntimeError("the fake replica broke the stream off")
                yield event
                if self.chunk_interval_s:
                    await asyncio.sleep(self.chunk_interval_s)
        finally:
            self._in_flight -= 1

    async def _several(
        self,
        request: Request,
        prompts: Callable[[dict[str, Any]], list[list[int]]],
        answer: Callable[[dict[str, Any], str, list[Prefill]], dict[str, Any]],
    ) -> Response:
        """A generation with several prompts, not streamed: their token ids (`prompts` of the
        body) prefilled and cached, then `answer` (of the body, an id and the prefills)."""
        try:
            body = await json_object(request)
            salt = checked_salt(body, self.model)
            ids = prompts(body)
        except Refused as refused:
            return refused.answer()
        await asyncio.sleep(self.delay_headers_s)
        prefills = await self._prefilled(ids, salt)
        return JSONResponse(answer(body, f"fake{next(self._answer_ids)}", prefills))

    async def _batch(self, request: Request) -> Response:
        def answer(body: dict[str, Any], ident: str, prefills: list[Prefill]) -> dict[str, Any]:
            replies = [self._reply(body)] * len(prefills)
            usage = openai_usage(prefills, sum(len(r.pieces) for r in replies))
            return batch_chat_completion(self.model, ident, usage, replies)

        def prompts(body: dict[str, Any]) -> list[list[int]]:
            return [self._chat_ids(c) for c in batch_conversations(body)]

        return await self._several(request, prompts, answer)

    async def _score(self, request: Request) -> Response:
        def answer(body: dict[str, Any], ident: str, prefills: list[Prefill]) -> dict[str, Any]:
            usage = openai_usage(prefills, len(prefills))  # a token generated per item
            return generative_scores(self.model, ident, usage, body)

        return await self._several(
            request, lambda body: scoring_prompts(body, self.tokenizer), answer
        )

    async def _decide(self, request: Request) -> Response:
        def answer(body: dict[str, Any], ident: str, prefills: list[Prefill]) -> dict[str, Any]:
            tokens = sum(len(p.ids) for p in prefills)
            return structured_decision(self.model, ident, tokens, body)

        def prompts(body: dict[str, Any]) -> list[list[int]]:
            return [self._chat_ids(c) for c in decision_conversations(body)]

        return await self._several(request, prompts, answer)

    def _chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The token ids of one conversation of a request with several."""
        return self.token_ids({"messages": messages}, "/v1/chat/completions")

    async def _count_tokens(self, request: Request) -> Response:
        try:
            body = await json_object(request)
            checked_salt(body, self.model, model_required=True)
        except Refused as refused:
            return refused.answer(anthropic=True)
        return JSONResponse(token_count(len(self.token_ids(body, "/v1/messages"))))

    def _remember(self, response: dict[str, Any]) -> None:
        self._responses[response["id"]] = response
        while len(self._responses) > _STORED_RESPONSES:
            self._responses.popitem(last=False)

    async def _retrieve(self, request: Request) -> Response:
        ident = request.path_params["response_id"]
        if ident not in self._responses:
            return Refused(
                404,
                f"Response with id '{ident}' not found.",
                "invalid_request_error",
                "response_id",
            ).answer()
        return JSONResponse(self._responses[ident])

    async def _cancel(self, request: Request) -> Response:
        retrieved = await self._retrieve(request)
        if retrieved.status_code != 200:
            return retrieved
        # the fake's answers complete before they are stored
        return Refused(
            400, "Cannot cancel a synchronous response.", "invalid_request_error", "response_id"
        ).answer()

    # the other routes of any mode

    async def _health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def _load(self, request: Request) -> Response:
        return JSONResponse({"server_load": self._in_flight})

    async def _kv_event_sources(self, request: Request) -> Response:
        if self.kv_events_endpoint is None:
            return JSONResponse({})
        config = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": self.kv_events_endpoint,
            "topic": "kv",
        }
        return JSONResponse({"0": config})

    async def _metrics(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics_text())

    async def _models(self, request: Request) -> Response:
        model = {
            "id": self.model,
            "object": "model",
            "created": 0,
            "owned_by": "vllm",
            "root": self.model,
            "max_model_len": self.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [model]})

    async def _tokenize(self, request: Request) -> Response:
        self.tokenized += 1
        try:
            body = await json_object(request)
            messages = body.get("messages")
            if "messages" in body and not (
                isinstance(messages, list)
                and messages
                and all(isinstance(m, dict) and "role" in m for m in messages)
            ):
                raise Refused(400, "messages must be a non-empty list of messages with a role")
            ids = self._readable_ids(body, "/tokenize")
        except Refused as refused:
            return refused.answer()
        return JSONResponse(
            {
                "count": len(ids),
                "max_model_len": self.max_model_len,
                "tokens": ids,
                "token_strs": None,
            }
        )

    async def _detokenize(self, request: Request) -> Response:
        try:
            body = await json_object(request)
            tokens = body.get("tokens")
            if not (
                isinstance(tokens, list) and all(isinstance(t, int) and t >= 0 for t in tokens)
            ):
                raise Refused(400, "tokens must be a list of token ids")
        except Refused as refused:
            return refused.answer()
        return JSONResponse({"prompt": "".join(f"<|{t}|>" for t in tokens)})

    async def _scale_elastic_ep(self, request: Request) -> Response:
        try:
            body = await json_body(request)
            size = body.get("new_data_parallel_size") if isinstance(body, dict) else None
            if not isinstance(size, int) or size <= 0:
                raise detail(400, "new_data_parallel_size must be a positive integer")
        except Refused as refused:
            return refused.answer()
        return JSONResponse({"message": f"Scaled to {size} data parallel engines"})


def _prompt_tokens(model_dir: Path) -> PromptTokens:
    """The prompt token ids vLLM 0.32 computes from `model_dir` for a request to a path
    (None where they cannot be reproduced exactly)."""
    # imported here: the hf extra is needed only by a fake with a model folder
    from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokenizer
    from prefixkit.engine_adapter.routing.prompt_tokens import PromptTokens as Computed

    loaded = PromptTokenizer.load(model_dir)
    if not isinstance(loaded, PromptTokenizer):
        raise ValueError(
            f"FakeVLLM(model_dir={str(model_dir)!r}): {loaded.reason}; "
            "give the folder of a model with a fast tokenizer, or no model_dir"
        )

    def computed(path: str, body: Mapping[str, Any]) -> list[int] | None:
        outcome = loaded.tokens(path, body)
        return outcome.token_ids if isinstance(outcome, Computed) else None

    return computed
