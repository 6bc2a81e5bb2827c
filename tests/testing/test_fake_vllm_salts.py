"""Every generation route of the fake vLLM replica looks its prompts up in the one prefix
cache under the request's ``cache_salt``, as vLLM hashes it into the first block: the same
prompt hits again under its salt, never under another, and a salt vLLM refuses is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prefixkit.testing.fake_vllm import GENERATION_PATHS, FakeVLLM

TEXT = "a prompt long enough to fill several blocks of the prefix cache " * 6
CHAT = [{"role": "system", "content": TEXT}, {"role": "user", "content": "hi"}]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/completions": {"prompt": TEXT},
    "/v1/chat/completions": {"messages": CHAT},
    "/v1/responses": {"input": TEXT},
    "/v1/messages": {"system": TEXT, "max_tokens": 4, "messages": CHAT[1:]},
    "/v1/chat/completions/batch": {"messages": [CHAT, CHAT[:1]]},
    "/invocations": {"messages": CHAT},
    "/generative_scoring": {"query": TEXT, "items": ["yes", "no"], "label_token_ids": [1, 2]},
    "/v1/systemone": {"state": TEXT, "questions": {"q": {"type": "noul"}}},
}


@pytest.fixture
def replica() -> Iterator[FakeVLLM]:
    with FakeVLLM() as started:
        yield started


def _hits(replica: FakeVLLM, path: str, salt: str) -> int:
    """The prompt tokens the request to `path` under `salt` read from the cache."""
    before = replica.hit_tokens
    body = {"model": "fake-model", "cache_salt": salt, **BODIES[path]}
    response = httpx.post(replica.url + path, json=body, timeout=10)
    assert response.status_code == 200, response.text
    return replica.hit_tokens - before


def test_the_bodies_cover_every_generation_route() -> None:
    assert set(BODIES) == GENERATION_PATHS


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_generation_hits_again_under_its_salt_only(replica: FakeVLLM, path: str) -> None:
    assert _hits(replica, path, "tenant-a") == 0
    assert _hits(replica, path, "tenant-a") > 0
    assert _hits(replica, path, "tenant-b") == 0


@pytest.mark.parametrize("salt", ["", "a/b", "x" * 129, 7])
def test_a_salt_vllm_refuses_is_refused(replica: FakeVLLM, salt: object) -> None:
    body = {"model": "fake-model", "prompt": TEXT, "cache_salt": salt}
    response = httpx.post(f"{replica.url}/v1/completions", json=body)
    assert (response.status_code, response.json()["error"]["param"]) == (400, "cache_salt")
