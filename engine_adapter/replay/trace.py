"""Request traces as the simulator sees them: arrival times and prefix-block ids.

A `Trace` holds, per request, its arrival time (ms), prompt and output lengths
(tokens) and the ids of its full prompt blocks, chained as in vLLM (equal ids at
position k mean the first k+1 blocks are identical, so their KV is reusable).
Block ids are small ints: the simulator's hot loop uses them as dict keys.

Three inputs are read:

* Mooncake (FAST'25) JSONL: ``timestamp`` (ms), ``input_length``,
  ``output_length``, ``hash_ids`` (already block ids, ``block_size`` given);
* request logs with ``token_ids``: hashed with `prefixkit.sdk.block_hashes`
  (the engine's own hash, salt-aware through an optional ``cache_salt``, as the
  engine version ``vllm`` computes it: the local engine's unless told);
* request logs with ``prompt`` (text) or ``messages`` (chat): tokenised with a
  local Hugging Face tokenizer directory (chat template applied to messages).

`load_trace` picks the reader from the first record's keys; a file ending in ``.gz`` is
read through gzip.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prefixkit.sdk import HashAlgo, VllmVersion, event_block_hashes, require_extra

from ..errors import TraceError

__all__ = ["Trace", "load_trace", "trace_from_token_ids"]

# the local engine's block hash: vLLM `engine.install.VLLM_CPU_VERSION` (a test holds them equal)
LOCAL_VLLM: VllmVersion = "0.32"


@dataclass
class Trace:
    """Requests in arrival order; parallel lists, one entry per request."""

    block_size: int
    timestamps_ms: list[float] = field(default_factory=list)
    input_lengths: list[int] = field(default_factory=list)
    output_lengths: list[int] = field(default_factory=list)
    blocks: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.blocks)

    def head(self, n: int) -> Trace:
        """The first `n` requests."""
        return Trace(
            self.block_size,
            self.timestamps_ms[:n],
            self.input_lengths[:n],
            self.output_lengths[:n],
            self.blocks[:n],
        )

    @property
    def total_input_tokens(self) -> int:
        return sum(self.input_lengths)

    def append(
        self, timestamp_ms: float, input_length: int, output_length: int, blocks: list[int]
    ) -> None:
        self.timestamps_ms.append(timestamp_ms)
        self.input_lengths.append(input_length)
        self.output_lengths.append(output_length)
        self.blocks.append(blocks)


def _open(path: Path) -> TextIO:
    """`path` as text: gzip-compressed if its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with _open(path) as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise TraceError(
                            f"{path}:{number}: not JSON ({exc.msg}); one JSON object per line",
                            path=path,
                            line=number,
                        ) from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TraceError(
            f"cannot read {path} ({exc}): give a UTF-8 JSONL file, gzip-compressed if it "
            "ends in .gz",
            path=path,
        ) from None


def trace_from_token_ids(
    requests: Iterable[dict[str, Any]],
    block_size: int,
    *,
    algo: HashAlgo = "sha256",
    seed: str | None = None,
    vllm: VllmVersion = LOCAL_VLLM,
) -> Trace:
    """A trace from records with ``token_ids`` (and optional ``cache_salt``,
    ``timestamp`` in ms, ``output_length``), hashed exactly as vLLM `vllm` does."""
    trace = Trace(block_size)
    compact: dict[int, int] = {}
    for index, record in enumerate(requests):
        tokens = record["token_ids"]
        hashes = event_block_hashes(
            tokens,
            block_size,
            algo=algo,
            cache_salt=record.get("cache_salt"),
            seed=seed,
            vllm=vllm,
        )
        ids = [compact.setdefault(h, len(compact)) for h in hashes]
        trace.append(
            float(record.get("timestamp", index)),
            len(tokens),
            int(record.get("output_length", 0)),
            ids,
        )
    return trace


def _tokenize_with(tokenizer_dir: str | None, path: Path) -> Callable[[dict[str, Any]], list[int]]:
    if tokenizer_dir is None:
        raise TraceError(
            "this trace has prompts, not token ids: pass --tokenizer DIR (a local "
            "Hugging Face tokenizer directory, e.g. the served model's)",
            path=path,
        )
    require_extra("hf", "a trace of prompts or messages (--tokenizer)", "transformers")
    from transformers import AutoTokenizer  # heavy: only for raw-prompt traces

    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    except (OSError, ValueError) as exc:
        raise TraceError(f"cannot load tokenizer from {tokenizer_dir}: {exc}", path=path) from None

    def tokenize(record: dict[str, Any]) -> list[int]:
        if "messages" in record:
            ids = tokenizer.apply_chat_template(
                record["messages"], tokenize=True, add_generation_prompt=True
            )
            # transformers 5 answers a BatchEncoding (a Mapping, not a dict); 4 a list
            return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)
        return list(tokenizer(record["prompt"])["input_ids"])

    return tokenize


def load_trace(
    path: str | Path,
    *,
    block_size: int | None = None,
    tokenizer: str | None = None,
    limit: int | None = None,
    algo: HashAlgo = "sha256",
    vllm: VllmVersion = LOCAL_VLLM,
) -> Trace:
    """Read a Mooncake trace or a request log (see the module docstring).

    `block_size` defaults to 512 for Mooncake traces and 16 otherwise (vLLM's GPU
    default); give the engine's real block size for logs, and the engine's version as
    `vllm` for salted logs of an engine other than the local one.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(
            f"trace file {path} "
            + ("is a folder: give a file in it" if path.is_dir() else "does not exist"),
            path=path,
        )
    records = _records(path)
    first = next(records, None)
    if first is None:
        raise TraceError(f"trace file {path} is empty", path=path)

    def chained() -> Iterator[tuple[int, dict[str, Any]]]:
        yield first
        yield from records

    def numbered() -> Iterator[tuple[int, dict[str, Any]]]:
        for count, (number, record) in enumerate(chained()):
            if limit is not None and count >= limit:
                return
            if not isinstance(record, dict):
                raise TraceError(
                    f"{path}:{number}: expected a JSON object per line", path=path, line=number
                )
            yield number, record

    def limited() -> Iterator[dict[str, Any]]:
        return (record for _, record in numbered())

    keys = first[1].keys() if isinstance(first[1], dict) else set()
    if "hash_ids" in keys:
        trace = Trace(block_size or 512)
        for number, record in numbered():
            try:
                trace.append(
                    float(record["timestamp"]),
                    int(record["input_length"]),
                    int(record.get("output_length", 0)),
                    [int(h) for h in record["hash_ids"]],
                )
            except KeyError as exc:
                raise TraceError(
                    f"{path}:{number}: a Mooncake record lacks {exc}", path=path, line=number
                ) from None
        return trace
    if "token_ids" in keys:
        return trace_from_token_ids(limited(), block_size or 16, algo=algo, vllm=vllm)
    if "prompt" in keys or "messages" in keys:
        tokenize = _tokenize_with(tokenizer, path)
        return trace_from_token_ids(
            ({**record, "token_ids": tokenize(record)} for record in limited()),
            block_size or 16,
            algo=algo,
            vllm=vllm,
        )
    raise TraceError(
        f"{path}: unknown trace format (first record keys {sorted(keys)}); expected "
        "'hash_ids' (Mooncake), 'token_ids', 'prompt' or 'messages'",
        path=path,
        line=first[0],
    )
