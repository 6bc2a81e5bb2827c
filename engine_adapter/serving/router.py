"""The routing stages of the serving app: where a request goes once the gateway stage let
it through.

* `DirectRoute`: every request to one upstream, the only replica or SMG.
* `PreciseRoute`: prefixkit's KV-event router. A generation request
  (``/v1/chat/completions``, ``/v1/completions``, ``/v1/responses``, ``/v1/messages``)
  gets its token ids computed in the router from the model folder the replicas load
  (`routing.prompt_tokens`: the engine's tokenizer and chat template, vLLM's request
  handling mirrored), or, for a request that cannot be tokenized exactly there (or when
  the folder is not known or not readable, said once at start), from a replica's own
  ``/tokenize`` (a Responses or Anthropic Messages request turned into the chat messages
  vLLM renders it as; counted in `RouterState.tokenize_fallbacks`); then the block
  hashes of its first `MAX_ROUTED_BLOCKS` blocks, and a replica from
  `RouterState.route` (or the replica an operator pinned it to, `RouterState.pin`);
  ``x-prefixkit-replica`` names the replica and ``server-timing`` gives the router's own
  time before forwarding, in ms (``tokenize``: computing the tokens or the round trip to a
  replica, ``route``: hashing and the decision).
  ``/tokenize``, ``/v1/models`` and other paths go to the healthy replica with the
  fewest requests in flight (in turn among equals). A health loop polls every replica;
  one that fails it, or refuses a connection between two polls, is left out and its
  blocks dropped, and nothing is lost: a request placed on it is placed again (the
  connection failed, so nothing reached the engine and nothing runs twice).
* `SmgRoute`: real SMG for chat and completions (and ``/v1/models``, ``/health``);
  `PreciseRoute` for ``/v1/responses``, ``/v1/messages``, ``/tokenize``, other paths and
  pinned requests. SMG 1.13 re-serialises a Responses body into its own request type
  and drops ``cache_salt`` on the way, which would let tenants share cache blocks; it
  has no ``/tokenize``.

A stage answers `place` (a generation request's `Target`) and `utility` (any other
path's), and `replace` when a target refused the connection. Every stage answers ``GET
/health`` itself, from a poll of its upstreams every second (`polled_health`: an
upstream that refuses connections is down at once, one slow to answer after three
polls in a row): in microseconds, however busy the engines are. It raises `Refused` for a
request it will not forward (a pin to a replica that does not exist,
no replica left to tokenize).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from starlette.responses import JSONResponse, Response

from ..routing.router_state import Placement, RouterState, server_timing
from .refused import Refused
from .relay import Upstreams
from .upstream import UpstreamPools

__all__ = [
    "DirectRoute",
    "PreciseRoute",
    "Routing",
    "SmgRoute",
    "Target",
    "anthropic_chat_messages",
    "responses_chat_messages",
]

log = logging.getLogger(__name__)

# a router places a request by its first blocks, at most this many (bounded work per
# request, whatever the prompt's length; 8192 tokens with vLLM's CPU block size)
MAX_ROUTED_BLOCKS = 256
# what SMG routes itself (it keeps their cache_salt); others go through the precise router
_SMG_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})


def _nothing() -> None:
    return None


@dataclass
class Target:
    """Where one request goes: an upstream base URL, the replica it is (None for SMG or a
    lone upstream), headers to add to the answer, and the callbacks of the precise
    router's bookkeeping (first byte, end)."""

    url: str
    name: str
    replica: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    started: Callable[[], None] = _nothing
    ended: Callable[[], None] = _nothing
    placement: Placement | None = None


