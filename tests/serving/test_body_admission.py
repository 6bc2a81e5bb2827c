"""What the gateway forwards of an admitted body means what the gateway read, to any JSON
parser: the keys it sets or reads once, with its values; the rest as the client sent it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.serving.bodies import admit_body, namespace_media_ids
from prefixkit.engine_adapter.serving.gateway import PIN_FIELD
from prefixkit.engine_adapter.serving.refused import Refused

SALT = "tenant-salt"
FIELDS = {"cache_salt": SALT}
STRIP = ("cache_salt", PIN_FIELD)
READ = ("stream", "stream_options", "cache_salt")

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_keys = st.one_of(st.sampled_from([*READ, PIN_FIELD, "model", "messages"]), st.text(max_size=6))


def _written(pairs: list[tuple[str, Any]], ensure_ascii: bool, compact: bool, tail: str) -> bytes:
    """An object as a client may write it: keys in this order (one possibly twice), ASCII
    escapes or UTF-8, compact or spaced, whitespace after it."""
    comma, colon = (",", ":") if compact else (", ", ": ")
    items = [
        json.dumps(key, ensure_ascii=ensure_ascii)
        + colon
        + json.dumps(value, ensure_ascii=ensure_ascii)
        for key, value in pairs
    ]
    return ("{" + comma.join(items) + "}" + tail).encode()


def _first_kept(body: bytes) -> dict[str, Any]:
    """The body's top as a parser that keeps the first of duplicated keys reads it."""

    def first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in pairs:
            kept.setdefault(key, value)
        return kept

    parsed = json.loads(body, object_pairs_hook=first)
    assert isinstance(parsed, dict)
    return parsed


@given(
    pairs=st.lists(st.tuples(_keys, _values), max_size=6),
    ensure_ascii=st.booleans(),
    compact=st.booleans(),
    tail=st.sampled_from(["", " ", "\n", "\r\n\t "]),
)
def test_the_forwarded_body_reads_as_the_gateway_read_it_to_any_parser(
    pairs: list[tuple[str, Any]], ensure_ascii: bool, compact: bool, tail: str
) -> None:
    raw = _written(pairs, ensure_ascii, compact, tail)
    read = {key: value for key, value in dict(pairs).items() if key not in STRIP} | FIELDS
    namespace_media_ids(read, SALT)  # a media part's uuid under the salt (test below)
    admitted = admit_body(
        raw, content_type="application/json", content_encoding="", fields=FIELDS, strip=STRIP
    )
    assert json.loads(admitted.body) == read
    first = _first_kept(admitted.body)
    assert {k: first.get(k) for k in READ} == {k: read.get(k) for k in READ}
    assert admitted.view == read


def _salted(raw: bytes) -> bytes:
    """The body the gateway forwards of `raw` on a salted route."""
    return admit_body(raw, content_type="application/json", content_encoding="", fields=FIELDS).body


def test_a_body_with_nothing_to_remove_passes_as_sent_with_the_salt_last() -> None:
    raw = b'{\n  "model": "m",\n  "messages": [{"role": "user", "content": "caf\xc3\xa9"}]\n}\n'
    assert _salted(raw) == raw.rstrip()[:-1] + b',"cache_salt":"tenant-salt"}'


def test_an_empty_object_gets_the_salt_alone() -> None:
    assert _salted(b"{ }") == b'{ "cache_salt":"tenant-salt"}'


def test_a_clients_salt_spelled_with_escapes_is_replaced() -> None:
    raw = b'{"model": "m", "cache\\u005fsalt": "mine"}'
    assert _salted(raw) == b'{"model":"m","cache_salt":"tenant-salt"}'


@pytest.mark.parametrize(
    "raw",
    [
        b'{"stream": true, "model": "m", "stream": false}',
        b'{"stream": true, "model": "m", "str\\u0065am": false}',
    ],
    ids=["as written", "once with escapes"],
)
def test_a_read_key_written_twice_is_left_once_with_its_last_value(raw: bytes) -> None:
    assert _salted(raw) == b'{"stream":false,"model":"m","cache_salt":"tenant-salt"}'


def test_surrogates_encoded_in_utf8_are_refused_as_a_lone_surrogate_escape_is() -> None:
    raw = b'{"model": "m", "prompt": "\xed\xa0\x80"}'
    with pytest.raises(Refused) as refused:
        _salted(raw)
    assert refused.value.status == 400


_media_ids = st.one_of(st.text(max_size=6), st.integers(), st.booleans())


@given(ids=st.lists(_media_ids, min_size=3, max_size=3), escaped=st.booleans())
def test_a_media_parts_uuid_is_its_tenants_own_and_nothing_else_changes(
    ids: list[Any], escaped: bool
) -> None:
    # vLLM keys its processor and encoder caches by a part's uuid, which no salt reaches:
    # one tenant's uuid must never name another tenant's image
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{**image, "uuid": ids[0]}, {"type": "text", "text": "?"}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "content": [{**image, "uuid": ids[1]}]}],
            },
        ],
        "input": [{"role": "user", "content": [{"type": "input_image", "uuid": ids[2]}]}],
    }
    raw = json.dumps(body, ensure_ascii=escaped).encode()
    if escaped:
        raw = raw.replace(b'"uuid"', b'"\\u0075uid"')
    forwarded = {}
    for salt in ("salt-a", "salt-b"):
        admitted = admit_body(
            raw, content_type="application/json", content_encoding="", fields={"cache_salt": salt}
        )
        forwarded[salt] = json.loads(admitted.body)
        sent = forwarded[salt]
        parts = [
            sent["messages"][0]["content"][0],
            sent["messages"][1]["content"][0]["content"][0],
            sent["input"][0]["content"][0],
        ]
        assert [part["uuid"] for part in parts] == [f"{salt}:{value}" for value in ids]
        for part in parts:
            part.pop("uuid")
        assert sent == {**body, "cache_salt": salt} | {
            "messages": [
                {"role": "user", "content": [image, {"type": "text", "text": "?"}]},
                {"role": "user", "content": [{"type": "tool_result", "content": [image]}]},
            ],
            "input": [{"role": "user", "content": [{"type": "input_image"}]}],
        }


def test_a_media_item_given_directly_as_a_responses_input_is_namespaced_too() -> None:
    raw = b'{"model":"m","input":[{"type":"input_image","image_url":"u","uuid":"x"}]}'
    sent = json.loads(_salted(raw))
    assert sent["input"][0]["uuid"] == f"{SALT}:x"
