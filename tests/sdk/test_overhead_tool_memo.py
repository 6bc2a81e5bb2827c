"""Tool definitions rebuilt per call are canonicalised once per distinct content."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import CanonicalError, Prompt, Segment, render_anthropic


def lookup_tool() -> dict[str, Any]:
    """A new dict on every call, as an app that builds its tools per request makes."""
    return {
        "name": "lookup_bucket",
        "description": "Look up a bucket",
        "input_schema": {"type": "object", "properties": {"bucket": {"type": "string"}}},
    }


def test_equal_tool_dicts_rebuilt_per_call_share_one_canonical_segment() -> None:
    first = Prompt(tools=[lookup_tool()]).tools[0]
    second = Prompt(tools=[lookup_tool()]).tools[0]
    assert second is first


def test_a_tool_mutated_in_place_gets_a_new_segment() -> None:
    tool = lookup_tool()
    before = Prompt(tools=[tool]).tools[0]
    tool["input_schema"]["properties"]["region"] = {"type": "string"}
    after = Prompt(tools=[tool]).tools[0]
    assert after is not before
    assert '"region"' in after.text and '"region"' not in before.text


def test_the_memo_does_not_merge_values_that_differ_only_in_type() -> None:
    one = Prompt(tools=[{**lookup_tool(), "strict": 1}]).tools[0]
    true = Prompt(tools=[{**lookup_tool(), "strict": True}]).tools[0]
    assert '"strict":1' in one.text and '"strict":true' in true.text


def test_a_tool_that_is_not_json_is_refused_every_time() -> None:
    tool = {**lookup_tool(), "examples": {"lookup", "bucket"}}
    for _ in range(2):
        with pytest.raises(CanonicalError, match="no stable order across processes"):
            Prompt(tools=[tool])


def test_equal_content_built_from_runtime_strings_shares_the_segment() -> None:
    """Interned literals and strings joined at run time are the same content."""
    literal = Prompt(tools=[lookup_tool()]).tools[0]
    joined = lookup_tool()
    joined["name"] = "".join(["lookup", "_", "bucket"])
    joined["input_schema"]["type"] = "".join(["obj", "ect"])
    assert Prompt(tools=[joined]).tools[0] is literal


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


@given(first=json_values, second=json_values)
def test_every_tool_renders_its_own_content_whatever_the_memo_holds(
    first: object, second: object
) -> None:
    """Two tools of any content: each is rendered as a fresh prompt would render it alone."""
    tools = [
        {"name": "a", "description": "first", "input_schema": {"x": first}},
        {"name": "b", "description": "second", "input_schema": {"x": second}},
    ]
    for tool in tools:
        Prompt(tools=[tool])  # fill the memo with both
    for tool in tools:
        memoised = Prompt(tools=[tool]).tools[0]
        unmemoised = Segment.static(copy.deepcopy(tool), role="system", name=str(tool["name"]))
        assert memoised.text == unmemoised.text


@pytest.mark.filterwarnings("ignore::prefixkit.sdk.UncachedPrefixWarning")
def test_changing_a_rendered_tool_in_place_leaves_later_renders_as_they_were() -> None:
    """Each request gets its own tool dict; its nested values are shared (documented)."""
    prompt = Prompt(tools=[lookup_tool()], messages=[Segment.dynamic("Where is my bucket?")])
    first: dict[str, Any] = dict(render_anthropic(prompt, model="claude-sonnet-5", max_tokens=64))
    first["tools"][0]["name"] = "renamed"
    second: dict[str, Any] = dict(render_anthropic(prompt, model="claude-sonnet-5", max_tokens=64))
    assert second["tools"][0]["name"] == "lookup_bucket"
