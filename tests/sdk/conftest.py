"""Shared SDK fixtures: a real BPE tokenizer trained here, cl100k_base offline, prompt files."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from prefixkit.sdk import HFTokenizer, TiktokenTokenizer

FIXTURES = Path(__file__).parent / "fixtures"
PROMPTS = FIXTURES / "prompts"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = """
Prefix caching stores the key and value tensors of a prompt's opening tokens so
that the next request starting the same way skips their prefill. The engine
caches whole blocks of tokens; a block is reused only when every token in it and
before it matches. Customers ask about buckets, volumes, regions, invoices,
egress, archive restores and quotas. Answer in plain English, quote the price
list, show the arithmetic, and never invent a limit or a command.


    def restore(bucket, region):
        if region not in REGIONS:


            raise ValueError(region)
        return archive.restore(bucket)
"""
# The indented, blank-line-heavy code above makes the BPE learn merged runs of
# spaces and newlines, so padding has to cope with whitespace that merges.


def _training_text() -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted(PROMPTS.rglob("*.*"))]
    return [*texts, _CORPUS * 4]


def build_chatml_tokenizer(folder: Path, vocab_size: int = 800) -> Path:
    """Train a byte-level BPE on local text; save it as a transformers-loadable folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_training_text(), trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 8192,
        "chat_template": CHATML_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def chatml_tokenizer_builder() -> Callable[[Path], Path]:
    """`build_chatml_tokenizer`, for tests that need a variant of the tokenizer folder."""
    return build_chatml_tokenizer


@pytest.fixture(scope="session")
def hf_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_chatml_tokenizer(tmp_path_factory.mktemp("chatml-bpe"))


@pytest.fixture(scope="session")
def hf_tokenizer(hf_tokenizer_dir: Path) -> HFTokenizer:
    return HFTokenizer(hf_tokenizer_dir)


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer("cl100k_base")


@pytest.fixture
def prompt_root(tmp_path: Path) -> Path:
    """A writable copy of the fixture prompt set: tmp/prompts (lock goes to tmp/prefixkit.lock)."""
    root = tmp_path / "prompts"
    shutil.copytree(PROMPTS, root)
    return root
