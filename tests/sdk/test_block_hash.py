"""prefixkit.sdk's block hashes (`block_hashes` and the rest) are vLLM's prefix-cache block
hashes bit for bit.

The golden digests were produced by vLLM 0.32's own `hash_block_tokens` and
`init_none_hash` (engine virtualenv) for tokens 100..169 and block size 32, and by
vLLM 0.29's request block hasher (the Ray engine's virtualenv) for the salted 0.29
ones; the live engine comparisons are in tests/routing/test_live_engine.py and
tests/ray/test_block_hashes.py.
"""

from typing import cast

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import (
    HashAlgo,
    PrefixHashMemo,
    VllmVersion,
    block_hashes,
    event_block_hash,
    event_block_hashes,
    hash_block,
    none_hash,
    none_hash_seed,
    salt_extra_keys,
    vllm_version_of,
)
from prefixkit.sdk.block_hash import cbor_block

TOKENS = list(range(100, 170))

GOLDEN = {
    # (algo, seed, salt) -> first two block digests
    ("sha256", "vllm-none-hash", None): (
        "27f308b699f9642a8f04847a9480fe7ee10e3dae48d940af09c0b288d76be092",
        "b344171dbf8ba4d4543ea5e079ef700ed994e88544028734b0a138d72097ab61",
    ),
    ("sha256", "vllm-none-hash", "tenant-a"): (
        "49f9337cb9a682349ce58832393e989647d83232dd4318d6fc758b898732daf1",
        "75da23b738b1d53e5f70a370f56ee85ea501520e2b03ff881725d4e98c2bf0ff",
    ),
    ("sha256_cbor", "vllm-none-hash", None): (
        "9853ace2f5ec228bfb96972af6345f03032352673b1cc8c52f4f3613eeec46ae",
        "f9b83812895875b6e349bb6a50a4d44090f9aea9d094b33cd6442232da5a36b8",
    ),
    ("sha256_cbor", "vllm-none-hash", "tenant-a"): (
        "04c469f68072fc6371e2ae8c23c4311f085d8cc55281c0d0b3cdaacdc6de90f0",
        "7c3cc75e4883126ec486fecfb23a46f01316b65d3e26d31ae02ecde239a02332",
    ),
    ("sha256", "7", None): (
        "b8036947f22888d8d4fb03d4aa7fb263cfbb26da3979a80023625968ab73b682",
        "116a57c4b6a3b6ad0af509d247975f6cd9bf2a0be4433b7645882be7ebe59baf",
    ),
    ("sha256_cbor", "7", "tenant-a"): (
        "d72127e7c6afca6131b104e26c4577dd83756bb7f9554331e253472cfa58f0d4",
        "b4a2ded032a7e6aa5334fe3532a46c3cb358775e174ddb301d79e679a80b4827",
    ),
}


GOLDEN_0_29 = {
    # (algo, salt) -> first two block digests of vLLM 0.29, seed "vllm-none-hash"
    ("sha256", "tenant-a"): (
        "9f023e9c4fefc419bc07ce90e05ebe785cacd34d196a60cc9cba414ba34d4dc7",
        "ae75ce5488ef2476d092e3789955002d040632927c36e92871fd5a4244153805",
    ),
    ("sha256_cbor", "tenant-a"): (
        "3dcf0e730d8514e6e097405d4b00dddeb54fb2938deb02fb62577b07b117a103",
        "e01bcd56afa4e029ae39abea46c31490d1be6cf698811814251b16ae5b7798f6",
    ),
}


@pytest.mark.parametrize(("algo", "salt"), list(GOLDEN_0_29))
def test_vllm_0_29_block_hashes_match_its_golden_digests(algo: HashAlgo, salt: str) -> None:
    hashes = block_hashes(
        TOKENS, 32, algo=algo, cache_salt=salt, seed="vllm-none-hash", vllm="0.29"
    )
    assert [h.hex() for h in hashes] == list(GOLDEN_0_29[(algo, salt)])


