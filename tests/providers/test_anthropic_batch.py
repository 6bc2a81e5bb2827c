"""`render_anthropic_batch` gives the `requests` of a Message Batch, each `params` a
`render_anthropic` request, with a 1-hour TTL on a static prefix the batch shares;
`render_anthropic_beta` gives the same request for `beta.messages.create`, its `betas`
sent as the `anthropic-beta` header."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from prefixkit.sdk import (
    Prompt,
    Segment,
    Stability,
    render_anthropic,
    render_anthropic_batch,
    render_anthropic_beta,
)
from prefixkit.testing.providers import MockProvider

from .prompts import LONG_INSTRUCTIONS

CLAUDE = "claude-sonnet-5"


def ask(question: str, instructions: str = LONG_INSTRUCTIONS) -> Prompt:
    return Prompt(system=[Segment.static(instructions)], messages=[Segment.dynamic(question)])


def system_ttls(request: Any) -> list[str]:
    return [
        block["cache_control"]["ttl"] for block in request["system"] if "cache_control" in block
    ]


def test_each_batch_request_is_the_rendered_request_under_its_custom_id() -> None:
    prompts = {"q1": ask("Why is my bill higher?"), "q2": ask("And in November?")}
    requests = render_anthropic_batch(prompts, model=CLAUDE, max_tokens=64, ttl={})
    assert [request["custom_id"] for request in requests] == ["q1", "q2"]
    for request, prompt in zip(requests, prompts.values(), strict=True):
        assert request["params"] == render_anthropic(prompt, model=CLAUDE, max_tokens=64, ttl={})


def test_a_prefix_shared_across_the_batch_is_cached_for_an_hour() -> None:
    prompts = {"q1": ask("Why is my bill higher?"), "q2": ask("And in November?")}
    requests = render_anthropic_batch(prompts, model=CLAUDE, max_tokens=64)
    assert [system_ttls(request["params"]) for request in requests] == [["1h"], ["1h"]]


def test_a_prefix_no_other_request_shares_keeps_the_default_ttl() -> None:
    prompts = {
        "q1": ask("Why is my bill higher?"),
        "q2": ask("Why is my bill higher?", LONG_INSTRUCTIONS + " Answer in French."),
    }
    requests = render_anthropic_batch(prompts, model=CLAUDE, max_tokens=64)
    assert [system_ttls(request["params"]) for request in requests] == [["5m"], ["5m"]]


def test_a_ttl_given_overrides_the_batch_default() -> None:
    prompts = {"q1": ask("Why is my bill higher?"), "q2": ask("And in November?")}
    ttl: Any = {Stability.STATIC: "5m", Stability.VERSIONED: "5m"}
    requests = render_anthropic_batch(prompts, model=CLAUDE, max_tokens=64, ttl=ttl)
    assert [system_ttls(request["params"]) for request in requests] == [["5m"], ["5m"]]


def test_the_batch_reaches_the_official_client_as_rendered() -> None:
    mock = MockProvider()
    prompts = {"q1": ask("Why is my bill higher?"), "q2": ask("And in November?")}
    requests = render_anthropic_batch(prompts, model=CLAUDE, max_tokens=64)
    with pytest.raises(anthropic.NotFoundError):  # the mock has no batches endpoint
        mock.anthropic_client().messages.batches.create(requests=requests)
    assert mock.body == {"requests": requests}


def test_a_beta_request_sends_its_betas_as_the_header_and_the_same_body() -> None:
    mock = MockProvider()
    prompt = ask("Why is my bill higher?")
    request = render_anthropic_beta(
        prompt, model=CLAUDE, max_tokens=64, betas=["compact-2026-01-12"]
    )
    mock.anthropic_client().beta.messages.create(**request)
    assert mock.requests[-1].headers["anthropic-beta"] == "compact-2026-01-12"
    assert mock.body == render_anthropic(prompt, model=CLAUDE, max_tokens=64)
