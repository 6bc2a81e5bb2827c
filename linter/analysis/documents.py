"""A string value of a YAML or JSON document, found by its key path.

A module that loads its prompt templates from a file
(`yaml.safe_load(open("prompts.yaml"))["planner"]["system"]`) names the template by the
file and the keys: the text at that path is the template. A document that does not
parse, a key it does not hold and a value that is not a string give no text (nothing
is guessed).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Literal

__all__ = ["DocumentKind", "document_text"]

DocumentKind = Literal["yaml", "json"]


def document_text(text: str, kind: DocumentKind, keys: Sequence[str | int]) -> str | None:
    """The string at `keys` (mapping keys and list indexes, outermost first) of the
    document `text` holds, or None."""
    value = _parsed(text, kind)
    for key in keys:
        if isinstance(value, dict) and isinstance(key, str):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value if isinstance(value, str) else None


@functools.lru_cache(maxsize=64)
def _parsed(text: str, kind: DocumentKind) -> object:
    """The document's data (read once for the keys of every template it holds)."""
    if kind == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return None
    try:
        import yaml  # here, not at import: most modules load no document
    except ImportError:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser if built
    try:
        return yaml.load(text, Loader=loader)
    except (yaml.YAMLError, RecursionError):
        return None
