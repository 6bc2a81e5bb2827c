"""Block hashes as the Ray engine's vLLM computes them, in the int form of its KV events.

vLLM 0.29 (the version Ray 2.60 pins) chains blocks as `prefixkit.sdk.block_hashes` does,
but puts a salted first block's extra keys as ``(salt,)`` where vLLM 0.32 writes
``(("cache_salt", salt),)``; unsalted blocks hash the same in both.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixkit.sdk import DEFAULT_NONE_HASH_SEED, HashAlgo, event_block_hash, hash_block

__all__ = ["ray_engine_block_hashes"]


def ray_engine_block_hashes(
    token_ids: Sequence[int],
    block_size: int,
    *,
    algo: HashAlgo = "sha256_cbor",
    cache_salt: str | None = None,
    seed: str = DEFAULT_NONE_HASH_SEED,
) -> list[int]:
    """Every full block's hash (int form), each chained from its parent's."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    parent: bytes | None = None
    extra: tuple[object, ...] | None = (cache_salt,) if cache_salt else None
    hashes = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash_block(
            parent, token_ids[start : start + block_size], extra, algo=algo, seed=seed
        )
        hashes.append(event_block_hash(parent))
        extra = None
    return hashes
