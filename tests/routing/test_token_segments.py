"""Tokenizing piece by piece between special tokens (`SegmentEncoder`) gives the ids of
tokenizing the whole text, remembering pieces or not; a tokenizer whose pieces are not
independent gets no segment encoder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.routing.token_segments import SegmentEncoder
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
pieces = st.one_of(
    st.sampled_from(SPECIAL),
    st.sampled_from(["system", "user", " the", "  ", "\n", "\n\n", "\t", "bucket", "é", "中"]),
    st.text(max_size=12),
)
texts = st.lists(pieces, max_size=30).map("".join)


@pytest.fixture(scope="module")
def backend(hf_tokenizer_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(hf_tokenizer_dir / "tokenizer.json"))


@given(st.lists(texts, min_size=1, max_size=6), st.integers(1, 8), st.booleans())
def test_pieces_give_the_ids_of_the_whole_text(
    backend: Tokenizer, prompts: list[str], limit: int, special: bool
) -> None:
    encoder = SegmentEncoder.build(backend, limit=limit)
    assert encoder is not None
    for text in prompts:  # later prompts find some pieces remembered, some forgotten
        assert encoder.encode(text, special) == backend.encode(text, add_special_tokens=special).ids
        assert len(encoder) <= limit


def test_a_next_turn_tokenizes_only_its_new_pieces(backend: Tokenizer) -> None:
    encoder = SegmentEncoder.build(backend)
    assert encoder is not None
    first = "<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    encoder.encode(first, False)
    remembered = len(encoder)
    encoder.encode(first + "<|im_start|>user\nmore<|im_end|>\n", False)
    assert len(encoder) == remembered + 1  # "more": the rest was seen


def test_a_metaspace_tokenizer_gets_no_segment_encoder() -> None:
    # SentencePiece's Metaspace prepends a space to the first piece only
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.add_special_tokens(SPECIAL)
    assert SegmentEncoder.build(tokenizer) is None


def test_an_added_token_that_strips_spaces_means_no_segment_encoder(backend: Tokenizer) -> None:
    tokenizer = Tokenizer.from_str(backend.to_str())
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True)])
    assert SegmentEncoder.build(tokenizer) is None


# ASCII text of every kind the word expression tells apart: letters, digits, other
# printable characters, contractions, runs of spaces, tabs, newlines and control bytes
ascii_texts = st.lists(
    st.one_of(
        st.sampled_from(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'", " ", "  ", "\n", "\t"]),
        st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=12),
    ),
    max_size=30,
).map("".join)


@pytest.fixture(scope="module")
def word_encoder(backend: Tokenizer) -> SegmentEncoder:
    encoder = SegmentEncoder.build(backend)
    assert encoder is not None
    return encoder


def test_the_tests_byte_level_tokenizer_is_tokenized_word_by_word(
    word_encoder: SegmentEncoder,
) -> None:
    assert word_encoder._words is not None  # the probes found its words independent


@given(ascii_texts)
def test_ascii_text_word_by_word_gives_the_tokenizers_ids(
    backend: Tokenizer, word_encoder: SegmentEncoder, text: str
) -> None:
    # the encoder remembers pieces and words across examples, as a router does
    ids = word_encoder.encode(text, False)
    assert ids == backend.encode(text, add_special_tokens=False).ids