class Routing(Protocol):
    """A routing stage of the serving app (see the module docstring)."""

    @property
    def replica_urls(self) -> Sequence[str]:
        """The replicas behind the stage (for ``/metrics``)."""
        ...

    async def start(self, upstreams: Upstreams, polls: UpstreamPools) -> None:
        """Start following the upstreams: `upstreams` for occasional requests (metrics,
        `/tokenize`), `polls` for the health polls."""
        ...

    async def stop(self) -> None: ...

    async def place(self, path: str, body: dict[str, Any], pin: int | None) -> Target:
        """The target of a generation request (`body`: its parsed JSON object, cut to its
        start, `bodies.bounded`); `pin`: the replica an operator asked for. May raise
        `Refused`."""
        ...

    def utility(self, path: str, pin: int | None) -> Target:
        """The target of any other request."""
        ...

    def replace(self, target: Target) -> Target | None:
        """`target` refused the connection: where to send the request instead (None:
        nowhere, the client gets a 502)."""
        ...

    def health(self) -> Response:
        """The answer to ``GET /health``, from the last poll of the upstreams."""
        ...

    def state(self) -> RouterState | None:
        """The precise router's state, for ``/router/state`` (None: no such router)."""
        ...


HEALTH_TIMEOUT_S = 2.0  # a health poll unanswered this long failed
FAILED_POLLS_TO_DOWN = 3  # failed polls in a row that take an upstream down (Kubernetes' default)


@contextlib.asynccontextmanager
async def polled_health(
    urls: Sequence[str],
    pools: UpstreamPools,
    interval_s: float,
    record: Callable[[int, bool], None],
) -> AsyncIterator[None]:
    """Poll each URL's ``/health`` every `interval_s` for the length of the block, once
    before it starts, and `record(index, healthy)`: the app answers ``/health`` from the
    last poll, in microseconds, however busy the upstreams are.

    An upstream that answers 200 is up. One that refuses the connection is down at once;
    one that answers otherwise or not within `HEALTH_TIMEOUT_S` is down after
    `FAILED_POLLS_TO_DOWN` such polls in a row (an engine busy with a large request is
    slow to answer, not gone)."""
    failed = [0] * len(urls)

    async def poll() -> None:
        for index, url in enumerate(urls):
            refused = False
            try:
                ok = await pools.status(url, "/health", timeout=HEALTH_TIMEOUT_S) == 200
            except httpx.ConnectError:
                ok = False
                refused = True
            except httpx.HTTPError:
                ok = False
            failed[index] = 0 if ok else failed[index] + 1
            if ok or refused or failed[index] >= FAILED_POLLS_TO_DOWN:
                record(index, ok)

    async def polling() -> None:
        while True:
            await asyncio.sleep(interval_s)
            await poll()

    await poll()
    task = asyncio.create_task(polling())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def health_answer(healthy: Sequence[bool]) -> Response:
    """``GET /health`` from the last poll: 200 while any upstream is healthy, else 503."""
    return JSONResponse({"healthy": list(healthy)}, status_code=200 if any(healthy) else 503)


