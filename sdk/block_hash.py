"""vLLM's prefix-cache block hash, bit-exact, as one small pure function.

vLLM (``vllm/v1/core/kv_cache_utils.py``, ``vllm/utils/hashing.py``) caches a
prompt in full blocks of ``block_size`` tokens. Block ``i`` is keyed by

    hash_fn((parent_hash or NONE_HASH, tuple(block_token_ids), extra_keys))

where ``NONE_HASH = hash_fn(seed)``, ``seed`` is the engine's ``PYTHONHASHSEED``
or ``"vllm-none-hash"``, and ``extra_keys`` carries a salted request's ``cache_salt``
on its first block and is ``None`` otherwise (LoRA, multimodal and prompt-embedding
keys are out of scope). A trailing partial block is never hashed.

The engine versions prefixkit runs hash the same way but for one difference, the
shape of the salt in the first block's extra keys (`salt_extra_keys`):

======== ===================================== =====================================
vLLM     first block of a salted request        where prefixkit runs it
======== ===================================== =====================================
``0.29`` ``(salt,)``: the bare salt              the Ray backend (Ray Serve 2.60 pins it)
``0.32`` ``(("cache_salt", salt),)``: tagged     the local engine
======== ===================================== =====================================

vLLM tagged its extra keys (LoRA names, multimodal ids, the salt) so that a LoRA
named like a tenant's salt no longer shares its blocks. Every function here takes
the engine's version as ``vllm`` (a `VllmVersion`; `vllm_version_of` reads one from
an installed version string such as ``"0.29.0+cpu"``); unsalted prompts hash the
same under both.

KV events publish each hash as an int: the digest's last 8 bytes, big-endian
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``, vLLM's default); see `event_block_hash`.

The router hashes every block of every prompt, so ``sha256_cbor`` builds the
canonical CBOR of a block itself (`cbor_block`: the bytes ``cbor2`` gives, from
memoised per-token encodings) instead of calling ``cbor2``: a prompt hashes
about 2.2x faster (``bench/router_latency.py``).

A router sees each conversation's prefix again at every turn; `PrefixHashMemo`
remembers block hashes by (parent hash, block tokens, extra keys), so it hashes
only the blocks it has not seen (bounded, least recently used forgotten first).

The alignment checks, the precise router and the trace simulator all call this
module, so they agree with the engine and with each other.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Literal

import cbor2

from .errors import UsageError

__all__ = [
    "DEFAULT_NONE_HASH_SEED",
    "HashAlgo",
    "PrefixHashMemo",
    "VllmVersion",
    "block_hashes",
    "cbor_block",
    "event_block_hash",
    "event_block_hashes",
    "hash_block",
    "none_hash",
    "none_hash_seed",
    "salt_extra_keys",
    "sha256",
    "sha256_cbor",
    "vllm_version_of",
]

HashAlgo = Literal["sha256", "sha256_cbor"]

VllmVersion = Literal["0.29", "0.32"]
"""An engine version whose block hash prefixkit reproduces (see the module docstring)."""

VLLM_VERSIONS: tuple[VllmVersion, ...] = ("0.29", "0.32")

DEFAULT_NONE_HASH_SEED = "vllm-none-hash"

_INT_HASH_MASK = (1 << 64) - 1


def sha256(value: object) -> bytes:
    """vLLM's ``sha256``: SHA-256 of the pickle (highest protocol) of `value`."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(value: object) -> bytes:
    """vLLM's ``sha256_cbor``: SHA-256 of canonical CBOR; portable across languages."""
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def _cbor_head(major: int, argument: int) -> bytes:
    """A CBOR item's head in its shortest form (what canonical CBOR requires)."""
    kind = major << 5
    if argument < 24:
        return bytes((kind | argument,))
    for extra, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if argument < 1 << (8 * width):
            return bytes((kind | extra,)) + argument.to_bytes(width, "big")
    raise ValueError(f"CBOR cannot encode {argument} in a head: integers must fit in 64 bits")


# token ids below this are memoised (it is above every common vocabulary; at
# most about 20 MB if every one occurs), other integers are encoded each time
_MEMOISED_INTS = 1 << 18


class _CborInts(dict[int, bytes]):
    """Canonical CBOR of each integer, memoised for token ids (they repeat)."""

    def __missing__(self, value: int) -> bytes:
        encoded = _cbor_head(0, value) if value >= 0 else _cbor_head(1, -1 - value)
        if 0 <= value < _MEMOISED_INTS:
            self[value] = encoded
        return encoded


_cbor_int = _CborInts().__getitem__
_cbor_length = lru_cache(maxsize=256)(_cbor_head)  # a block's lengths: the same every block


