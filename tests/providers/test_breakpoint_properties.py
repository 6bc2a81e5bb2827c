"""Invariants over arbitrary layouts: marker limits, TTL order, caller markers kept, no mutation."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prefixkit.sdk import (
    CacheMode,
    PrefixkitWarning,
    Prompt,
    RenderError,
    Role,
    Segment,
    render_anthropic,
    render_openai_chat,
    render_openai_responses,
)

TTL_RANK = {"1h": 2, "5m": 1}

markers = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.sampled_from(
        [
            {"type": "ephemeral"},
            {"type": "ephemeral", "ttl": "5m"},
            {"type": "ephemeral", "ttl": "1h"},
        ]
    ),
)


@st.composite
def prompts(draw: st.DrawFn) -> Prompt:
    words = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).map(lambda t: f"w {t}")
    tools = [
        {"name": f"tool{i}", "input_schema": {"type": "object"}}
        for i in range(draw(st.integers(0, 3)))
    ]
    system = [
        Segment.static(draw(words), cache_control=draw(markers))
        for _ in range(draw(st.integers(0, 3)))
    ]
    system += [
        Segment.versioned(draw(words), version="1", cache_control=draw(markers))
        for _ in range(draw(st.integers(0, 2)))
    ]
    context = [
        Segment.session(draw(words), cache_control=draw(markers))
        for _ in range(draw(st.integers(0, 3)))
    ]
    history: list[Any] = []
    for turn in range(draw(st.integers(0, 30))):
        role: Role = "user" if turn % 2 == 0 else "assistant"
        history.append(Segment.session(draw(words), role=role, cache_control=draw(markers)))
    question = Segment.dynamic(draw(words))
    return Prompt(tools=tools, system=system, context=context, messages=[*history, question])


def anthropic_marks(kwargs: Mapping[str, Any]) -> list[str]:
    """TTL of every cache_control in wire order (tools, system, messages, then automatic)."""
    blocks = [*kwargs.get("tools", []), *kwargs.get("system", [])]
    blocks += [block for message in kwargs["messages"] for block in message["content"]]
    marks = [
        block["cache_control"].get("ttl", "5m") for block in blocks if "cache_control" in block
    ]
    if "cache_control" in kwargs:
        marks.append(kwargs["cache_control"]["ttl"])
    return marks


def caller_marked(prompt: Prompt) -> int:
    return sum(segment.cache_control is not None for segment in prompt.segments())


@settings(max_examples=200, deadline=None)
@given(prompt=prompts(), automatic=st.booleans())
def test_anthropic_never_exceeds_four_markers_and_keeps_ttl_order(
    prompt: Prompt, automatic: bool
) -> None:
    before = copy.deepcopy(prompt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrefixkitWarning)
        try:
            kwargs = render_anthropic(
                prompt, model="claude-sonnet-5", max_tokens=10, automatic=automatic
            )
        except RenderError as error:
            message = str(error)
            assert caller_marked(prompt) + automatic > 4 or "longer TTLs must come first" in message
            return
    assert prompt == before
    marks = anthropic_marks(kwargs)
    assert len(marks) <= 4
    assert len(marks) >= caller_marked(prompt) + automatic
    ranks = [TTL_RANK[ttl] for ttl in marks]
    assert ranks == sorted(ranks, reverse=True)


def openai_marks(kwargs: Mapping[str, Any]) -> int:
    return json.dumps(kwargs).count("prompt_cache_breakpoint")


@settings(max_examples=100, deadline=None)
@given(prompt=prompts(), mode=st.sampled_from(["explicit", "implicit"]), responses=st.booleans())
def test_openai_never_exceeds_its_write_limit_and_keeps_caller_markers(
    prompt: Prompt, mode: CacheMode, responses: bool
) -> None:
    render = render_openai_responses if responses else render_openai_chat
    before = copy.deepcopy(prompt)
    limit = 4 if mode == "explicit" else 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrefixkitWarning)
        try:
            kwargs = render(prompt, model="gpt-5.6-sol", cache_mode=mode)
        except RenderError as error:
            message = str(error)
            assert (
                caller_marked(prompt) > limit
                or "cannot mark" in message
                or "caches nothing" in message
            )
            return
    assert prompt == before
    assert caller_marked(prompt) <= openai_marks(kwargs) <= limit
