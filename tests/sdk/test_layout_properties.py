"""Invariants of layout and canonical forms, checked with hypothesis."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from prefixkit.sdk import (
    LayoutError,
    Prompt,
    Segment,
    Stability,
    canonical_json,
    canonical_text,
    sha256_hex,
)

text = st.text(alphabet=st.sampled_from(list("abc xyz\n\t\r\ufeffé.#{}")), min_size=1, max_size=40)

CONSTRUCTORS = {
    Stability.STATIC: lambda t: Segment.static(t),
    Stability.VERSIONED: lambda t: Segment.versioned(t, version="v1"),
    Stability.SESSION: lambda t: Segment.session(t),
    Stability.DYNAMIC: lambda t: Segment.dynamic(t),
}


def segment_of(stability: Stability, content: str) -> Segment:
    return CONSTRUCTORS[stability](content)


stabilities = st.sampled_from(list(Stability))


def layout_prompt(system: list[Segment], context: list[Segment], messages: list[Segment]) -> Prompt:
    return Prompt(system=system, context=context, messages=messages)


@st.composite
def valid_layouts(draw: st.DrawFn) -> tuple[list[Segment], list[Segment], list[Segment]]:
    """Segments in non-decreasing stability, split over system/context/messages."""
    tiers = sorted(draw(st.lists(stabilities, min_size=1, max_size=8)))
    segments = [segment_of(tier, draw(text)) for tier in tiers]
    cut_one = draw(st.integers(0, len(segments)))
    cut_two = draw(st.integers(cut_one, len(segments)))
    return segments[:cut_one], segments[cut_one:cut_two], segments[cut_two:]


@given(layout=valid_layouts(), variants=st.lists(text, min_size=1, max_size=4))
def test_static_prefix_is_a_byte_exact_prefix_of_every_request_sharing_it(
    layout: tuple[list[Segment], list[Segment], list[Segment]], variants: list[str]
) -> None:
    system, context, messages = layout
    prompt = layout_prompt(system, context, messages)
    static_count = len(prompt.static_segments())
    prefix = prompt.static_prefix_text().encode("utf-8")
    assert prompt.static_prefix_digest == sha256_hex(prompt.static_prefix_text())
    for variant in variants:
        # Same static segments, different later content: a request sharing the prefix.
        following = [
            s if index < static_count else Segment.dynamic(variant)
            for index, s in enumerate(prompt.segments())
        ]
        other = layout_prompt(
            following[: len(system)],
            following[len(system) : len(system) + len(context)],
            [*following[len(system) + len(context) :], Segment.dynamic(variant)],
        )
        assert other.render_text().encode("utf-8").startswith(prefix)
        assert other.static_prefix_digest == prompt.static_prefix_digest


@given(
    tiers=st.lists(stabilities, min_size=2, max_size=8).filter(lambda t: t != sorted(t)),
    contents=st.lists(text, min_size=8, max_size=8),
)
def test_any_segment_more_stable_than_one_before_it_raises(
    tiers: list[Stability], contents: list[str]
) -> None:
    segments = [segment_of(tier, content) for tier, content in zip(tiers, contents, strict=False)]
    try:
        Prompt(system=segments)
    except LayoutError as error:
        assert "Move" in str(error)
    else:
        raise AssertionError(f"layout {[t.name for t in tiers]} was accepted")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


@given(value=json_values)
def test_canonical_json_ignores_key_insertion_order(value: Any) -> None:
    assert canonical_json(reversed_keys(value)) == canonical_json(value)
    assert json.loads(canonical_json(value)) == value


@given(content=text)
@example(content="\ufeff\ufeffa")
def test_canonical_text_is_idempotent_and_has_no_cr_bom_or_trailing_space(content: str) -> None:
    once = canonical_text(content)
    assert canonical_text(once) == once
    assert "\r" not in once and "\ufeff" not in once[:1]
    assert all(line == line.rstrip(" \t") for line in once.split("\n"))
    assert not once.endswith("\n")


@given(tools=st.permutations(["search", "lookup", "refund", "escalate"]))
def test_tool_order_does_not_change_the_rendering(tools: list[str]) -> None:
    schemas = [{"name": n, "input_schema": {"type": "object", "b": 1, "a": 2}} for n in tools]
    reference = sorted(schemas, key=lambda s: str(s["name"]))
    assert Prompt(tools=schemas).render_text() == Prompt(tools=reference).render_text()
