"""vLLM KV-cache events: decode them, and follow each replica's stream into a `BlockIndex`.

vLLM (``--kv-events-config``, ZMQ publisher) sends multipart messages
``[topic, seq (8-byte big-endian), payload]``; the payload is msgpack of
``[timestamp, events, data_parallel_rank]`` where each event is a map tagged by
``type``: ``BlockStored`` (``block_hashes``, ``parent_block_hash``, ``medium``, ...),
``BlockRemoved`` (``block_hashes``, ``medium``) or ``AllBlocksCleared``. Hashes are the
8-byte int form (`prefixkit.sdk.event_block_hash`); raw digests
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``) are converted to it.

``medium`` says where the replica stored or dropped the blocks: ``GPU`` (or none) for
the engine's own KV cache, ``CPU`` for host memory and ``STORAGE`` for disk when it
offloads (vLLM's offloading connectors), named here by `tiered.MEDIA` (``STORAGE`` is
``DISK``). A medium not known here is logged once and taken as the slowest tier.

`decode_batch` is pure. `KvEventFollower` is the I/O edge: one ZMQ SUB socket
per replica; on start, on reconnect and on a gap in sequence numbers it asks
the replica's ROUTER replay socket for the batches it missed (``[b"", start_seq]``,
answered batch by batch and closed by seq -1). A sequence number that goes
backwards means the engine restarted: the replica's blocks are dropped and the
stream is followed from there. `KvEventFollower.start` returns once each subscription has
joined its publisher (at most `JOIN_WAIT_S`): a batch published before a subscription
joins never reaches it, so a router that served requests sooner would not learn where
their blocks went.

The follower also ends requests in the index (`KvEventFollower.ended`). An engine
publishes a request's stored blocks before its answer ends, but the router may see the
answer's end before those events have reached it: a busy publisher's sending thread may
not have run yet, so the batch is not even waiting on the router's socket. Ending the
request at once would leave its blocks neither coming nor held there for that moment,
and a request sent then with the same prefix could go elsewhere. So a request keeps its
blocks coming until the replica holds its last block in the index (the engine stores a
request's blocks in order, so its events are applied), and at most `ENDING_GRACE_S`
after its end (a request whose blocks the engine never stores: failed, or aborted
before its prefill). A request on a replica that is not followed ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prefixkit.sdk import event_block_hash, require_extra

from .block_index import BlockIndex
from .tiered import MEDIA

require_extra("serve", "prefixkit.engine_adapter.routing.kv_events", "zmq", "msgpack")
import msgpack  # noqa: E402 - after the check, so that a missing extra is named

__all__ = [
    "ENDING_GRACE_S",
    "JOIN_WAIT_S",
    "AllCleared",
    "KvEvent",
    "KvEventFollower",
    "Removed",
    "Stored",
    "decode_batch",
    "medium_of",
]

log = logging.getLogger(__name__)

_END_SEQ = -1
# longest a request's blocks stay coming after its end while its replica does not hold
# them: far longer than an event takes to arrive, even on busy cores
ENDING_GRACE_S = 0.5
# longest `KvEventFollower.start` waits for each subscription to join its publisher (a
# replica whose publisher is not up yet is followed from when it is)
JOIN_WAIT_S = 2.0
# after the handshake the subscription still travels to the publisher's socket, which
# applies it at its next send: the moment given for that (a batch a busy publisher sends
# before it shows as a gap in sequence numbers, which a replica's replay socket fills)
_SUBSCRIPTION_SETTLE_S = 0.05


# vLLM's medium names (upper-cased) -> `MEDIA`
_MEDIA_OF = {"GPU": "GPU", "CPU": "CPU", "STORAGE": "DISK", "DISK": "DISK"}
_TIER_OF = {medium: tier for tier, medium in enumerate(MEDIA)}
_unknown_media: set[str] = set()


def medium_of(name: str | None) -> str:
    """The `MEDIA` name of an event's ``medium`` (None: the engine's own cache, GPU);
    an unknown one is the slowest tier (and logged, once per name)."""
    if name is None:
        return "GPU"
    known = _MEDIA_OF.get(name.upper())
    if known is not None:
        return known
    if name not in _unknown_media:
        _unknown_media.add(name)
        log.warning(
            "KV events name an unknown medium %r: its blocks count as held in the slowest "
            "tier (%s)",
            name,
            MEDIA[-1],
        )
    return MEDIA[-1]


@dataclass(frozen=True)
class Stored:
    hashes: tuple[int, ...]
    parent: int | None
    medium: str = "GPU"  # a `MEDIA` name


@dataclass(frozen=True)
class Removed:
    hashes: tuple[int, ...]
    medium: str = "GPU"  # a `MEDIA` name


@dataclass(frozen=True)
class AllCleared:
    pass


KvEvent = Stored | Removed | AllCleared


def _as_int(value: int | bytes) -> int:
    return value if isinstance(value, int) else event_block_hash(bytes(value))


def _field(event: Any, name: str, position: int) -> Any:
    # maps are vLLM's encoding; tagged arrays ([type, fields...]) are accepted too
    if isinstance(event, dict):
        return event.get(name)
    return event[position] if position < len(event) else None


def decode_batch(payload: bytes) -> list[KvEvent]:
    """The events of one published batch, in order (unknown event types are skipped)."""
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    events: list[KvEvent] = []
    for event in batch[1]:
        kind = event.get("type") if isinstance(event, dict) else event[0]
        if kind == "BlockStored":
            parent = _field(event, "parent_block_hash", 2)
            events.append(
                Stored(
                    tuple(_as_int(h) for h in _field(event, "block_hashes", 1)),
                    None if parent is None else _as_int(parent),
                    medium_of(_field(event, "medium", 6)),
                )
            )
        elif kind == "BlockRemoved":
            events.append(
                Removed(
                    tuple(_as_int(h) for h in _field(event, "block_hashes", 1)),
                    medium_of(_field(event, "medium", 2)),
                )
            )
        elif kind == "AllBlocksCleared":
            events.append(AllCleared())
    return events


def apply_events(index: BlockIndex, replica: int, events: Sequence[KvEvent]) -> None:
    """Apply decoded events of `replica` to `index`."""
    for event in events:
        if isinstance(event, Stored):
            index.stored(replica, event.hashes, _TIER_OF[event.medium])
        elif isinstance(event, Removed):
            index.removed(replica, event.hashes, _TIER_OF[event.medium])
        else:
            index.drop_replica(replica)


class KvEventFollower:
    """Follows every replica's KV events into `index` (an asyncio task per replica with
    an endpoint; a replica whose endpoint is None is not followed)."""

    def __init__(
        self,
        index: BlockIndex,
        endpoints: Sequence[str | None],
        replay_endpoints: Sequence[str | None],
        topic: str = "kv",
    ) -> None:
        self.index = index
        self.endpoints = list(endpoints)
        self.replay_endpoints = list(replay_endpoints)
        self.topic = topic.encode()
        self.last_seq: list[int | None] = [None] * len(self.endpoints)
        # called before each batch is applied (router workers: apply the others'
        # placements first, which were made before the engine computed these blocks)
        self.before_batch: Callable[[], None] | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}  # replica -> its following
        # replica -> set once its subscription has joined the publisher (or gave up waiting)
        self._joined: dict[int, asyncio.Event] = {}
        self._context: Any = None
        # a followed replica's SUB socket, and the event set when it may have messages
        self._sockets: dict[int, tuple[Any, asyncio.Event]] = {}
        # per replica: requests ended before it held their blocks (when, their hashes),
        # and the timer that ends them after `ENDING_GRACE_S`
        self._ending: list[list[tuple[float, Sequence[int]]]] = [[] for _ in self.endpoints]
        self._grace_timers: dict[int, asyncio.TimerHandle] = {}

    def ended(self, replica: int, hashes: Sequence[int]) -> None:
        """A request sent to `replica` with `hashes` ended: it ends in the index once the
        replica holds its blocks (the module docstring says when)."""
        if self._stored(replica, hashes):
            self.index.finished(replica, hashes)
            return
        self._ending[replica].append((time.monotonic(), hashes))
        self._arm_grace(replica)

    def _stored(self, replica: int, hashes: Sequence[int]) -> bool:
        """Whether `replica` holds the last of `hashes` in the index (or is not followed:
        no event will tell)."""
        return replica not in self._sockets or not hashes or self.index.holds(replica, hashes[-1])

    def _end_waiting(self, replica: int) -> None:
        """End in the index the requests of `replica` whose blocks it holds now, and those
        that waited `ENDING_GRACE_S`."""
        ending = self._ending[replica]
        if not ending:
            return
        now = time.monotonic()
        waiting = []
        for ended_at, hashes in ending:
            if now - ended_at >= ENDING_GRACE_S or self._stored(replica, hashes):
                self.index.finished(replica, hashes)
            else:
                waiting.append((ended_at, hashes))
        ending[:] = waiting
        self._arm_grace(replica)

    def _arm_grace(self, replica: int) -> None:
        """Have the oldest request still waiting on `replica` end when its grace is over."""
        ending = self._ending[replica]
        if not ending or replica in self._grace_timers:
            return
        delay = ending[0][0] + ENDING_GRACE_S - time.monotonic()
        self._grace_timers[replica] = asyncio.get_running_loop().call_later(
            max(delay, 0.0), self._grace_over, replica
        )

    def _grace_over(self, replica: int) -> None:
        del self._grace_timers[replica]
        self._end_waiting(replica)

    def _end_all(self, replica: int) -> None:
        """End in the index every request of `replica` waiting to end."""
        for _, hashes in self._ending[replica]:
            self.index.finished(replica, hashes)
        self._ending[replica].clear()

    async def start(self) -> None:
        """Follow every replica with an endpoint; back once each subscription has joined
        its publisher, at most `JOIN_WAIT_S` later. A subscription takes a moment to join:
        a batch published before that never reaches it, and a router that served
        requests in that moment would not learn where their blocks went."""
        followed = [(r, endpoint) for r, endpoint in enumerate(self.endpoints) if endpoint]
        for replica, endpoint in followed:
            self.follow(replica, endpoint, self.replay_endpoints[replica])
        await asyncio.gather(*(self._joined[replica].wait() for replica, _ in followed))

    def follow(self, replica: int, endpoint: str, replay_endpoint: str | None) -> None:
        """Follow `replica`'s events at `endpoint` (its missed batches at
        `replay_endpoint`) from now on, in place of any endpoint it had."""
        import zmq.asyncio

        if self._context is None:
            self._context = zmq.asyncio.Context()
        self._cancel(replica)
        self.endpoints[replica] = endpoint
        self.replay_endpoints[replica] = replay_endpoint
        self._joined[replica] = asyncio.Event()
        self._tasks[replica] = asyncio.create_task(self._follow(replica, endpoint))

    async def unfollow(self, replica: int) -> None:
        """Stop following `replica` (its blocks stay in the index: `forget` drops them)."""
        self.endpoints[replica] = None
        await self._stopped(replica)

    def _cancel(self, replica: int) -> asyncio.Task[None] | None:
        task = self._tasks.pop(replica, None)
        if task is not None:
            task.cancel()
            self._joined.pop(replica).set()  # a task cancelled before it ran never sets it
        return task

    async def _stopped(self, replica: int) -> None:
        """Cancel the following of `replica` and wait for its end."""
        task = self._cancel(replica)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop(self) -> None:
        """Stop following every replica (their endpoints kept: `start` follows them again)."""
        for replica in list(self._tasks):
            await self._stopped(replica)
        if self._context is not None:
            self._context.destroy(linger=0)
            self._context = None

    def forget(self, replica: int) -> None:
        """The replica went away or restarted: drop its blocks and replay from scratch
        (the requests that ended there end in the index now)."""
        self.index.drop_replica(replica)
        self.last_seq[replica] = None
        self._end_all(replica)

    def _accept(self, replica: int, seq: int, payload: bytes) -> bool:
        """Apply one batch; False when it reveals a gap (a replay is needed)."""
        last = self.last_seq[replica]
        if last is None:
            if seq > 0 and self.replay_endpoints[replica] is not None:
                return False  # joined mid-stream: fetch the earlier batches first
        elif seq == 0:
            self.index.drop_replica(replica)  # the engine restarted: its cache is empty
        elif seq <= last:
            return True  # already applied through a replay
        elif seq > last + 1:
            return False
        if self.before_batch is not None:
            self.before_batch()
        apply_events(self.index, replica, decode_batch(payload))
        self.last_seq[replica] = seq
        return True

    async def _replay(self, replica: int) -> None:
        endpoint = self.replay_endpoints[replica]
        if endpoint is None:
            return
        import zmq

        socket = self._context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(endpoint)
        try:
            last = self.last_seq[replica]
            start = 0 if last is None else last + 1
            await socket.send_multipart([b"", start.to_bytes(8, "big")])
            while True:
                if not await socket.poll(2000):
                    log.warning("replica %d: no replay answer from %s", replica, endpoint)
                    return
                frames = await socket.recv_multipart()
                _, _topic, seq_bytes, payload = frames
                seq = int.from_bytes(seq_bytes, "big", signed=True)
                if seq == _END_SEQ:
                    return
                self._accept(replica, seq, payload)
        finally:
            socket.close(linger=0)

    async def _follow(self, replica: int, endpoint: str) -> None:
        """Read `replica`'s batches as they come. The SUB socket is a plain one, read from
        the event loop's reader callback on its file descriptor: each wake-up reads every
        batch waiting (a zmq.asyncio socket makes a future per message)."""
        import zmq

        joined = self._joined[replica]  # this following's: `follow` may make another
        socket = zmq.Socket(self._context, zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.SUBSCRIBE, self.topic)
        readable = asyncio.Event()
        # the descriptor signals a change of the socket's state, not each message: after
        # it, read until no message is waiting
        descriptor = socket.fileno()
        loop = asyncio.get_running_loop()
        loop.add_reader(descriptor, readable.set)
        self._sockets[replica] = (socket, readable)
        try:
            await self._joined_publisher(replica, socket, endpoint, joined)
            await self._replay(replica)
            self._end_waiting(replica)  # the requests that ended while it replayed
            while True:
                try:
                    _topic, seq_bytes, payload = socket.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    readable.clear()
                    if not _has_message(socket):
                        await readable.wait()
                    continue
                seq = int.from_bytes(seq_bytes, "big", signed=True)
                if not self._accept(replica, seq, payload):
                    await self._replay(replica)
                    last = self.last_seq[replica]
                    if last is None or seq > last + 1:
                        self.last_seq[replica] = seq - 1  # the publisher no longer buffers the gap
                    self._accept(replica, seq, payload)
                self._end_waiting(replica)
        finally:
            loop.remove_reader(descriptor)
            del self._sockets[replica]
            self._end_waiting(replica)  # no longer followed: settled
            socket.close(linger=0)

    async def _joined_publisher(
        self, replica: int, socket: Any, endpoint: str, joined: asyncio.Event
    ) -> None:
        """Connect `socket` to `endpoint`; back once its subscription has joined the
        publisher, at most `JOIN_WAIT_S` later, and `joined` set (`start` waits for it)."""
        import zmq

        monitor = f"inproc://kv-events-monitor-{id(socket)}"
        socket.monitor(monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED)
        handshakes = self._context.socket(zmq.PAIR)  # a zmq.asyncio socket
        handshakes.connect(monitor)
        socket.connect(endpoint)
        try:
            async with asyncio.timeout(JOIN_WAIT_S):
                await handshakes.recv_multipart()  # the subscription goes out with it
            await asyncio.sleep(_SUBSCRIPTION_SETTLE_S)
        except TimeoutError:
            log.info("replica %d: no KV-event publisher at %s yet", replica, endpoint)
        finally:
            socket.disable_monitor()
            handshakes.close(linger=0)
            joined.set()


def _has_message(socket: Any) -> bool:
    """Whether a message waits on a ZMQ `socket` (reading its events takes the signal
    its file descriptor gave)."""
    import zmq

    return bool(socket.get(zmq.EVENTS) & zmq.POLLIN)
