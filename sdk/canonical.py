"""Canonical forms: the one way text and JSON are turned into bytes.

Text policy (applied once, when a segment is created or a prompt file loaded):
- leading byte-order marks are removed;
- CRLF and lone CR become LF;
- Unicode is normalised to NFC (editors on different systems disagree);
- trailing spaces and tabs are removed from every line;
- trailing blank lines are removed (no final newline).
Leading indentation and blank lines inside the text are kept. The only
trailing whitespace a segment can carry is its block-alignment padding
(`Segment.padding`), appended after this policy on purpose.

JSON policy: separators `,` and `:`, UTF-8 kept as is (`ensure_ascii=False`),
no NaN or infinity, and no sets (their order is not stable across processes):
sort them into lists first. Key order is meaning: a strict tool's arguments
are generated in its schema's `properties` order, so what is sent
(`sort_keys=False`: segments, tool schemas) keeps every dict's keys in the
order written. Only hashing forms that must not depend on how a dict was
built (`canonical_blocks`) sort keys, the default. Dicts whose key order
varies between processes (built from a set, merged from runtime data) are
the linter's to find, not reordered here.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import CanonicalError

__all__ = ["canonical_json", "canonical_text", "sha256_hex"]

JSONValue = Any


def canonical_text(text: str) -> str:
    """Return `text` in canonical form (see the module docstring)."""
    if not isinstance(text, str):
        raise CanonicalError(
            f"expected text (str), got {type(text).__name__}: convert it first", value=text
        )
    text = text.lstrip("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text)
    # Splitting into lines is the costly step; skip it when no line but the last
    # can end in a space or tab (the final rstrip handles the last line).
    if " \n" in text or "\t\n" in text:
        text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return text.rstrip(" \t\n")


def _check_json(value: JSONValue, path: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CanonicalError(
                f"{path}: {value!r} is not valid JSON: use null or a string", value=value, path=path
            )
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(
                    f"{path}: key {key!r} is {type(key).__name__}; JSON keys must be strings",
                    value=key,
                    path=path,
                )
            _check_json(item, f"{path}.{key}")
        return
    if isinstance(value, (set, frozenset)):
        raise CanonicalError(
            f"{path}: a {type(value).__name__} has no stable order across processes: "
            "pass sorted(...) as a list instead",
            value=value,
            path=path,
        )
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]")
        return
    raise CanonicalError(
        f"{path}: {type(value).__name__} is not JSON-serialisable: convert it to "
        "str, int, float, bool, None, list or dict",
        value=value,
        path=path,
    )


def canonical_json(value: JSONValue, *, sort_keys: bool = True) -> str:
    """Serialise `value` canonically: fixed separators, no sets, no NaN.

    Keys are sorted (a hashing form independent of insertion order) unless
    `sort_keys=False`, which keeps every dict's keys in the order written:
    the form to send, since key order can carry meaning (schema `properties`).
    """
    _check_json(value, "$")
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
