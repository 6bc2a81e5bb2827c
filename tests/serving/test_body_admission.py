"""What the gateway forwards of an admitted body means what the gateway read, to any JSON
parser: the keys it sets or reads once, with its values; the rest as the client sent it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.serving.bodies import admit_body
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
