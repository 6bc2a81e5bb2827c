"""Tokenizing a prompt piece by piece, remembering the pieces.

A Hugging Face fast tokenizer first cuts its input at every added token (``<|im_start|>``,
``<|im_end|>``, ...) and tokenizes each piece between them on its own. A rendered chat
prompt is mostly pieces the router saw before: the tenant's system prompt, the earlier
turns of the conversation. `SegmentEncoder` cuts the text the same way, tokenizes only the
pieces it has not seen recently (a bounded memo, least recently used forgotten first) and
joins the ids: the same ids as tokenizing the whole text, at the cost of the new pieces.
Each new piece is tokenized on its own (`encode`, not `encode_batch`): a batch runs on the
tokenizer's thread pool, whose idle threads spin between a server's requests and cost
more CPU than the few short pieces of a request take.

That equality holds when the pieces really are independent, which `SegmentEncoder.build`
checks on the tokenizer's definition and on probes (else it gives None and the caller
tokenizes whole texts): every added token matched verbatim (not normalized, no stripped
spaces around it, not only as a whole word), no normalizer or a per-piece one (NFC,
NFKC), a byte-level pre-tokenizer (SentencePiece's ``Metaspace`` adds a space to the
first piece only), and special tokens split out of the text.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any

__all__ = ["SegmentEncoder"]

_PER_PIECE_NORMALIZERS = (None, "NFC", "NFKC")
_PER_PIECE_PRE_TOKENIZERS = ("ByteLevel", "Split", "Digits", "Punctuation")
_PROBES = (
    "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\n  Hi  there <|im_end|>\n",
    " leading space\tand\ttabs\n\n<|endoftext|>x<s></s>  trailing  ",
    "caf\u00e9 \u4e2d\u6587 123,456.78 don't   \U0001f600",
)


class SegmentEncoder:
    """`encode(text, add_special_tokens)`: the ids of `text`, piece by piece (module
    docstring). Holds up to `limit` pieces."""

    def __init__(
        self,
        backend: Any,
        added: dict[str, int],
        special_tokens_add_nothing: bool,
        limit: int = 1 << 12,
    ) -> None:
        self._backend = backend
        self._added = added
        self._split = re.compile(
            "(" + "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)) + ")"
        ).split
        self._special_tokens_add_nothing = special_tokens_add_nothing
        self._memo: OrderedDict[str, list[int]] = OrderedDict()
        self.limit = limit

    @classmethod
    def build(cls, backend: Any, limit: int = 1 << 12) -> SegmentEncoder | None:
        """The encoder for `backend` (a ``tokenizers.Tokenizer``), or None when its pieces
        are not independent (module docstring)."""
        definition = json.loads(backend.to_str())
        normalizer = definition.get("normalizer")
        if (normalizer or {}).get("type") not in _PER_PIECE_NORMALIZERS:
            return None
        pre = definition.get("pre_tokenizer") or {}
        steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
        if not steps or any(s.get("type") not in _PER_PIECE_PRE_TOKENIZERS for s in steps):
            return None
        if getattr(backend, "encode_special_tokens", False):
            return None
        tokens = backend.get_added_tokens_decoder()
        if not tokens or any(
            t.normalized or t.lstrip or t.rstrip or t.single_word for t in tokens.values()
        ):
            return None
        added = {t.content: i for i, t in tokens.items()}
        nothing_added = all(
            backend.encode(p, add_special_tokens=True).ids
            == backend.encode(p, add_special_tokens=False).ids
            for p in _PROBES
        )
        encoder = cls(backend, added, nothing_added, limit)
        for probe in _PROBES:
            if encoder.encode(probe, False) != backend.encode(probe, add_special_tokens=False).ids:
                return None
        encoder._memo.clear()
        return encoder

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        if add_special_tokens and not self._special_tokens_add_nothing:
            return list(self._backend.encode(text, add_special_tokens=True).ids)
        pieces = self._split(text)
        memo = self._memo
        missing = [p for p in pieces[::2] if p and p not in memo]
        if missing:
            encode = self._backend.encode
            for piece in dict.fromkeys(missing):
                memo[piece] = list(encode(piece, add_special_tokens=False).ids)
            while len(memo) > self.limit:
                memo.popitem(last=False)
        ids: list[int] = []
        added = self._added
        for index, piece in enumerate(pieces):
            if index % 2:
                ids.append(added[piece])
            elif piece:
                cached = memo.get(piece)
                if cached is None:  # forgotten while this prompt was being read
                    cached = list(self._backend.encode(piece, add_special_tokens=False).ids)
                else:
                    memo.move_to_end(piece)
                ids.extend(cached)
        return ids

    def __len__(self) -> int:
        return len(self._memo)
