"""KV bytes per token from real models' config.json shapes (fixtures in tests/data/tiers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixkit.engine_adapter.tiers.kv_layout import (
    KvLayout,
    KvLayoutError,
    kv_layout,
    load_model_config,
)
from prefixkit.sdk import PrefixkitError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "tiers"


def layout_of(name: str, **options: str) -> KvLayout:
    return kv_layout(load_model_config(CONFIGS / name), **options)


@pytest.mark.parametrize(
    ("config", "bytes_per_token"),
    [
        # 2 x 32 layers x 8 KV heads x (4096 / 32) x 2 bytes: grouped-query attention
        ("llama-3.1-8b.json", 2 * 32 * 8 * 128 * 2),
        # head_dim given (64, also 576 / 9); float32 checkpoint served in 16 bits
        ("smollm2-135m-instruct.json", 2 * 30 * 3 * 64 * 2),
        # use_sliding_window false: every layer keeps every token
        ("qwen2.5-7b-instruct.json", 2 * 28 * 4 * 128 * 2),
        # multi-head latent attention: 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes
        ("deepseek-v3.json", 61 * (512 + 64) * 2),
    ],
)
def test_a_model_with_full_attention_keeps_a_fixed_size_per_token(
    config: str, bytes_per_token: int
) -> None:
    layout = layout_of(config)
    assert layout == KvLayout(bytes_per_token)
    assert layout.bytes_per_token(100_000) == bytes_per_token


def test_fp8_kv_cache_takes_one_byte_per_value() -> None:
    assert layout_of("llama-3.1-8b.json", kv_cache_dtype="fp8").full_bytes_per_token == (
        2 * 32 * 8 * 128
    )


def test_mistral_keeps_only_the_window_of_a_long_prefix() -> None:
    layout = layout_of("mistral-7b-v0.1.json")
    per_token = 2 * 32 * 8 * 128 * 2
    assert layout.bytes_for_prefix(1_000) == 1_000 * per_token
    assert layout.bytes_for_prefix(16_384) == 4_096 * per_token
    assert layout.bytes_per_token(16_384) == per_token / 4


def test_gemma_2_alternates_sliding_and_global_layers() -> None:
    layout = layout_of("gemma-2-9b.json")
    per_layer = 2 * 8 * 256 * 2  # float32 checkpoint served in 16 bits
    assert layout == KvLayout(21 * per_layer, 21 * per_layer, 4096)
    assert layout.bytes_for_prefix(8_192) == 8_192 * 21 * per_layer + 4_096 * 21 * per_layer


def test_gemma_3_reads_its_text_config_and_one_global_layer_in_six() -> None:
    layout = layout_of("gemma-3-27b.json")
    per_layer = 2 * 16 * 128 * 2
    assert layout == KvLayout(10 * per_layer, 52 * per_layer, 1024)


def test_layer_types_name_the_sliding_layers() -> None:
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "torch_dtype": "bfloat16",
    }
    assert kv_layout(config) == KvLayout(2 * 2 * 2 * 8 * 2, 2 * 2 * 2 * 8 * 2, 16)


def test_llama_4_chunked_attention_is_refused_naming_the_field() -> None:
    with pytest.raises(KvLayoutError, match=r"attention_chunk_size.*--kv-bytes-per-token") as info:
        layout_of("llama-4-scout.json")
    assert info.value.field == "attention_chunk_size"
    assert info.value.model_type == "llama4_text"
    assert isinstance(info.value, PrefixkitError) and isinstance(info.value, ValueError)


def test_state_space_layers_are_refused_naming_layer_types() -> None:
    config = {
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "head_dim": 8,
        "layer_types": ["full_attention", "linear_attention"],
    }
    with pytest.raises(KvLayoutError, match=r"\['linear_attention'\]") as info:
        kv_layout(config)
    assert info.value.field == "layer_types"


def test_a_missing_layer_count_is_refused_naming_it() -> None:
    with pytest.raises(KvLayoutError, match="'num_hidden_layers' is None") as info:
        kv_layout({"num_attention_heads": 4, "hidden_size": 64})
    assert info.value.field == "num_hidden_layers"


def test_an_unknown_dtype_is_refused_with_the_known_ones() -> None:
    with pytest.raises(KvLayoutError, match="'int3' is unknown: give one of") as info:
        layout_of("llama-3.1-8b.json", kv_cache_dtype="int3")
    assert info.value.field == "kv_cache_dtype"


def test_a_config_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(KvLayoutError, match=r"cannot read .* as JSON"):
        load_model_config(path)


def test_a_model_folder_is_read_through_its_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((CONFIGS / "llama-3.1-8b.json").read_text())
    assert load_model_config(tmp_path)["num_hidden_layers"] == 32


@given(
    layers=st.integers(1, 128),
    heads_per_kv=st.integers(1, 8),
    kv_heads=st.integers(1, 16),
    head_dim=st.sampled_from([32, 64, 80, 96, 128, 256]),
    dtype=st.sampled_from([("bfloat16", 2), ("float16", 2), ("float8_e4m3fn", 1)]),
)
def test_grouped_query_attention_is_two_x_layers_x_kv_heads_x_head_size_x_bytes(
    layers: int, heads_per_kv: int, kv_heads: int, head_dim: int, dtype: tuple[str, int]
) -> None:
    heads = heads_per_kv * kv_heads
    config = {
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "hidden_size": heads * head_dim,
        "torch_dtype": dtype[0],
    }
    assert kv_layout(config).full_bytes_per_token == 2 * layers * kv_heads * head_dim * dtype[1]
    # json round trip: what a config.json file gives
    assert kv_layout(json.loads(json.dumps(config))) == kv_layout(config)


@given(window=st.integers(1, 10_000), tokens=st.integers(1, 50_000))
def test_a_windowed_prefix_never_takes_more_than_every_layer_keeping_every_token(
    window: int, tokens: int
) -> None:
    layout = KvLayout(100, 300, window)
    assert layout.bytes_for_prefix(tokens) <= 400 * tokens
    assert layout.bytes_per_token(tokens) <= layout.bytes_per_token()


def test_a_negative_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="tokens must be 0 or more, got -3"):
        KvLayout(100, 10, 5).bytes_for_prefix(-3)