def cbor_block(parent: bytes, token_ids: Sequence[int], extra_keys: object) -> bytes:
    """Canonical CBOR of a block's hash input ``(parent, tuple(token_ids),
    extra_keys)``: byte for byte what ``cbor2.dumps(..., canonical=True)`` gives."""
    extra = b"\xf6" if extra_keys is None else cbor2.dumps(extra_keys, canonical=True)
    return b"".join(
        (
            b"\x83",  # an array of three
            _cbor_length(2, len(parent)),  # a byte string
            parent,
            _cbor_length(4, len(token_ids)),  # an array
            b"".join(map(_cbor_int, token_ids)),
            extra,
        )
    )


_HASH_FUNCTIONS: dict[str, Callable[[object], bytes]] = {
    "sha256": sha256,
    "sha256_cbor": sha256_cbor,
}

_BlockHasher = Callable[[bytes, Sequence[int], object], bytes]  # (parent, tokens, extra keys)

_BLOCK_HASH_FUNCTIONS: dict[str, _BlockHasher] = {
    "sha256": lambda parent, tokens, extra: sha256((parent, tuple(tokens), extra)),
    "sha256_cbor": lambda parent, tokens, extra: hashlib.sha256(
        cbor_block(parent, tokens, extra)
    ).digest(),
}


def _block_hash_function(algo: str) -> _BlockHasher:
    _hash_function(algo)  # refuses an unsupported algorithm
    return _BLOCK_HASH_FUNCTIONS[algo]


def _hash_function(algo: str) -> Callable[[object], bytes]:
    try:
        return _HASH_FUNCTIONS[algo]
    except KeyError:
        raise UsageError(
            f"unsupported prefix-caching hash algorithm {algo!r}: use 'sha256' or "
            "'sha256_cbor' (xxhash variants seed NONE_HASH randomly per process, so no "
            "router can reproduce them)",
            argument="algo",
            value=algo,
        ) from None


def _check_block_size(block_size: int) -> None:
    if block_size <= 0:
        raise UsageError(
            f"block_size must be positive, got {block_size}",
            argument="block_size",
            value=block_size,
        )


def vllm_version_of(version: str) -> VllmVersion:
    """The `VllmVersion` whose block hash an engine reporting `version` computes.

    `version` is vLLM's own (``vllm.__version__``, ``/version``, a pinned install such
    as ``"0.32.0"`` or ``"0.29.0+cpu"``); any patch release of a known minor version
    hashes as that version.
    """
    major_minor = ".".join(version.split("+", 1)[0].split(".")[:2])
    for known in VLLM_VERSIONS:
        if major_minor == known:
            return known
    raise UsageError(
        f"prefixkit does not know vLLM {version}'s block hash: it reproduces vLLM "
        f"{' and '.join(VLLM_VERSIONS)}; run one of those engine versions",
        argument="version",
        value=version,
    )


# The one place the engine versions' block hashes differ: a salted first block's extra keys
_SALT_KEYS: dict[str, Callable[[str], tuple[object, ...]]] = {
    "0.29": lambda salt: (salt,),  # the bare salt
    "0.32": lambda salt: (("cache_salt", salt),),  # tagged, apart from LoRA names
}


def salt_extra_keys(
    cache_salt: str | None, vllm: VllmVersion = "0.32"
) -> tuple[object, ...] | None:
    """The extra keys of a request's first block under `cache_salt`, as vLLM `vllm`
    writes them: ``(salt,)`` in 0.29, ``(("cache_salt", salt),)`` in 0.32; None when
    unsalted (an empty salt is no salt in both)."""
    try:
        tag = _SALT_KEYS[vllm]
    except KeyError:
        raise UsageError(
            f"unknown vLLM version {vllm!r} for block hashes: use one of "
            f"{', '.join(VLLM_VERSIONS)}",
            argument="vllm",
            value=vllm,
        ) from None
    return tag(cache_salt) if cache_salt else None


def none_hash_seed(environ: Mapping[str, str] | None = None) -> str:
    """The seed an engine started with `environ` derives NONE_HASH from.

    ``PYTHONHASHSEED`` if set there, else ``"vllm-none-hash"``. `environ`
    defaults to this process's environment; pass the engine's if it differs.
    """
    env = os.environ if environ is None else environ
    return env.get("PYTHONHASHSEED", DEFAULT_NONE_HASH_SEED)


@lru_cache(maxsize=16)
def none_hash(algo: HashAlgo = "sha256", seed: str = DEFAULT_NONE_HASH_SEED) -> bytes:
    """The parent hash of every first block: ``hash_fn(seed)``."""
    return _hash_function(algo)(seed)