@pytest.mark.parametrize(("algo", "seed", "salt"), list(GOLDEN))
def test_block_hashes_match_vllm_golden_digests(
    algo: HashAlgo, seed: str, salt: str | None
) -> None:
    hashes = block_hashes(TOKENS, 32, algo=algo, cache_salt=salt, seed=seed)
    assert [h.hex() for h in hashes] == list(GOLDEN[(algo, seed, salt)])


def test_event_form_is_last_eight_bytes_big_endian() -> None:
    digest = bytes.fromhex(GOLDEN[("sha256", "vllm-none-hash", None)][0])
    assert event_block_hash(digest) == 702757842669265042


def test_event_block_hashes_are_event_form_of_block_hashes() -> None:
    digests = block_hashes(TOKENS, 32, seed="vllm-none-hash")
    assert event_block_hashes(TOKENS, 32, seed="vllm-none-hash") == [
        event_block_hash(d) for d in digests
    ]


def test_seed_comes_from_pythonhashseed_else_default() -> None:
    assert none_hash_seed({"PYTHONHASHSEED": "7"}) == "7"
    assert none_hash_seed({}) == "vllm-none-hash"


def test_empty_salt_counts_as_no_salt() -> None:
    assert block_hashes(TOKENS, 32, cache_salt="", seed="s") == block_hashes(TOKENS, 32, seed="s")


def test_unsupported_algorithm_is_refused_with_the_alternatives() -> None:
    with pytest.raises(ValueError, match="sha256_cbor"):
        block_hashes(TOKENS, 32, algo=cast(HashAlgo, "xxhash"), seed="s")  # the mistake under test


def test_non_positive_block_size_is_refused() -> None:
    with pytest.raises(ValueError, match="block_size"):
        block_hashes(TOKENS, 0)


tokens_st = st.lists(st.integers(min_value=0, max_value=200_000), max_size=80)


@given(tokens_st, st.integers(min_value=1, max_value=16))
def test_only_full_blocks_are_hashed(tokens: list[int], block_size: int) -> None:
    assert len(block_hashes(tokens, block_size, seed="s")) == len(tokens) // block_size


@given(tokens_st, tokens_st, st.sampled_from(["sha256", "sha256_cbor"]))
def test_hash_of_a_prefix_is_a_prefix_of_the_hashes(
    head: list[int], tail: list[int], algo: HashAlgo
) -> None:
    short = block_hashes(head, 4, algo=algo, seed="s")
    long = block_hashes(head + tail, 4, algo=algo, seed="s")
    assert long[: len(short)] == short


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=8, max_size=40))
def test_salt_changes_every_block_hash(tokens: list[int]) -> None:
    plain = block_hashes(tokens, 4, seed="s")
    salted = block_hashes(tokens, 4, cache_salt="tenant", seed="s")
    assert not set(plain) & set(salted)


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=8, max_size=40))
def test_chain_is_hash_block_applied_block_by_block(tokens: list[int]) -> None:
    parent = None
    expected = []
    for start in range(0, len(tokens) - 3, 4):
        extra = (("cache_salt", "t"),) if start == 0 else None
        parent = hash_block(parent, tokens[start : start + 4], extra, seed="s")
        expected.append(parent)
    assert block_hashes(tokens, 4, cache_salt="t", seed="s") == expected


def test_none_hash_depends_on_seed_and_algorithm() -> None:
    assert none_hash("sha256", "a") != none_hash("sha256", "b")
    assert none_hash("sha256", "a") != none_hash("sha256_cbor", "a")


# every head width of CBOR: 1 byte (< 24), then 1, 2, 4 and 8 bytes of argument
cbor_ints = st.one_of(
    st.sampled_from([0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1]),
    st.sampled_from([-1, -24, -25, -256, -257, -(2**64)]),
    st.integers(min_value=-(2**64), max_value=2**64 - 1),
)
extra_keys = st.one_of(
    st.none(),
    st.text(max_size=40).map(lambda salt: (("cache_salt", salt),)),
)


