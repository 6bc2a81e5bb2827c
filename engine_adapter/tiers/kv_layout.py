"""How many bytes of KV cache a token takes, from a model's Hugging Face ``config.json``.

Standard attention (multi-head or grouped-query) keeps a key and a value per layer and KV
head: ``2 x layers x num_key_value_heads x head_dim x dtype bytes`` per token, with
``head_dim`` where the config gives it, else ``hidden_size / num_attention_heads``.

Layouts that differ, as vLLM allocates them:

* multi-head latent attention (DeepSeek-V2/V3, ``kv_lora_rank``): one compressed latent
  and the rope part of the key per layer, ``layers x (kv_lora_rank + qk_rope_head_dim) x
  dtype bytes``, no factor 2;
* sliding-window layers (Mistral's ``sliding_window``, Gemma 2's alternating layers,
  Gemma 3's ``sliding_window_pattern`` or any config's ``layer_types``): such a layer keeps
  only the last ``sliding_window`` tokens of a prefix, so what a cached prefix holds depends
  on its length (`KvLayout.bytes_for_prefix`).

Layouts whose cached bytes this module cannot state are refused with a `KvLayoutError`
naming the field: chunked local attention (Llama 4's ``attention_chunk_size``), state-space
or linear-attention layers (``layer_types`` other than full or sliding attention), and
DeepSeek's sparse-attention indexer (``index_topk``, a second cache of its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefixkit.sdk import PrefixkitError

__all__ = ["KvLayout", "KvLayoutError", "kv_layout", "load_model_config"]

DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

# vLLM's --kv-cache-dtype values besides auto (`CacheDType`), in bytes per value;
# fp8_ds_mla (DeepSeek's packed MLA cache) is not modelled
KV_CACHE_DTYPE_BYTES: Mapping[str, int] = {
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}

_FULL = "full_attention"
_SLIDING = "sliding_attention"


class KvLayoutError(PrefixkitError, ValueError):
    """A model config whose KV cache size per token cannot be computed: a field missing or
    malformed, or a layout (chunked local attention, state-space layers, ...) whose cached
    bytes are not known here.

    `field`: the config field at fault (``num_key_value_heads``, ``attention_chunk_size``,
    ...); `model_type`: the config's ``model_type`` (None when it has none)."""

    def __init__(self, message: str, *, field: str, model_type: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.model_type = model_type


@dataclass(frozen=True)
class KvLayout:
    """The KV bytes a cached prefix holds: `full_bytes_per_token` for every token of the
    prefix (all layers that attend to the whole context), plus `window_bytes_per_token`
    for at most `window_tokens` of them (sliding-window layers; 0 and None when there are
    none)."""

    full_bytes_per_token: int
    window_bytes_per_token: int = 0
    window_tokens: int | None = None

    def bytes_for_prefix(self, tokens: int) -> int:
        """The KV bytes a cached prefix of `tokens` tokens holds."""
        if tokens < 0:
            raise ValueError(f"tokens must be 0 or more, got {tokens}")
        windowed = tokens if self.window_tokens is None else min(tokens, self.window_tokens)
        return self.full_bytes_per_token * tokens + self.window_bytes_per_token * windowed

    def bytes_per_token(self, prefix_tokens: int | None = None) -> float:
        """Bytes per token of a prefix of `prefix_tokens` tokens (None: as if every layer
        kept every token, the most a token can take)."""
        if prefix_tokens is None or self.window_tokens is None:
            return float(self.full_bytes_per_token + self.window_bytes_per_token)
        if prefix_tokens <= 0:
            raise ValueError(f"prefix_tokens must be positive, got {prefix_tokens}")
        return self.bytes_for_prefix(prefix_tokens) / prefix_tokens


def load_model_config(path: str | Path) -> dict[str, Any]:
    """A model's ``config.json`` (a file, or the model folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KvLayoutError(
            f"{path} does not exist: give a model's config.json or the folder holding it",
            field="config.json",
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KvLayoutError(
            f"cannot read {path} as JSON ({exc}): give a Hugging Face config.json",
            field="config.json",
        ) from None
    if not isinstance(config, dict):
        raise KvLayoutError(f"{path} is not a JSON object", field="config.json")
    return config


def _positive_int(config: Mapping[str, Any], name: str, model_type: str | None) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KvLayoutError(
            f"config field {name!r} is {value!r}: a positive integer is needed to compute "
            "the KV cache size (give the model's own config.json)",
            field=name,
            model_type=model_type,
        )
    return value


def _dtype_bytes(
    config: Mapping[str, Any], kv_cache_dtype: str | None, model_type: str | None
) -> int:
    if kv_cache_dtype not in (None, "auto"):
        bytes_per_value = KV_CACHE_DTYPE_BYTES.get(str(kv_cache_dtype))
        if bytes_per_value is None:
            raise KvLayoutError(
                f"KV cache dtype {kv_cache_dtype!r} is unknown: give one of auto, "
                f"{', '.join(KV_CACHE_DTYPE_BYTES)} (vLLM's --kv-cache-dtype values "
                "modelled here)",
                field="kv_cache_dtype",
                model_type=model_type,
            )
        return bytes_per_value
    name = kv_cache_dtype
    if name is None or name == "auto":
        name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
        if DTYPE_BYTES.get(str(name).removeprefix("torch.").lower()) == 4:
            # vLLM's --dtype auto serves a float32 checkpoint in 16 bits on a GPU
            # (`_resolve_auto_dtype`), and its KV cache follows
            return 2
    key = str(name).removeprefix("torch.").lower()
    if key not in DTYPE_BYTES:
        raise KvLayoutError(
            f"KV cache dtype {name!r} is unknown: give one of {', '.join(sorted(DTYPE_BYTES))}",
            field="kv_cache_dtype" if kv_cache_dtype not in (None, "auto") else "torch_dtype",
            model_type=model_type,
        )
    return DTYPE_BYTES[key]


def _sliding_layers(config: Mapping[str, Any], layers: int, model_type: str | None) -> int:
    """How many of the `layers` attend through a sliding window."""
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise KvLayoutError(
                f"config field 'layer_types' has {len(types) if isinstance(types, list) else 0}"
                f" entries for {layers} layers: give the model's own config.json",
                field="layer_types",
                model_type=model_type,
            )
        unknown = sorted({t for t in types if t not in (_FULL, _SLIDING)})
        if "chunked_attention" in unknown:
            raise KvLayoutError(
                "layer_types has 'chunked_attention' layers: what a chunked local attention "
                "layer keeps of a cached prefix depends on where the prefix ends in its "
                "chunk, which this model does not compute; give --kv-bytes-per-token",
                field="layer_types",
                model_type=model_type,
            )
        if unknown:
            raise KvLayoutError(
                f"layer_types has {unknown} layers: only full and sliding attention keep a "
                "per-token KV cache whose size is known here (state-space and linear "
                "attention layers keep a fixed state); give --kv-bytes-per-token",
                field="layer_types",
                model_type=model_type,
            )
        return sum(1 for t in types if t == _SLIDING)
    if config.get("sliding_window") is None or config.get("use_sliding_window") is False:
        return 0
    if model_type == "gemma2":  # every other layer, from the first (transformers' Gemma 2)
        return (layers + 1) // 2
    pattern = config.get("sliding_window_pattern")
    if pattern is not None:  # Gemma 3: every pattern-th layer is global
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            raise KvLayoutError(
                f"config field 'sliding_window_pattern' is {pattern!r}: a positive integer "
                "is needed",
                field="sliding_window_pattern",
                model_type=model_type,
            )
        return layers - layers // pattern
    if "max_window_layers" in config:  # Qwen2 with use_sliding_window: layers past it
        first = _positive_int(config, "max_window_layers", model_type)
        return max(0, layers - first)
    return layers  # Mistral: every layer


def kv_layout(config: Mapping[str, Any], *, kv_cache_dtype: str | None = None) -> KvLayout:
    """The KV layout of the model a Hugging Face `config` describes (see the module doc).

    `kv_cache_dtype`: vLLM's ``--kv-cache-dtype`` (``auto``/None: the model's dtype as
    vLLM serves it on a GPU, 16 bits for a float32 checkpoint; ``fp8``: one byte). A
    multimodal config's ``text_config`` is the language model's.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**{k: v for k, v in config.items() if k != "text_config"}, **text}
    model_type = config.get("model_type")
    model_type = model_type if isinstance(model_type, str) else None
    for field in ("attention_chunk_size", "index_topk"):
        if config.get(field) is not None:
            why = (
                "chunked local attention keeps a part of a cached prefix that depends on "
                "where the prefix ends in its chunk"
                if field == "attention_chunk_size"
                else "DeepSeek's sparse-attention indexer keeps a second cache of its own"
            )
            raise KvLayoutError(
                f"config field {field!r} is set: {why}, which this model does not compute; "
                "give --kv-bytes-per-token",
                field=field,
                model_type=model_type,
            )
    layers = _positive_int(config, "num_hidden_layers", model_type)
    dtype = _dtype_bytes(config, kv_cache_dtype, model_type)
    if config.get("kv_lora_rank") is not None:  # multi-head latent attention
        rank = _positive_int(config, "kv_lora_rank", model_type)
        rope = _positive_int(config, "qk_rope_head_dim", model_type)
        return KvLayout(layers * (rank + rope) * dtype)
    heads = _positive_int(config, "num_attention_heads", model_type)
    kv_heads = (
        _positive_int(config, "num_key_value_heads", model_type)
        if config.get("num_key_value_heads") is not None
        else heads
    )
    if config.get("head_dim") is not None:
        head_dim = _positive_int(config, "head_dim", model_type)
    else:
        hidden = _positive_int(config, "hidden_size", model_type)
        if hidden % heads:
            raise KvLayoutError(
                f"hidden_size {hidden} is not a multiple of num_attention_heads {heads} and "
                "the config gives no head_dim: give the model's own config.json",
                field="head_dim",
                model_type=model_type,
            )
        head_dim = hidden // heads
    per_layer = 2 * kv_heads * head_dim * dtype
    sliding = _sliding_layers(config, layers, model_type)
    if not sliding:
        return KvLayout(layers * per_layer)
    window = _positive_int(config, "sliding_window", model_type)
    return KvLayout((layers - sliding) * per_layer, sliding * per_layer, window)
