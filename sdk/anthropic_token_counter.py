"""Claude token counts: exact through `messages.count_tokens` (a sync or async
`anthropic` client), else a `cl100k_base` estimate labelled as one. Claude's tokenizer
is not public, so the counter has counts, never token ids."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from .errors import TokenizerError
from .tokenizer import TiktokenTokenizer, TokenCount, memo_get, memo_put, memoised_count

__all__ = ["AnthropicTokenCounter"]


ANTHROPIC_ESTIMATE_METHOD = (
    "ESTIMATE: cl100k_base token count (Claude's tokenizer is not public; "
    "give a client for exact counts from messages.count_tokens)"
)

# One ASCII letter: exactly one token in any byte-pair vocabulary, so a request
# whose only message is this letter measures the message framing plus one.
_PROBE = "x"
_PROBE_MESSAGES: tuple[Mapping[str, Any], ...] = ({"role": "user", "content": _PROBE},)


def _prefix_digest(tools: Any, system: Any, messages: Sequence[Any]) -> str:
    body = {"tools": tools, "system": system, "messages": list(messages)}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "prefix:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class AnthropicTokenCounter:
    """Claude token counts: exact through `messages.count_tokens`, else an estimate.

    `client` is an `anthropic.Anthropic` or an `anthropic.AsyncAnthropic`.
    Exact counts leave the message framing out: the counter asks once how
    many tokens a one-letter message costs (the framing plus one) and
    subtracts that, so the counts of a prompt's segments add up to the
    prompt and not to one framing per segment. Every count is memoised
    process-wide by content, so a static prefix is counted once, however
    many requests reuse it:

    - `count(text)`: `text` as the one user message (the `Tokenizer` protocol);
    - `count_prefix(tools=, system=, messages=)`: a request's cached prefix as
      the provider counts it, in one call, memoised by the prefix's digest;
    - `count_request(**request)`: a whole request, framing included, not memoised.

    Each has an awaitable twin (`acount`, `acount_prefix`, `acount_request`)
    that never blocks the event loop: it awaits an async client, or runs a sync
    client in a worker thread. With an async client the sync methods answer
    only from the memo; `await counter.prepare(texts, prefixes=...)` counts
    what a render will ask for (`AsyncAnthropicClient` does it before each
    render). Without a client counts are an explicit estimate:
    `estimate` is True, `name` starts with `anthropic-estimate:`. Claude has
    no public tokenizer, so `encode` raises `TokenizerError`.
    """

    def __init__(self, model: str, client: Any | None = None) -> None:
        self.model = model
        self._client = client
        self.estimate = client is None
        self._async = client is not None and inspect.iscoroutinefunction(
            client.messages.count_tokens
        )
        prefix = "anthropic-estimate" if self.estimate else "anthropic"
        self._name = f"{prefix}:{model}"
        self._probe_tokens: int | None = None  # the one-letter request, measured once
        # counts being made now, by event loop and memo key: concurrent first requests
        # wait for the one count instead of each making its own
        self._flights: dict[tuple[asyncio.AbstractEventLoop, Any], asyncio.Task[int]] = {}

    @property
    def name(self) -> str:
        """`anthropic:<model>`, or `anthropic-estimate:<model>` without a client."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Always raises: Claude's tokenizer is not public."""
        raise TokenizerError(
            "Claude's tokenizer is not public, so there are no token ids: use count() "
            "(messages.count_tokens) for lengths",
            tokenizer=self._name,
        )

    def _need_client(self) -> Any:
        if self._client is None:
            raise TokenizerError(
                "exact Claude counts need a client: "
                "AnthropicTokenCounter(model, client=anthropic.Anthropic())",
                tokenizer=self._name,
            )
        return self._client

    def _need_sync(self, what: str) -> Any:
        client = self._need_client()
        if self._async:
            raise TokenizerError(
                f"{what} is not counted yet and this counter's client is async, so a sync "
                "call would block the event loop: await counter.prepare(texts, prefixes=...) "
                "(or acount / acount_prefix) before rendering, or render through "
                "AsyncAnthropicClient, which does",
                tokenizer=self._name,
            )
        return client

    def _request(self, messages: Sequence[Any], **request: Any) -> dict[str, Any]:
        body = {key: value for key, value in request.items() if value is not None}
        body.setdefault("model", self.model)
        body["messages"] = [dict(message) for message in messages]
        return body

    # Sync counts.

    def count_request(self, **request: Any) -> int:
        """Exact input tokens of a whole request (`system`, `tools`, `messages`, ...).

        Framing included, not memoised; `model` defaults to this counter's model.
        """
        client = self._need_sync("a request")
        request.setdefault("model", self.model)
        return int(client.messages.count_tokens(**request).input_tokens)

    def _baseline(self) -> int:
        if self._probe_tokens is None:
            self._probe_tokens = self.count_request(**self._request(_PROBE_MESSAGES))
        return self._probe_tokens

    def framing(self) -> int:
        """Tokens the API adds around a one-message request's text (measured once per counter)."""
        return self._baseline() - 1

    def _count(self, text: str) -> int:
        if self._client is None:
            return TiktokenTokenizer("cl100k_base").count(text)
        self._need_sync(f"text {text[:40]!r}")
        counted = self.count_request(messages=[{"role": "user", "content": text}])
        return counted - self.framing()

    def count(self, text: str) -> int:
        """Tokens of `text` without the message framing (memoised); an estimate without a client."""
        return memoised_count(self._name, text, self._count)

    def count_tokens(self, text: str) -> TokenCount:
        """Like `count`, labelled with whether it is exact and how it was obtained."""
        method = ANTHROPIC_ESTIMATE_METHOD if self.estimate else "messages.count_tokens"
        return TokenCount(self.count(text), self.estimate, method)

    def count_prefix(
        self, *, tools: Any = None, system: Any = None, messages: Sequence[Any] = ()
    ) -> int:
        """Exact tokens of a request's prefix (`tools`, `system`, leading `messages`).

        Counted as the provider counts it: the prefix plus a one-letter user
        message, minus that message alone. One call per distinct prefix
        (memoised by its digest), plus one per counter for the one-letter baseline.
        """
        key = (self._name, _prefix_digest(tools, system, messages))
        cached = memo_get(key)
        if cached is not None:
            return cached
        self._need_sync("this prefix")
        body = self._request([*messages, *_PROBE_MESSAGES], tools=tools, system=system)
        value = self.count_request(**body) - self._baseline()
        memo_put(key, value)
        return value

    # Async counts: the same memo, never blocking the event loop.

    async def acount_request(self, **request: Any) -> int:
        """`count_request` awaited: the async client, or the sync one in a worker thread."""
        client = self._need_client()
        request.setdefault("model", self.model)
        if self._async:
            result = await client.messages.count_tokens(**request)
        else:
            result = await asyncio.to_thread(client.messages.count_tokens, **request)
        return int(result.input_tokens)

    async def _once(self, key: Any, count: Callable[[], Coroutine[Any, Any, int]]) -> int:
        """`count()`, made once however many callers ask for `key` at the same time."""
        loop = asyncio.get_running_loop()
        flight = (loop, key)
        task = self._flights.get(flight)
        if task is None:
            task = self._flights[flight] = loop.create_task(count())
            task.add_done_callback(lambda _: self._flights.pop(flight, None))
        return await asyncio.shield(task)

    async def _abaseline(self) -> int:
        if self._probe_tokens is None:

            async def probe() -> int:
                return await self.acount_request(**self._request(_PROBE_MESSAGES))

            self._probe_tokens = await self._once("probe", probe)
        return self._probe_tokens

    async def acount(self, text: str) -> int:
        """`count` awaited (memoised; an estimate without a client)."""
        key = (self._name, text)
        cached = memo_get(key)
        if cached is not None:
            return cached
        if self._client is None:
            return self.count(text)

        async def count() -> int:
            counted = await self.acount_request(messages=[{"role": "user", "content": text}])
            value = counted - (await self._abaseline() - 1)
            memo_put(key, value)
            return value

        return await self._once(key, count)

    async def acount_prefix(
        self, *, tools: Any = None, system: Any = None, messages: Sequence[Any] = ()
    ) -> int:
        """`count_prefix` awaited (memoised by the prefix's digest)."""
        key = (self._name, _prefix_digest(tools, system, messages))
        cached = memo_get(key)
        if cached is not None:
            return cached

        async def count() -> int:
            body = self._request([*messages, *_PROBE_MESSAGES], tools=tools, system=system)
            value = await self.acount_request(**body) - await self._abaseline()
            memo_put(key, value)
            return value

        return await self._once(key, count)

    async def prepare(
        self,
        texts: Iterable[str] = (),
        *,
        prefixes: Iterable[Mapping[str, Any]] = (),
        min_tokens: int | None = None,
    ) -> None:
        """Count what a render will ask for, so `count` and `count_prefix` answer from the memo.

        `texts` not counted yet are counted concurrently. `prefixes` (each the
        `tools`, `system` and `messages` of `count_prefix`, as
        `cacheable_prefixes` lists them) are counted in
        order, stopping after the first that reaches `min_tokens`, as the
        renderer does.
        """
        missing = list(dict.fromkeys(t for t in texts if memo_get((self._name, t)) is None))
        if missing and self._client is not None:
            await self._abaseline()
        await asyncio.gather(*(self.acount(text) for text in missing))
        if self._client is None:
            return
        for prefix in prefixes:
            tokens = await self.acount_prefix(**prefix)
            if min_tokens is not None and tokens >= min_tokens:
                break