def hash_block(
    parent: bytes | None,
    token_ids: Sequence[int],
    extra_keys: tuple[object, ...] | None = None,
    *,
    algo: HashAlgo = "sha256",
    seed: str = DEFAULT_NONE_HASH_SEED,
) -> bytes:
    """The hash of one full block given its parent's hash (None for the first block)."""
    parent_hash = parent if parent else none_hash(algo, seed)
    return _block_hash_function(algo)(parent_hash, token_ids, extra_keys)


def block_hashes(
    token_ids: Sequence[int],
    block_size: int,
    *,
    algo: HashAlgo = "sha256",
    cache_salt: str | None = None,
    seed: str | None = None,
    vllm: VllmVersion = "0.32",
) -> list[bytes]:
    """The chained hashes of every full block of a prompt, as vLLM `vllm` computes them.

    `token_ids` are the exact ids the engine sees (BOS and chat template
    included). An empty `cache_salt` counts as no salt, as in vLLM. `seed`
    defaults to `none_hash_seed()` of this process.
    """
    _check_block_size(block_size)
    first = none_hash(algo, none_hash_seed() if seed is None else seed)
    salt_keys = salt_extra_keys(cache_salt, vllm)
    return _chain(token_ids, block_size, first, salt_keys, _block_hash_function(algo))


def _chain(
    token_ids: Sequence[int],
    block_size: int,
    first_parent: bytes,
    salt_keys: tuple[object, ...] | None,
    hash_block: _BlockHasher,
) -> list[bytes]:
    """Every full block's hash, each from its parent's (`first_parent` for the
    first block, whose extra keys are `salt_keys`)."""
    parent = first_parent
    extra = salt_keys
    hashes: list[bytes] = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash_block(parent, token_ids[start : start + block_size], extra)
        hashes.append(parent)
        extra = None
    return hashes


def event_block_hash(digest: bytes) -> int:
    """The int form KV events carry: the digest's last 8 bytes, big-endian."""
    return int.from_bytes(digest, "big") & _INT_HASH_MASK


def event_block_hashes(
    token_ids: Sequence[int],
    block_size: int,
    *,
    algo: HashAlgo = "sha256",
    cache_salt: str | None = None,
    seed: str | None = None,
    vllm: VllmVersion = "0.32",
) -> list[int]:
    """`block_hashes` in the int form KV events publish (what the router indexes)."""
    return [
        event_block_hash(h)
        for h in block_hashes(
            token_ids, block_size, algo=algo, cache_salt=cache_salt, seed=seed, vllm=vllm
        )
    ]


class PrefixHashMemo:
    """`event_block_hashes` for one engine's settings and version, remembering up to `limit`
    block hashes (about 1 KB each) by (parent hash, block tokens, extra keys): a
    block is hashed once however many later prompts repeat it after the same
    prefix and salt."""

    def __init__(
        self,
        block_size: int,
        *,
        algo: HashAlgo = "sha256",
        seed: str | None = None,
        vllm: VllmVersion = "0.32",
        limit: int = 1 << 14,
    ) -> None:
        _check_block_size(block_size)
        salt_extra_keys(None, vllm)  # refuses an unknown version
        if limit < 1:
            raise UsageError(
                f"the memo must hold at least one hash, got limit {limit}",
                argument="limit",
                value=limit,
            )
        self.block_size = block_size
        self.limit = limit
        self.vllm: VllmVersion = vllm
        self._hash = _block_hash_function(algo)
        self._none = none_hash(algo, none_hash_seed() if seed is None else seed)
        # (parent hash, the block's ids, extra keys) -> (the hash, its KV-event int)
        self._memo: OrderedDict[tuple[bytes, tuple[int, ...], object], _Remembered] = OrderedDict()

    def __len__(self) -> int:
        return len(self._memo)

    def hashes(self, token_ids: Sequence[int], cache_salt: str | None = None) -> list[int]:
        """The KV-event hashes of every full block of `token_ids` (see `block_hashes`)."""
        salt_keys = salt_extra_keys(cache_salt, self.vllm)
        size = self.block_size
        # one tuple of the ids: a block's key is then one slice of it
        ids = tuple(token_ids)
        memo = self._memo
        parent = self._none
        extra: object = salt_keys
        result: list[int] = []
        for start in range(0, len(ids) - size + 1, size):
            key = (parent, ids[start : start + size], extra)
            known = memo.get(key)
            if known is None:
                digest = self._hash(parent, key[1], extra)
                known = memo[key] = (digest, event_block_hash(digest))
                if len(memo) > self.limit:
                    memo.popitem(last=False)
            else:
                memo.move_to_end(key)
            parent = known[0]
            result.append(known[1])
            extra = None
        return result


_Remembered = tuple[bytes, int]  # a block's hash and its KV-event int
