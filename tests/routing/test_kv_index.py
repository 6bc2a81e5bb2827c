"""KV-event decoding (vLLM's own encoding) and the block index the precise router keeps."""

import math

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.block_index import BlockIndex
from prefixkit.engine_adapter.routing.kv_events import (
    AllCleared,
    KvEventFollower,
    Removed,
    Stored,
    apply_events,
    decode_batch,
)
from prefixkit.sdk import event_block_hash

# KVEventBatch(ts=1.0, events=[BlockStored([1, 2], parent None, 4 tokens, block_size 2),
# BlockRemoved([3]), AllBlocksCleared()]) encoded by vLLM 0.32's msgspec encoder
VLLM_PAYLOAD = bytes.fromhex(
    "93cb3ff00000000000009388a474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573"
    "920102b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401010101aa626c6f636b"
    "5f73697a6502a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c083a474797065"
    "ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739103a66d656469756da347505581a47479"
    "7065b0416c6c426c6f636b73436c6561726564c0"
)


def test_decodes_vllm_encoded_batch() -> None:
    assert decode_batch(VLLM_PAYLOAD) == [Stored((1, 2), None), Removed((3,)), AllCleared()]


def test_raw_digest_hashes_become_the_int_form() -> None:
    digest = bytes(range(32))
    payload = msgpack.packb(
        [0.0, [{"type": "BlockStored", "block_hashes": [digest], "parent_block_hash": None}], None]
    )
    assert decode_batch(payload) == [Stored((event_block_hash(digest),), None)]


def test_unknown_event_types_are_skipped() -> None:
    payload = msgpack.packb([0.0, [{"type": "SomethingNew"}, {"type": "AllBlocksCleared"}], None])
    assert decode_batch(payload) == [AllCleared()]


def test_runs_follow_stored_and_removed_blocks() -> None:
    index = BlockIndex(2)
    apply_events(index, 0, [Stored((10, 11, 12), None)])
    apply_events(index, 1, [Stored((10,), None)])
    assert index.runs([10, 11, 12, 13]) == [3, 1]
    apply_events(index, 0, [Removed((11,))])
    assert index.runs([10, 11, 12, 13]) == [1, 1]


def test_all_blocks_cleared_empties_only_that_replica() -> None:
    index = BlockIndex(2)
    apply_events(index, 0, [Stored((1, 2), None)])
    apply_events(index, 1, [Stored((1, 2), None)])
    apply_events(index, 0, [AllCleared()])
    assert index.runs([1, 2]) == [0, 2]


def test_forgetting_a_replica_drops_its_blocks_and_its_position() -> None:
    index = BlockIndex(2)
    follower = KvEventFollower(index, ["ipc:///tmp/a", "ipc:///tmp/b"], [None, None])
    follower._accept(
        1, 0, msgpack.packb([0.0, [{"type": "BlockStored", "block_hashes": [5]}], None])
    )
    follower.forget(1)
    assert index.runs([5]) == [0, 0]
    assert follower.last_seq == [None, None]


def test_sequence_restarting_at_zero_means_engine_restart() -> None:
    index = BlockIndex(1)
    follower = KvEventFollower(index, ["ipc:///tmp/a"], [None])
    stored = msgpack.packb([0.0, [{"type": "BlockStored", "block_hashes": [7]}], None])
    empty = msgpack.packb([0.0, [], None])
    assert follower._accept(0, 0, stored)
    assert follower._accept(0, 1, empty)
    assert follower._accept(0, 0, empty)  # seq went back to 0: a new engine, empty cache
    assert index.runs([7]) == [0]


def test_gap_in_sequence_asks_for_replay() -> None:
    index = BlockIndex(1)
    follower = KvEventFollower(index, ["ipc:///tmp/a"], ["ipc:///tmp/a-replay"])
    empty = msgpack.packb([0.0, [], None])
    assert not follower._accept(0, 3, empty)  # joined mid-stream: replay first
    follower.last_seq[0] = 3
    assert not follower._accept(0, 5, empty)
    assert follower._accept(0, 4, empty)