class DirectRoute:
    """Every request to `upstream` (the only replica, or a router such as SMG); its health
    polled every `health_interval_s`."""

    def __init__(
        self,
        upstream: str,
        replica_urls: Sequence[str],
        name: str = "",
        health_interval_s: float = 1.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.replica_urls = list(replica_urls)
        self.name = name or f"upstream {self.upstream}"
        self.health_interval_s = health_interval_s
        self.healthy = [False]
        self._stack = contextlib.AsyncExitStack()

    async def start(self, upstreams: Upstreams, polls: UpstreamPools) -> None:
        def record(index: int, ok: bool) -> None:
            self.healthy[index] = ok

        await self._stack.enter_async_context(
            polled_health([self.upstream], polls, self.health_interval_s, record)
        )

    async def stop(self) -> None:
        await self._stack.aclose()

    async def place(self, path: str, body: dict[str, Any], pin: int | None) -> Target:
        return self.utility(path, pin)

    def utility(self, path: str, pin: int | None) -> Target:
        if pin is not None and pin >= len(self.replica_urls):
            raise _no_such_replica(pin, len(self.replica_urls))
        return Target(self.upstream, self.name)

    def replace(self, target: Target) -> Target | None:
        return None

    def health(self) -> Response:
        return health_answer(self.healthy)

    def state(self) -> RouterState | None:
        return None


def responses_chat_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The chat messages and tools vLLM renders a Responses request as (its
    `construct_input_messages`): ``instructions`` as the system message, a text input
    as a user message, input items as messages (function calls joined to the assistant
    message before them, their outputs as tool messages), function tools in chat form.
    A request that continues a stored response (``previous_response_id``) has earlier
    turns vLLM adds and this cannot see."""
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input", "")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                _append_item(messages, item)
    tools = [
        {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and tool.get("type") == "function"
    ]
    return messages, tools


def _append_item(messages: list[dict[str, Any]], item: dict[str, Any]) -> None:
    kind = item.get("type", "message")
    last = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    if kind == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
        if last is not None:
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        messages.append(
            {"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")}
        )
    elif item.get("role") == "assistant":
        content = item.get("content")
        text = content if isinstance(content, str) else None
        if isinstance(content, list) and content and isinstance(content[0], dict):
            text = content[0].get("text")
        if last is not None and last.get("content") is None:
            last["content"] = text
        else:
            messages.append({"role": "assistant", "content": text})
    elif "role" in item:
        messages.append({k: v for k, v in item.items() if k not in ("type", "id", "status")})


def anthropic_chat_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The chat messages and tools an Anthropic Messages request is rendered as: ``system``
    as the system message, text blocks as text, ``tool_use`` blocks as the assistant's
    tool calls, ``tool_result`` blocks as tool messages, tools in chat form."""
    messages: list[dict[str, Any]] = []
    system = _anthropic_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = _anthropic_text(blocks)
        calls = [
            {
                "id": block.get("id"),
                "type": "function",
                "function": {
                    "name": block.get("name"),
                    "arguments": json.dumps(block.get("input")),
                },
            }
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": _anthropic_text(block.get("content")),
                    }
                )
        if text or calls:
            chat: dict[str, Any] = {"role": message.get("role"), "content": text}
            if calls:
                chat["tool_calls"] = calls
            messages.append(chat)
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.get("name"),
                "description": tool.get("description", ""),
                "parameters": tool.get("input_schema", {}),
            },
        }
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and "name" in tool
    ]
    return messages, tools


