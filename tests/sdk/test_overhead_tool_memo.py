"""Tool definitions rebuilt per call are canonicalised once per distinct content."""

from __future__ import annotations

from typing import Any

import pytest
from prefixkit.sdk import CanonicalError, Prompt


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