def test_eviction_names_the_request_that_last_used_the_newest_evicted_block() -> None:
    index = BlockIndex(1, [3])
    index.touch(0, [1, 2, 3], 7)  # request 7 sent to replica 0 ...
    index.stored(0, [1, 2, 3])  # ... whose engine stores its blocks
    assert index.newest_evicted(0, 0, 0) == (0, -1.0)  # nothing past capacity: no eviction
    assert index.newest_evicted(0, 0, 2) == (2, 7.0)
    index.touch(0, [3], 9)  # block 3 reused by request 9
    assert index.newest_evicted(0, 0, 3) == (3, 9.0)  # the newest of the three evicted
    assert index.newest_evicted(0, 0, 1) == (1, 7.0)


def test_blocks_coming_from_requests_in_flight_evict_first_and_are_not_counted() -> None:
    index = BlockIndex(1, [4])
    index.touch(0, [1, 2], 5)
    index.stored(0, [1, 2])
    index.touch(0, [3, 4], 6)
    index.stored(0, [3, 4])
    assert index.newest_evicted(0, 0, 2) == (2, 5.0)
    index.sent(0, [3, 9])  # a request in flight: block 3 is held, block 9 is coming
    # block 9 takes the oldest (request 5's); this request's 2 new blocks evict
    # the next two, the newest of them request 6's
    assert index.newest_evicted(0, 0, 2) == (2, 6.0)
    index.sent(0, [8])
    assert index.newest_evicted(0, 0, 0) == (0, 5.0)  # nothing of its own to store


def test_blocks_stored_before_any_request_carry_stamp_zero() -> None:
    index = BlockIndex(1, [2])
    index.stored(0, [1, 2])  # replayed from an engine that served earlier traffic
    assert index.newest_evicted(0, 0, 1) == (1, 0.0)


def test_eviction_is_unknown_without_a_capacity() -> None:
    assert BlockIndex(1).newest_evicted(0, 0, 100) == (0, -math.inf)


def test_eviction_of_a_fitting_request_ranks_the_roomiest_replica_first() -> None:
    index = BlockIndex(2, [40, 40])
    index.stored(0, range(30))
    index.stored(1, range(100, 110))
    (count0, stamp0), (count1, stamp1) = (index.newest_evicted(r, 0, 10) for r in (0, 1))
    assert count0 == count1 == 0
    assert stamp1 < stamp0 < 0


_blocks = st.lists(st.integers(0, 12), min_size=1, max_size=6, unique=True)
_operations = st.lists(
    st.tuples(st.sampled_from(["stored", "removed", "sent", "finished", "dropped"]), _blocks),
    max_size=40,
)


@given(_operations)
@settings(max_examples=200, deadline=None)
def test_blocks_coming_and_not_held_stay_counted_through_any_events(
    operations: list[tuple[str, list[int]]],
) -> None:
    index = BlockIndex(1, [64])
    held: set[int] = set()
    in_flight: list[list[int]] = []  # the blocks of each request still open
    for operation, blocks in operations:
        if operation == "stored":
            index.stored(0, blocks)
            held |= set(blocks)
        elif operation == "removed":
            index.removed(0, blocks)
            held -= set(blocks)
        elif operation == "sent":
            index.sent(0, blocks)
            in_flight.append(blocks)
        elif operation == "finished" and in_flight:
            index.finished(0, in_flight.pop(len(blocks) % len(in_flight)))
        elif operation == "dropped":
            index.drop_replica(0)
            held.clear()
        coming = {block for request in in_flight for block in request}
        assert index.coming_unheld(0) == len(coming - held)
        probe = list(range(13))
        expected_run = next((i for i, b in enumerate(probe) if b not in held | coming), 13)
        assert index.runs(probe) == [expected_run]
