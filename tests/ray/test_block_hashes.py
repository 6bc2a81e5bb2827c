"""The block hashes prefixkit computes for the Ray engine's vLLM version are that vLLM's own,
salted or not."""

from __future__ import annotations

import json
import subprocess

import pytest
from prefixkit.engine_adapter.ray.install import RAY_VLLM_VERSION, ensure_ray_engine
from prefixkit.sdk import event_block_hashes, vllm_version_of

pytestmark = pytest.mark.ray

TOKENS = [(7 * i) % 4000 for i in range(100)]
CASES = [(salt, algo) for salt in (None, "tenant-salt-1") for algo in ("sha256_cbor", "sha256")]

# vLLM's own request block hasher, in the Ray engine's interpreter
_VLLM_HASHES = """
import json, sys
from vllm.utils.hashing import get_hash_fn_by_name
from vllm.v1.core import kv_cache_utils as k
from vllm.v1.request import Request
from vllm.sampling_params import SamplingParams
tokens, cases = json.loads(sys.argv[1])
out = []
for salt, algo in cases:
    hash_fn = get_hash_fn_by_name(algo)
    k.init_none_hash(hash_fn)
    request = Request("r", tokens, SamplingParams(max_tokens=1), None, None, cache_salt=salt,
                      block_hasher=k.get_request_block_hasher(32, hash_fn))
    out.append([int.from_bytes(bytes(h)[-8:], "big") for h in request.block_hashes])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def engine_hashes() -> list[list[int]]:
    result = subprocess.run(
        [str(ensure_ray_engine()), "-c", _VLLM_HASHES, json.dumps([TOKENS, CASES])],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    hashes: list[list[int]] = json.loads(result.stdout.strip().splitlines()[-1])
    return hashes


@pytest.mark.parametrize("case", range(len(CASES)))
def test_router_hashes_are_the_ray_engines(engine_hashes: list[list[int]], case: int) -> None:
    salt, algo = CASES[case]
    assert len(engine_hashes[case]) == 3
    ours = event_block_hashes(
        TOKENS,
        32,
        algo=algo,  # type: ignore[arg-type]
        cache_salt=salt,
        vllm=vllm_version_of(RAY_VLLM_VERSION),
    )
    assert ours == engine_hashes[case]