@given(st.binary(max_size=300), st.lists(cbor_ints, max_size=300), extra_keys)
def test_cbor_block_is_byte_for_byte_canonical_cbor(
    parent: bytes, tokens: list[int], extra: object
) -> None:
    assert cbor_block(parent, tokens, extra) == cbor2.dumps(
        (parent, tuple(tokens), extra), canonical=True
    )


@pytest.mark.parametrize("length", [65535, 65536])
def test_cbor_block_encodes_long_parents_and_blocks(length: int) -> None:
    parent, tokens = bytes(length), [7] * length
    assert cbor_block(parent, tokens, None) == cbor2.dumps(
        (parent, tuple(tokens), None), canonical=True
    )


def test_cbor_block_refuses_integers_beyond_64_bits_by_name() -> None:
    with pytest.raises(ValueError, match="64 bits"):
        cbor_block(bytes(32), [2**64], None)


# conversations: (shared system prompt length, turns of (conversation, added tokens), salt)
_turns = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 40), st.sampled_from([None, "", "a", "b"])),
    min_size=1,
    max_size=12,
)


@given(_turns, st.sampled_from(["sha256", "sha256_cbor"]), st.integers(1, 6))
def test_prefix_memo_gives_the_hashes_of_every_prompt(
    turns: list[tuple[int, int, str | None]], algo: HashAlgo, limit: int
) -> None:
    # prompts that repeat and extend each other, salted or not, through a memo
    # small enough to forget: every answer equals hashing from scratch
    memo = PrefixHashMemo(4, algo=algo, seed="s", limit=limit)
    prompts: dict[int, list[int]] = {}
    for conversation, added, salt in turns:
        prompt = prompts.setdefault(conversation, list(range(conversation, conversation + 8)))
        prompt.extend((conversation * 7 + k) % 50 for k in range(added))
        expected = event_block_hashes(prompt, 4, algo=algo, cache_salt=salt, seed="s")
        assert memo.hashes(prompt, salt) == expected
        assert len(memo) <= limit


# any CBOR integer (what both hash functions take), prompts that share prefixes
_any_ids = st.lists(st.integers(min_value=-(2**64), max_value=2**64 - 1), max_size=24)


@given(
    _any_ids,
    st.lists(st.tuples(st.integers(0, 24), _any_ids, st.sampled_from([None, "", "a", "b"]))),
    st.integers(1, 9),
    st.sampled_from(["sha256", "sha256_cbor"]),
    st.sampled_from(["0.29", "0.32"]),
    st.integers(1, 8),
)
def test_prefix_memo_equals_hashing_without_it_for_any_ids_salts_and_block_sizes(
    shared: list[int],
    prompts: list[tuple[int, list[int], str | None]],
    block_size: int,
    algo: HashAlgo,
    vllm: VllmVersion,
    limit: int,
) -> None:
    # each prompt: a prefix of the shared ids and ids of its own, through one memo
    memo = PrefixHashMemo(block_size, algo=algo, seed="s", vllm=vllm, limit=limit)
    for kept, own, salt in prompts:
        prompt = shared[:kept] + own
        expected = event_block_hashes(
            prompt, block_size, algo=algo, cache_salt=salt, seed="s", vllm=vllm
        )
        assert memo.hashes(prompt, salt) == expected
        assert memo.hashes(tuple(prompt), salt) == expected  # any sequence of ids


def test_prefix_memo_hashes_only_the_blocks_a_next_turn_adds() -> None:
    memo = PrefixHashMemo(4, algo="sha256_cbor")
    first_turn = list(range(40))  # 10 blocks
    memo.hashes(first_turn, "tenant")
    assert len(memo) == 10
    memo.hashes([*first_turn, *range(100, 108)], "tenant")  # 2 blocks more
    assert len(memo) == 12
    memo.hashes(first_turn, "other tenant")  # another salt: a chain of its own
    assert len(memo) == 22


def test_prefix_memo_refuses_an_empty_limit() -> None:
    with pytest.raises(ValueError, match="at least one hash"):
        PrefixHashMemo(4, limit=0)


# --- one hasher per engine version: vLLM 0.29 and 0.32 ---

versions = st.sampled_from(["0.29", "0.32"])
algos = st.sampled_from(["sha256", "sha256_cbor"])