def _anthropic_text(content: object) -> str:
    """The text of an Anthropic content field: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


# token ids a block hash holds (CBOR's integers: from -2**64 to 2**64 - 1)
_ID_BOUND = 1 << 64


def _tokenize_query(path: str, body: dict[str, Any]) -> dict[str, Any] | list[int]:
    """What to ask ``/tokenize`` for a generation request (or its token ids, when the
    prompt already is token ids). A Responses or Messages body that does not convert
    (``"tools": 5``), or token ids no block hash holds (beyond 64 bits), gives no token
    ids: the request is placed by load alone and the engine says what is wrong with it."""
    model = body.get("model")
    if path.endswith("/chat/completions"):
        query: dict[str, Any] = {"model": model, "messages": body.get("messages", [])}
        for key in (
            "tools",
            "chat_template_kwargs",
            "add_generation_prompt",
            "continue_final_message",
        ):
            if key in body:
                query[key] = body[key]
        return query
    if path.endswith("/responses") or path.endswith("/messages"):
        convert = (
            responses_chat_messages if path.endswith("/responses") else anthropic_chat_messages
        )
        try:
            messages, tools = convert(body)
        except (LookupError, TypeError, ValueError, AttributeError):
            return []
        return {"model": model, "messages": messages, **({"tools": tools} if tools else {})}
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return prompt if all(-_ID_BOUND <= t < _ID_BOUND for t in prompt) else []
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        prompt = prompt[0]  # a batch goes where its first prompt is cached
    if not isinstance(prompt, str):
        raise Refused(
            400,
            "prompt must be a string, a list of strings or a list of token ids",
            "invalid_request_error",
            "prompt",
        )
    return {"model": model, "prompt": prompt}


class PreciseRoute:
    """prefixkit's KV-event router as a routing stage (see the module docstring)."""

    def __init__(self, state: RouterState) -> None:
        self.router = state
        self.replica_urls = list(state.settings.replica_urls)
        self._upstreams: Upstreams | None = None
        self._stack = contextlib.AsyncExitStack()
        # the request's token ids computed here, None when they cannot be exactly
        self._prompt_tokens: Callable[[str, dict[str, Any]], list[int] | None] | None = None

    async def start(self, upstreams: Upstreams, polls: UpstreamPools) -> None:
        self._upstreams = upstreams
        settings = self.router.settings
        stack = self._stack
        self._prompt_tokens = await _prompt_tokens(settings.model_dir)
        if settings.decision_log is not None:  # opened first: a bad path starts nothing
            log_file = stack.enter_context(settings.decision_log.open("a", buffering=1))

            def write(record: dict[str, Any]) -> None:
                log_file.write(json.dumps(record, allow_nan=False) + "\n")

            self.router.decision_sink = write
            stack.callback(setattr, self.router, "decision_sink", None)
        await self.router.follower.start()
        stack.push_async_callback(self.router.follower.stop)
        await stack.enter_async_context(
            polled_health(
                self.replica_urls,
                polls,
                self.router.settings.health_interval_s,
                self.router.set_health,
            )
        )

    async def stop(self) -> None:
        await self._stack.aclose()

    @property
    def upstreams(self) -> Upstreams:
        if self._upstreams is None:
            raise RuntimeError("the precise routing stage is not started")
        return self._upstreams

    def _order(self) -> list[int]:
        """Healthy replicas, fewest requests in flight first, in turn among equals."""
        state = self.router
        alive = state.alive()
        first = state.turn % len(alive)
        return sorted(alive[first:] + alive[:first], key=lambda replica: state.load(replica)[0])

    def _replica_target(self, replica: int) -> Target:
        return Target(self.replica_urls[replica], f"replica {replica}", replica)

    def utility(self, path: str, pin: int | None) -> Target:
        if pin is not None:
            return self._replica_target(self._pinned(pin))
        return self._replica_target(self._order()[0])

    def _pinned(self, pin: int) -> int:
        if pin >= len(self.replica_urls):
            raise _no_such_replica(pin, len(self.replica_urls))
        return pin

    def health(self) -> Response:
        return health_answer(self.router.healthy)

    def state(self) -> RouterState | None:
        return self.router

    def replace(self, target: Target) -> Target | None:
        if target.replica is None:
            return None
        log.warning("replica %d refused a connection: placing its request again", target.replica)
        if target.placement is not None:
            placement = self.router.unreachable(target.placement)
            return None if placement is None else self._placed(placement, target.headers)
        self.router.set_health(target.replica, False)
        if not any(self.router.healthy):
            return None
        return self._replica_target(self._order()[0])

    async def place(self, path: str, body: dict[str, Any], pin: int | None) -> Target:
        salt = body.get("cache_salt")
        if salt is not None and not isinstance(salt, str):
            raise Refused(
                400,
                f"cache_salt must be a string, got {type(salt).__name__}",
                "invalid_request_error",
                "cache_salt",
            )
        replica = None if pin is None else self._pinned(pin)
        started = time.perf_counter()
        tokens = await self._token_ids(path, body)
        tokenized = time.perf_counter()
        routed_tokens = tokens[: MAX_ROUTED_BLOCKS * self.router.settings.block_size]
        hashes = self.router.hashes(routed_tokens, salt)
        placement = (
            self.router.route(hashes) if replica is None else self.router.pin(replica, hashes)
        )
        routed = time.perf_counter()
        timing = server_timing(
            {"tokenize": (tokenized - started) * 1e3, "route": (routed - tokenized) * 1e3}
        )
        return self._placed(placement, {"server-timing": timing})

    def _placed(self, placement: Placement, headers: dict[str, str]) -> Target:
        replica = placement.replica
        router = self.router
        return Target(
            self.replica_urls[replica],
            f"replica {replica}",
            replica,
            headers={**headers, "x-prefixkit-replica": str(replica)},
            started=lambda: router.started(placement),
            ended=lambda: router.finished(placement),
            placement=placement,
        )

    async def _token_ids(self, path: str, body: dict[str, Any]) -> list[int]:
        """The request's token ids: computed here when they can be exactly, else asked
        of a replica (`_asked_token_ids`, counted as a fallback)."""
        if self._prompt_tokens is not None:
            computed = self._prompt_tokens(path, body)
            if computed is not None:
                self.router.tokenized_here += 1
                return computed
        self.router.tokenize_fallbacks += 1
        return await self._asked_token_ids(path, body)

    async def _asked_token_ids(self, path: str, body: dict[str, Any]) -> list[int]:
        """The request's token ids from a replica's ``/tokenize`` (see `_order`); one that
        refuses the connection is marked unhealthy, one that fails otherwise is passed
        over. A request ``/tokenize`` cannot read is placed by load alone (no token
        ids): the engine, not the router, says what is wrong with it."""
        query = _tokenize_query(path, body)
        if isinstance(query, list):
            return query
        failures = []
        for replica in self._order():
            url = self.replica_urls[replica]
            try:
                # as json.loads read it (NaN and Infinity included), which httpx's json=
                # refuses to write
                response = await self.upstreams.client(url).post(
                    "/tokenize",
                    content=json.dumps(query).encode(),
                    headers={"content-type": "application/json"},
                    timeout=30.0,
                )
            except httpx.TransportError as exc:
                failures.append(f"replica {replica}: {exc!r}")
                if isinstance(exc, httpx.ConnectError):
                    self.router.set_health(replica, False)
                continue
            if response.status_code == 200:
                return [int(t) for t in response.json()["tokens"]]
            if response.status_code < 500:
                return []
            failures.append(f"replica {replica}: HTTP {response.status_code}")
        raise Refused(
            502,
            f"no replica could tokenize the request ({'; '.join(failures)})",
            "upstream_unreachable",
        )


