"""Shared fixtures for the whole suite: the embedded engine and a locally trained tokenizer."""

from __future__ import annotations

import http.client
import json
import random
import shutil
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from prefixkit.engine_adapter import EngineConfig, ReplicaSet, prepare_embedded, replica_configs
from prefixkit.sdk import HFTokenizer

# The fixtures that start real engines, and the marker a test using them must carry:
# `make check` deselects those markers and must never start vLLM or Ray.
STARTS_ENGINES = {"engine": "engine", "ray_deployment": "ray"}


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses, not counting its own parameters."""
    callspec = getattr(item, "callspec", None)
    parameters = set(callspec.params) if callspec is not None else set()
    return set(getattr(item, "fixturenames", ())) - parameters


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = [
        f"{item.nodeid} uses {fixture} without @pytest.mark.{marker}"
        for item in items
        for fixture, marker in STARTS_ENGINES.items()
        if fixture in _fixtures(item) and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("\n".join(unmarked))


# Hypothesis' per-example deadline (200 ms) times the load of a shared 2-core machine,
# not the code under test: property tests check behaviour, benches check speed.
settings.register_profile("prefixkit", deadline=None)
settings.load_profile("prefixkit")

# --- engine: the embedded vLLM CPU engine, started once per session ---
ENGINE_PORT = 18000
# the Mooncake conversation trace (Apache-2.0), shipped with the examples
MOONCAKE_TRACE = (
    Path(__file__).resolve().parents[1] / "examples" / "traces" / "mooncake_conversation.jsonl.gz"
)


@dataclass(frozen=True)
class EmbeddedEngine:
    """The running session engine (SmolLM2-135M-Instruct on vLLM CPU).

    Block size 32, float32, eager, `sha256_cbor` block hashes seeded without PYTHONHASHSEED,
    prefix caching and prompt-token details on, dev endpoints (/reset_prefix_cache) on, KV
    events published on `kv_events_endpoint` (ipc, topic "kv") with replay on
    `kv_events_replay_endpoint`.
    """

    config: EngineConfig
    replicas: ReplicaSet
    run_dir: Path

    @property
    def base_url(self) -> str:
        return self.config.base_url

    @property
    def model(self) -> str:
        """The served model name to put in requests."""
        return self.config.name

    @property
    def kv_events_endpoint(self) -> str:
        assert self.config.kv_events_endpoint is not None
        return self.config.kv_events_endpoint

    @property
    def kv_events_replay_endpoint(self) -> str:
        assert self.config.kv_events_replay_endpoint is not None
        return self.config.kv_events_replay_endpoint

    @property
    def block_size(self) -> int:
        return self.config.block_size


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEngine]:
    """Install the engine and prepare the model if missing, then serve them for the session."""

    def report(message: str) -> None:
        if " s)" not in message:  # step lines only, not the once-a-second elapsed updates
            print(f"[engine] {message}", file=sys.stderr, flush=True)

    base = prepare_embedded(report, dev_endpoints=True)
    run_dir = tmp_path_factory.mktemp("engine")
    (config,) = replica_configs(base, 1, run_dir, ENGINE_PORT)
    with ReplicaSet([config], run_dir, start_timeout=600, report=report) as replicas:
        yield EmbeddedEngine(config, replicas, run_dir)


# --- /engine ---


# --- documents for the engine tests: deterministic plain English ---
# a plain-English vocabulary: SmolLM2's tokenizer spends about 1.1 tokens per word on it
_VOCABULARY = (
    "the of and to in is that for it as with was on be by this are or from at which an have "
    "not they but one all were there been has more when will would their what about if can "
    "so into time only some could them other than then now its also after two first well way "
    "even new because any these give day most us river garden market table window letter "
    "morning history picture village engine station mountain island weather harbour bridge "
    "lantern orchard meadow kitchen library journey summer winter autumn spring silver copper "
    "quiet bright narrow gentle careful sudden distant ancient modern simple steady warm cold"
)
WORDS = _VOCABULARY.split()


@pytest.fixture(scope="session")
def make_document() -> Callable[[int, str], str]:
    """`make_document(words, seed)`: deterministic text, different for every seed."""

    def make(words: int, seed: str) -> str:
        rng = random.Random(seed)
        sentences = []
        remaining = words
        while remaining > 0:
            length = min(remaining, rng.randint(8, 16))
            sentence = " ".join(rng.choice(WORDS) for _ in range(length))
            sentences.append(sentence.capitalize() + ".")
            remaining -= length
        return f"Document {seed}. " + " ".join(sentences)

    return make


# --- a real Hugging Face tokenizer trained here (no hub): byte-level BPE + ChatML template ---
SDK_PROMPTS = Path(__file__).parent / "sdk" / "fixtures" / "prompts"

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


@pytest.fixture
def prompt_root(tmp_path: Path) -> Path:
    """A writable copy of the fixture prompt set: tmp/prompts (lock goes to tmp/prefixkit.lock)."""
    root = tmp_path / "prompts"
    shutil.copytree(SDK_PROMPTS, root)
    return root


def _training_text() -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted(SDK_PROMPTS.rglob("*.*"))]
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


# --- /tokenizer ---


# --- keep-alive: how long prefixkit's servers keep an idle client connection ---
IdleGap = Callable[[str, str, float], tuple[int, int]]


@pytest.fixture(scope="session")
def statuses_across_idle_gap() -> IdleGap:
    """Two GETs of a path on one kept-alive connection, `idle_s` apart: their
    statuses (the second raises if the server closed the idle connection)."""

    def statuses(url: str, path: str, idle_s: float) -> tuple[int, int]:
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        try:
            connection.request("GET", path)
            first = connection.getresponse()
            first.read()
            time.sleep(idle_s)
            connection.request("GET", path)
            second = connection.getresponse()
            second.read()
            return first.status, second.status
        finally:
            connection.close()

    return statuses
