"""Where a replica holds a block: the KV events' ``medium`` kept per tier in the block index."""

import logging

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.block_index import BlockIndex
from prefixkit.engine_adapter.routing.kv_events import (
    Removed,
    Stored,
    apply_events,
    decode_batch,
    medium_of,
)

SAVINGS = (1.0, 0.5, 0.25)

# vLLM 0.32's offloading events, as its msgspec encoder writes them: BlockStored([5],
# medium "CPU") from the native CPU offloading, then BlockRemoved([5], medium "STORAGE")
# from a disk tier
OFFLOADED = msgpack.packb(
    [
        1.0,
        [
            {
                "type": "BlockStored",
                "block_hashes": [5],
                "parent_block_hash": None,
                "token_ids": [1, 2],
                "block_size": 2,
                "lora_id": None,
                "medium": "CPU",
                "lora_name": None,
                "group_idx": 0,
                "locality": "LOCAL",
            },
            {"type": "BlockRemoved", "block_hashes": [5], "medium": "STORAGE", "group_idx": 0},
        ],
        None,
    ]
)


def test_events_keep_the_medium_vllm_names() -> None:
    assert decode_batch(OFFLOADED) == [Stored((5,), None, "CPU"), Removed((5,), "DISK")]


def test_an_event_without_a_medium_is_the_gpu_cache() -> None:
    payload = msgpack.packb([0.0, [{"type": "BlockStored", "block_hashes": [5]}], None])
    assert decode_batch(payload) == [Stored((5,), None, "GPU")]


def test_tagged_array_events_keep_their_medium() -> None:
    payload = msgpack.packb(
        [0.0, [["BlockStored", [5], None, [1], 1, None, "CPU"], ["BlockRemoved", [5], "GPU"]], 0]
    )
    assert decode_batch(payload) == [Stored((5,), None, "CPU"), Removed((5,), "GPU")]


def test_an_unknown_medium_is_the_slowest_tier_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert medium_of("NVME-OF-A-NEW-KIND") == "DISK"
        assert medium_of("NVME-OF-A-NEW-KIND") == "DISK"
    assert [r.getMessage().count("NVME-OF-A-NEW-KIND") for r in caplog.records] == [1]


def test_medium_names_are_case_insensitive() -> None:
    assert [medium_of(m) for m in ("gpu", "cpu", "storage", None)] == [
        "GPU",
        "CPU",
        "DISK",
        "GPU",
    ]


def test_a_block_evicted_from_gpu_but_offloaded_to_cpu_is_still_held() -> None:
    index = BlockIndex(1)
    apply_events(index, 0, [Stored((1, 2), None, "GPU"), Stored((1, 2), None, "CPU")])
    apply_events(index, 0, [Removed((1, 2), "GPU")])
    assert index.tiered_runs([1, 2, 3], SAVINGS) == ([2], [1.0])
    assert index.held(0) == 0 and index.held(0, 1) == 2


def test_only_the_gpu_tier_takes_room_in_the_replicas_capacity() -> None:
    index = BlockIndex(1, [2])
    apply_events(index, 0, [Stored(tuple(range(10)), None, "CPU")])
    assert index.newest_evicted(0, 0, 2) == (0, -1.0)


def test_a_block_announced_twice_in_a_tier_stays_until_removed_twice() -> None:
    # vLLM's offloading connector announces a block again per chunk carrying it
    index = BlockIndex(1)
    apply_events(index, 0, [Stored((1,), None, "CPU"), Stored((1,), None, "CPU")])
    apply_events(index, 0, [Removed((1,), "CPU")])
    assert index.tiered_runs([1], SAVINGS) == ([1], [0.5])
    apply_events(index, 0, [Removed((1,), "CPU")])
    assert index.tiered_runs([1], SAVINGS) == ([0], [0.0])


def test_removing_a_block_a_tier_does_not_hold_changes_nothing() -> None:
    index = BlockIndex(2)
    apply_events(index, 1, [Stored((1,), None, "DISK")])
    apply_events(index, 0, [Removed((1,), "DISK")])
    assert index.tiered_runs([1], SAVINGS) == ([0, 1], [0.0, 0.25])


def test_dropping_a_replica_forgets_its_blocks_in_every_tier() -> None:
    index = BlockIndex(2)
    for replica in (0, 1):
        apply_events(index, replica, [Stored((1,), None, "GPU"), Stored((2,), None, "CPU")])
    index.drop_replica(0)
    assert index.tiered_runs([1, 2], SAVINGS) == ([0, 2], [0.0, 1.5])


def test_blocks_in_flight_continue_a_tiered_run_at_the_gpu_saving() -> None:
    index = BlockIndex(1)
    apply_events(index, 0, [Stored((1,), None, "CPU"), Stored((3,), None, "DISK")])
    index.sent(0, [1, 2])
    assert index.tiered_runs([1, 2, 3, 4], SAVINGS) == ([3], [0.5 + 1.0 + 0.25])


def test_with_no_lower_tier_the_runs_are_the_gpu_runs() -> None:
    index = BlockIndex(2)
    apply_events(index, 0, [Stored((1, 2), None, "GPU")])
    index.sent(1, [1])
    assert index.tiered_runs([1, 2], SAVINGS) == (index.runs([1, 2]), [2.0, 1.0])


_tiers = st.sampled_from(["GPU", "CPU", "DISK"])
_events = st.lists(
    st.tuples(
        st.integers(0, 1),
        st.booleans(),
        _tiers,
        st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True),
    ),
    max_size=30,
)


@given(_events)
@settings(max_examples=200, deadline=None)
def test_tiered_runs_follow_what_each_tier_holds(
    events: list[tuple[int, bool, str, list[int]]],
) -> None:
    index = BlockIndex(2)
    held: dict[tuple[int, str], dict[int, int]] = {}  # (replica, tier) -> block -> announcements
    for replica, store, medium, blocks in events:
        event = Stored(tuple(blocks), None, medium) if store else Removed(tuple(blocks), medium)
        apply_events(index, replica, [event])
        counts = held.setdefault((replica, medium), {})
        for block in blocks:
            if medium == "GPU":  # the engine's own cache: a set
                if store:
                    counts[block] = 1
                else:
                    counts.pop(block, None)
            elif store:
                counts[block] = counts.get(block, 0) + 1
            elif counts.get(block, 0) > 1:
                counts[block] -= 1
            else:
                counts.pop(block, None)
    probe = list(range(7))
    runs, values = index.tiered_runs(probe, SAVINGS)
    for replica in (0, 1):
        expected_run, expected_value = 0, 0.0
        for block in probe:
            tier = next(
                (
                    t
                    for t, medium in enumerate(("GPU", "CPU", "DISK"))
                    if block in held.get((replica, medium), {})
                ),
                None,
            )
            if tier is None:
                break
            expected_run += 1
            expected_value += SAVINGS[tier]
        assert runs[replica] == expected_run
        assert values[replica] == pytest.approx(expected_value)