async def _prompt_tokens(
    model_dir: Path | None,
) -> Callable[[str, dict[str, Any]], list[int] | None] | None:
    """What computes a request's prompt token ids in the router (None, with a warning
    saying why, when nothing can: every request then asks a replica's ``/tokenize``)."""
    fallback = "the router asks a replica's /tokenize for every request"
    if model_dir is None:
        log.warning("the model folder the replicas load is not known: %s", fallback)
        return None
    try:
        from ..routing.prompt_tokens import PromptTokenizer, PromptTokens
    except ImportError as exc:
        log.warning("prompt tokens need the hf extra (%s): %s", exc, fallback)
        return None
    loaded = await asyncio.to_thread(PromptTokenizer.load, model_dir)
    if not isinstance(loaded, PromptTokenizer):
        log.warning("the router cannot tokenize prompts itself (%s): %s", loaded.reason, fallback)
        return None
    log.info("the router tokenizes prompts itself, from %s", model_dir)

    def computed(path: str, body: dict[str, Any]) -> list[int] | None:
        outcome = loaded.tokens(path, body)
        return outcome.token_ids if isinstance(outcome, PromptTokens) else None

    return computed


class SmgRoute:
    """Real SMG for chat, completions, ``/v1/models`` and ``/health``; `precise` for
    ``/v1/responses`` (whose ``cache_salt`` SMG drops), ``/tokenize`` and other paths."""

    def __init__(self, smg_url: str, precise: PreciseRoute) -> None:
        self.smg = DirectRoute(smg_url, precise.replica_urls, name=f"SMG at {smg_url}")
        self.precise = precise
        self.replica_urls = precise.replica_urls

    async def start(self, upstreams: Upstreams, polls: UpstreamPools) -> None:
        await self.smg.start(upstreams, polls)
        await self.precise.start(upstreams, polls)

    async def stop(self) -> None:
        await self.precise.stop()
        await self.smg.stop()

    async def place(self, path: str, body: dict[str, Any], pin: int | None) -> Target:
        if path in _SMG_PATHS and pin is None:
            return await self.smg.place(path, body, pin)
        return await self.precise.place(path, body, pin)

    def utility(self, path: str, pin: int | None) -> Target:
        if path in ("/v1/models", "/health") and pin is None:
            return self.smg.utility(path, pin)
        return self.precise.utility(path, pin)

    def replace(self, target: Target) -> Target | None:
        return self.precise.replace(target)

    def health(self) -> Response:
        return self.smg.health()

    def state(self) -> RouterState | None:
        return self.precise.state()


def _no_such_replica(pin: int, replicas: int) -> Refused:
    return Refused(
        400,
        f"x-prefixkit-replica {pin}: this deployment has replicas 0 to {replicas - 1}",
        "invalid_request_error",
        "x-prefixkit-replica",
    )
