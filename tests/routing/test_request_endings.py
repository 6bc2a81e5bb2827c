"""A request ends in the block index once its replica holds its blocks there, and at most
`ENDING_GRACE_S` after its end: a block the engine stored is, at every moment, coming or
held there, however late its event arrives.

A real ZMQ publisher stands for the engine and the follower runs on the test's event
loop. While the test holds the loop (no await), the follower cannot apply what arrives,
as when the router reads an answer's end before the events published ahead of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest
import zmq
from prefixkit.engine_adapter.routing.block_index import BlockIndex
from prefixkit.engine_adapter.routing.kv_events import (
    ENDING_GRACE_S,
    JOIN_WAIT_S,
    KvEventFollower,
)

PROMPT = [11, 12, 13]
OTHER = [21, 22]


class Engine:
    """An engine's KV-event publisher: batch `seq` stores some blocks."""

    def __init__(self, socket: zmq.Socket[bytes]) -> None:
        self.socket = socket
        self.seq = 0

    def stores(self, hashes: list[int]) -> None:
        event = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None}
        payload = msgpack.packb([time.time(), [event], None])
        self.socket.send_multipart([b"kv", self.seq.to_bytes(8, "big"), payload])
        self.seq += 1


async def joined(index: BlockIndex, engine: Engine, block: int) -> None:
    """Until the follower's subscription has joined: it applied `block`."""
    while index.runs([block]) == [0]:
        engine.stores([block])
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the joining batches applied


@pytest.fixture(params=["from the start", "once it publishes its endpoint"])
async def followed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[BlockIndex, KvEventFollower, Engine]]:
    """A replica followed from the router's start, or from when it publishes its endpoint
    (the Ray router's slots)."""
    endpoint = f"ipc://{tmp_path}/kv"
    context = zmq.Context()
    publisher = context.socket(zmq.PUB)
    publisher.bind(endpoint)
    index = BlockIndex(1)
    if request.param == "from the start":
        follower = KvEventFollower(index, [endpoint], [None])
        await follower.start()
    else:
        follower = KvEventFollower(index, [None], [None])
        await follower.start()
        follower.follow(0, endpoint, None)
    engine = Engine(publisher)
    try:
        await joined(index, engine, 1)
        yield index, follower, engine
    finally:
        await follower.stop()
        publisher.close(linger=0)
        context.term()


def arrived_unapplied(seconds: float = 0.1) -> None:
    """Hold the event loop while what was published reaches the follower's socket."""
    time.sleep(seconds)


async def ended_with_its_blocks_waiting(
    index: BlockIndex, follower: KvEventFollower, engine: Engine
) -> None:
    """A request sent with PROMPT ends while the batch storing its blocks waits unread:
    its blocks stay coming; then the follower reads the batch."""
    index.sent(0, PROMPT)
    engine.stores(PROMPT)
    arrived_unapplied()
    follower.ended(0, PROMPT)
    assert index.runs(PROMPT) == [3]
    await asyncio.sleep(0.05)


