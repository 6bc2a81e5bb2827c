"""Canonical JSON of what is sent keeps key order; the hashing form sorts it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prefixkit.sdk import Segment, canonical_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def test_send_form_keeps_properties_in_the_order_written() -> None:
    schema = {"type": "object", "properties": {"reasoning": {}, "decision": {}, "amount": {}}}
    text = canonical_json(schema, sort_keys=False)
    assert list(json.loads(text)["properties"]) == ["reasoning", "decision", "amount"]


def test_hashing_form_sorts_keys_by_default() -> None:
    assert canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_send_form_uses_fixed_separators_and_keeps_utf8() -> None:
    assert canonical_json({"b": [1, 2], "a": "é"}, sort_keys=False) == '{"b":[1,2],"a":"é"}'


@given(value=json_values)
def test_send_form_round_trips_with_the_same_key_order(value: Any) -> None:
    text = canonical_json(value, sort_keys=False)
    assert json.dumps(json.loads(text)) == json.dumps(value)


def test_a_static_json_segment_keeps_the_key_order_written() -> None:
    segment = Segment.static({"z": 1, "a": {"y": 2, "b": 3}})
    assert segment.text == '{"z":1,"a":{"y":2,"b":3}}'
