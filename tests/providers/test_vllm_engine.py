"""render_vllm and VLLMClient against the real vLLM CPU engine (session `engine` fixture)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from prefixkit.sdk import (
    HFTokenizer,
    Prompt,
    Segment,
    VLLMClient,
    align_static_prefix,
)

pytestmark = pytest.mark.engine

SECRET = "engine-test-secret"


@pytest.fixture(scope="module")
def client(engine: Any) -> Iterator[VLLMClient]:
    official = openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key="EMPTY", max_retries=0)
    yield VLLMClient(
        tokenizer=HFTokenizer(engine.config.model),
        block_size=engine.block_size,
        salt_secret=SECRET,
        client=official,
    )
    official.close()


def support_prompt(marker: str, question: str) -> Prompt:
    """A static prefix unique to this test run (so earlier runs cannot have cached it)."""
    instructions = (
        f"Session {marker}. You are the support assistant of a storage company. Answer from "
        "the price list only, show the arithmetic and quote the line you used. "
    ) * 12
    return Prompt(system=[Segment.static(instructions)], messages=[Segment.dynamic(question)])


def test_aligned_static_prefix_is_served_whole_from_the_cache(
    client: VLLMClient, engine: Any
) -> None:
    marker = uuid.uuid4().hex
    first = support_prompt(marker, "How much is 5 TB of egress?")
    _, report = align_static_prefix(first, client.tokenizer, engine.block_size)
    assert report.aligned and report.static_tokens % engine.block_size == 0

    _, cold = client.chat(first, model=engine.model, tenant="acme", max_tokens=1)
    _, warm = client.chat(
        support_prompt(marker, "And 2 TB of archive restore?"),
        model=engine.model,
        tenant="acme",
        max_tokens=1,
    )
    assert cold.cached_tokens == 0
    assert warm.cached_tokens >= report.static_tokens


def test_another_tenant_does_not_hit_the_same_prefix(client: VLLMClient, engine: Any) -> None:
    marker = uuid.uuid4().hex
    prompt = support_prompt(marker, "How much is 5 TB of egress?")
    client.chat(prompt, model=engine.model, tenant="acme", max_tokens=1)
    _, same_tenant = client.chat(prompt, model=engine.model, tenant="acme", max_tokens=1)
    _, other_tenant = client.chat(prompt, model=engine.model, tenant="globex", max_tokens=1)
    assert same_tenant.cached_tokens > 0
    assert other_tenant.cached_tokens == 0


def test_token_id_prompts_hit_like_chat(client: VLLMClient, engine: Any) -> None:
    marker = uuid.uuid4().hex
    _, report = align_static_prefix(
        support_prompt(marker, "q"), client.tokenizer, engine.block_size
    )
    client.complete(support_prompt(marker, "How much is egress?"), model=engine.model, max_tokens=1)
    _, warm = client.complete(
        support_prompt(marker, "How much is storage?"), model=engine.model, max_tokens=1
    )
    assert warm.cached_tokens >= report.static_tokens