@given(tokens_st, algos, st.sampled_from([None, ""]))
def test_engine_versions_agree_on_unsalted_prompts(
    tokens: list[int], algo: HashAlgo, salt: str | None
) -> None:
    assert block_hashes(tokens, 4, algo=algo, cache_salt=salt, seed="s", vllm="0.29") == (
        block_hashes(tokens, 4, algo=algo, cache_salt=salt, seed="s", vllm="0.32")
    )


@given(
    st.lists(st.integers(min_value=0, max_value=1000), min_size=4, max_size=40),
    algos,
    st.text(min_size=1, max_size=20),
)
def test_engine_versions_differ_on_every_block_of_a_salted_prompt(
    tokens: list[int], algo: HashAlgo, salt: str
) -> None:
    old = block_hashes(tokens, 4, algo=algo, cache_salt=salt, seed="s", vllm="0.29")
    new = block_hashes(tokens, 4, algo=algo, cache_salt=salt, seed="s", vllm="0.32")
    assert len(old) == len(new) >= 1
    assert not set(old) & set(new)  # the first block differs, and the chain carries it on


@given(
    st.lists(st.integers(min_value=0, max_value=1000), min_size=4, max_size=40),
    algos,
    versions,
    st.text(min_size=1, max_size=20),
)
def test_versions_differ_only_in_the_salted_first_blocks_extra_keys(
    tokens: list[int], algo: HashAlgo, vllm: VllmVersion, salt: str
) -> None:
    # the same chain, the first block keyed by that version's salt keys, nothing else
    parent = None
    expected = []
    for start in range(0, len(tokens) - 3, 4):
        extra = salt_extra_keys(salt, vllm) if start == 0 else None
        parent = hash_block(parent, tokens[start : start + 4], extra, algo=algo, seed="s")
        expected.append(parent)
    assert block_hashes(tokens, 4, algo=algo, cache_salt=salt, seed="s", vllm=vllm) == expected


def test_salt_extra_keys_are_bare_in_0_29_and_tagged_in_0_32() -> None:
    assert salt_extra_keys("t", "0.29") == ("t",)
    assert salt_extra_keys("t", "0.32") == (("cache_salt", "t"),)
    assert salt_extra_keys("", "0.29") is None
    assert salt_extra_keys(None, "0.32") is None


@given(_turns, algos, versions, st.integers(1, 6))
def test_prefix_memo_hashes_as_its_engine_version(
    turns: list[tuple[int, int, str | None]], algo: HashAlgo, vllm: VllmVersion, limit: int
) -> None:
    memo = PrefixHashMemo(4, algo=algo, seed="s", vllm=vllm, limit=limit)
    prompts: dict[int, list[int]] = {}
    for conversation, added, salt in turns:
        prompt = prompts.setdefault(conversation, list(range(conversation, conversation + 8)))
        prompt.extend((conversation * 7 + k) % 50 for k in range(added))
        expected = event_block_hashes(prompt, 4, algo=algo, cache_salt=salt, seed="s", vllm=vllm)
        assert memo.hashes(prompt, salt) == expected


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.32.0", "0.32"), ("0.32.1+cpu", "0.32"), ("0.29.0+cpu", "0.29"), ("0.29.0", "0.29")],
)
def test_vllm_version_of_an_installed_version(version: str, expected: str) -> None:
    assert vllm_version_of(version) == expected


@pytest.mark.parametrize("version", ["0.30.0", "0.3.2", "1.0.0", "dev"])
def test_an_engine_version_whose_hash_is_unknown_is_refused_with_the_known_ones(
    version: str,
) -> None:
    with pytest.raises(ValueError, match=r"0\.29 and 0\.32"):
        vllm_version_of(version)


def test_an_unknown_hash_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown vLLM version"):
        salt_extra_keys("t", cast(VllmVersion, "0.30"))  # the mistake under test


def test_a_memo_for_an_unknown_hash_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown vLLM version"):
        PrefixHashMemo(4, vllm=cast(VllmVersion, "0.30"))  # the mistake under test