async def test_a_request_ending_before_its_stored_blocks_are_applied_keeps_them_coming(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    await ended_with_its_blocks_waiting(index, follower, engine)
    assert (index.runs(PROMPT), index.coming[0], index.held(0)) == ([3], {}, 4)


async def test_a_request_ending_before_its_events_were_even_sent_keeps_its_blocks_coming(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    """The engine's sending thread has not run yet: nothing waits on the router's socket."""
    index, follower, engine = followed
    index.sent(0, PROMPT)
    follower.ended(0, PROMPT)
    assert index.runs(PROMPT) == [3]
    engine.stores(PROMPT)
    await asyncio.sleep(0.05)
    assert (index.runs(PROMPT), index.coming[0], index.held(0)) == ([3], {}, 4)


async def test_a_request_whose_blocks_the_replica_already_holds_ends_at_once(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    engine.stores(PROMPT)
    await asyncio.sleep(0.05)
    index.sent(0, PROMPT)
    follower.ended(0, PROMPT)
    assert index.coming[0] == {}


async def test_a_request_whose_blocks_are_never_stored_ends_after_the_grace(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    """A failed request, or one aborted before its prefill: no event will come."""
    index, follower, _ = followed
    index.sent(0, PROMPT)
    follower.ended(0, PROMPT)
    await asyncio.sleep(ENDING_GRACE_S * 0.5)
    assert index.runs(PROMPT) == [3]
    await asyncio.sleep(ENDING_GRACE_S * 0.5 + 0.1)
    assert (index.runs(PROMPT), index.coming[0]) == ([0], {})


async def test_requests_end_by_their_own_blocks_not_in_the_order_they_ended(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    index.sent(0, OTHER)
    index.sent(0, PROMPT)
    follower.ended(0, OTHER)
    follower.ended(0, PROMPT)
    engine.stores(PROMPT)
    await asyncio.sleep(0.05)
    assert set(index.coming[0]) == set(OTHER)


async def test_forgetting_a_replica_ends_the_requests_waiting_there(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    index.sent(0, PROMPT)
    engine.stores(OTHER)
    arrived_unapplied()
    follower.ended(0, PROMPT)
    follower.forget(0)
    assert (index.coming[0], index.held(0)) == ({}, 0)


async def test_a_replica_no_longer_followed_ends_its_requests_at_once_and_applies_nothing(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    await follower.unfollow(0)
    index.sent(0, PROMPT)
    engine.stores(PROMPT)
    arrived_unapplied()
    follower.ended(0, PROMPT)
    assert index.coming[0] == {}
    await asyncio.sleep(0.05)
    assert index.runs(PROMPT) == [0]


async def test_a_replica_followed_anew_keeps_a_request_coming_until_its_events_are_applied(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    endpoint = follower.endpoints[0]
    assert endpoint is not None
    follower.follow(0, endpoint, None)  # the endpoint published again
    await joined(index, engine, 2)
    await ended_with_its_blocks_waiting(index, follower, engine)
    assert (index.runs(PROMPT), index.coming[0]) == ([3], {})


async def test_a_follower_stopped_and_started_again_follows_its_replicas_again(
    followed: tuple[BlockIndex, KvEventFollower, Engine],
) -> None:
    index, follower, engine = followed
    await follower.stop()
    await follower.start()
    await asyncio.wait_for(joined(index, engine, 2), timeout=5.0)


async def test_a_replica_not_followed_ends_its_requests_at_once() -> None:
    index = BlockIndex(1)
    follower = KvEventFollower(index, [None], [None])
    index.sent(0, PROMPT)
    follower.ended(0, PROMPT)
    assert index.coming[0] == {}


async def test_a_request_ending_while_its_replica_replays_ends_once_the_replay_stored_it(
    tmp_path: Path,
) -> None:
    context = zmq.Context()
    publisher = context.socket(zmq.PUB)
    publisher.bind(f"ipc://{tmp_path}/kv")
    replays = context.socket(zmq.ROUTER)
    replays.bind(f"ipc://{tmp_path}/replay")
    index = BlockIndex(1)
    follower = KvEventFollower(index, [f"ipc://{tmp_path}/kv"], [f"ipc://{tmp_path}/replay"])
    await follower.start()
    try:
        while not replays.poll(0):  # the follower has asked for the batches it missed
            await asyncio.sleep(0.01)
        asker, *_ = replays.recv_multipart()
        index.sent(0, PROMPT)
        follower.ended(0, PROMPT)
        assert index.runs(PROMPT) == [3]
        stored = {"type": "BlockStored", "block_hashes": PROMPT, "parent_block_hash": None}
        batch = msgpack.packb([time.time(), [stored], None])
        replays.send_multipart([asker, b"", b"kv", (0).to_bytes(8, "big"), batch])
        done = (-1).to_bytes(8, "big", signed=True)
        replays.send_multipart([asker, b"", b"kv", done, b""])
        await asyncio.sleep(0.1)
        assert (index.runs(PROMPT), index.coming[0]) == ([3], {})
    finally:
        await follower.stop()
        publisher.close(linger=0)
        replays.close(linger=0)
        context.term()


async def test_a_follower_has_joined_its_publishers_when_it_has_started(tmp_path: Path) -> None:
    """A batch the engine publishes right after the router started is not lost to the
    subscription still joining."""
    context = zmq.Context()
    publisher = context.socket(zmq.PUB)
    publisher.bind(f"ipc://{tmp_path}/kv")
    index = BlockIndex(1)
    follower = KvEventFollower(index, [f"ipc://{tmp_path}/kv"], [None])
    try:
        await follower.start()
        Engine(publisher).stores(PROMPT)
        await asyncio.sleep(0.1)
        assert index.runs(PROMPT) == [3]
    finally:
        await follower.stop()
        publisher.close(linger=0)
        context.term()


async def test_a_replica_not_publishing_yet_delays_the_start_at_most_the_join_wait(
    tmp_path: Path,
) -> None:
    """...and is followed once its publisher is up."""
    index = BlockIndex(1)
    follower = KvEventFollower(index, [f"ipc://{tmp_path}/kv"], [None])
    context = zmq.Context()
    try:
        started = time.monotonic()
        await follower.start()
        assert time.monotonic() - started < JOIN_WAIT_S + 0.5
        publisher = context.socket(zmq.PUB)
        publisher.bind(f"ipc://{tmp_path}/kv")
        await asyncio.wait_for(joined(index, Engine(publisher), 1), timeout=5.0)
        publisher.close(linger=0)
    finally:
        await follower.stop()
        context.term()
