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

Inside a new piece of ASCII text, a byte-level BPE tokenizer whose pre-tokenizer is the
``ByteLevel`` one with its own expression (GPT-2's, as SmolLM2 defines it), and with no
normalizer, cuts the text into words by that regular expression and runs BPE on each
word on its own; the tokenizer's own call spends most of its time in the expression and
in building its `Encoding`. `SegmentEncoder` then cuts the piece itself (the same
expression, restricted to ASCII, where it means the same) and runs BPE only on the words
it has not seen (a second bounded memo): `build` checks that this gives the tokenizer's
ids on probes, else tokenizes each new piece whole. Tokenizers that split with an
expression of their own first (Llama 3's, Qwen's ``Split``) tokenize new pieces whole.

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
# GPT-2's pre-tokenizer expression (the tokenizers library's ByteLevel, use_regex), on
# ASCII text: there \p{L} is [A-Za-z], \p{N} is [0-9] and \s the six ASCII spaces
_ASCII_WORDS = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+", re.ASCII
)
_WORD_PROBES = (
    "Hello, world!  It's 2024... don't\t\ttabs\n\n  spaces   end ",
    "IT'S we're I'll you'd 'd '' ''s x'sy 123456789 3.14 -1e+10 a_b a-b @#$%^&*()[]{}<>",
    "\r\n\x0b\x0c \x00\x01\x1f\x7f~`|\\/?;: \n \t\n  x\n\n\n y  \t z",
    "  leading and trailing  ",
    " ",
    "\n",
)
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
        word_limit: int = 1 << 16,
    ) -> None:
        self._backend = backend
        # ASCII words -> ids (`_by_words`), when `build` found the words independent
        self._words: dict[str, list[int]] | None = None
        self._word_limit = word_limit
        self._byte_chars = _byte_level_chars()
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
        if _byte_level_words(definition):
            encoder._words = {}
            for probe in _WORD_PROBES + _PROBES:
                for piece in encoder._split(probe)[::2]:
                    if piece.isascii() and encoder._by_words(piece) != encoder._whole(piece):
                        encoder._words = None
                        return encoder
            encoder._words.clear()
        return encoder

    def _whole(self, piece: str) -> list[int]:
        return list(self._backend.encode(piece, add_special_tokens=False).ids)

    def _by_words(self, piece: str) -> list[int]:
        """The ids of an ASCII `piece`, word by word (module docstring)."""
        words = self._words
        assert words is not None
        ids: list[int] = []
        for word in _ASCII_WORDS.findall(piece):
            cached = words.get(word)
            if cached is None:
                if len(words) >= self._word_limit:
                    words.clear()
                tokens = self._backend.model.tokenize(word.translate(self._byte_chars))
                cached = words[word] = [token.id for token in tokens]
            ids += cached
        return ids

    def _piece(self, piece: str) -> list[int]:
        """The ids of a piece between added tokens."""
        if self._words is not None and piece.isascii():
            return self._by_words(piece)
        return self._whole(piece)

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        if add_special_tokens and not self._special_tokens_add_nothing:
            return list(self._backend.encode(text, add_special_tokens=True).ids)
        pieces = self._split(text)
        memo = self._memo
        missing = [p for p in pieces[::2] if p and p not in memo]
        if missing:
            for piece in dict.fromkeys(missing):
                memo[piece] = self._piece(piece)
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
                    cached = self._piece(piece)
                else:
                    memo.move_to_end(piece)
                ids.extend(cached)
        return ids

    def __len__(self) -> int:
        return len(self._memo)


def _byte_level_words(definition: dict[str, Any]) -> bool:
    """Whether a tokenizer's definition runs BPE on the words of GPT-2's pre-tokenizer
    expression alone (no normalizer, no other pre-tokenizer, no dropout)."""
    pre = definition.get("pre_tokenizer") or {}
    model = definition.get("model") or {}
    return (
        definition.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True) is True
        and pre.get("add_prefix_space") is False
        and model.get("type") == "BPE"
        and model.get("dropout") is None
    )


def _byte_level_chars() -> dict[int, str]:
    """GPT-2's byte-level alphabet as a `str.translate` table for ASCII text: each byte
    as the character its vocabulary spells it with (printable ones as themselves)."""
    printable = set(range(ord("!"), ord("~") + 1))
    table: dict[int, str] = {}
    shifted = 0
    for byte in range(256):
        if byte in printable or 0xA1 <= byte <= 0xAC or 0xAE <= byte <= 0xFF:
            char = chr(byte)
        else:
            char = chr(256 + shifted)
            shifted += 1
        if byte < 128:
            table[byte] = char
    return table
