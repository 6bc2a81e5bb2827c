"""Tokenizer adapters: offline tiktoken, a real HF tokenizer with its chat template, Anthropic."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx2
import pytest
from prefixkit.sdk import (
    AnthropicTokenCounter,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    TokenizerError,
)
from prefixkit.sdk.tokenizer import memoised_count
from prefixkit.testing.providers import MockProvider


def test_cl100k_base_encodes_known_ids_offline(cl100k: TiktokenTokenizer) -> None:
    assert cl100k.name == "tiktoken:cl100k_base"
    assert cl100k.encode("hello world") == [15339, 1917]
    assert cl100k.count("hello world") == 2


def test_cl100k_base_loads_without_network(tmp_path: Path) -> None:
    code = (
        "from prefixkit.sdk import TiktokenTokenizer;"
        "print(TiktokenTokenizer('cl100k_base').encode('hello world'))"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[15339, 1917]"


def test_encoding_loads_from_a_local_tiktoken_file(cl100k: TiktokenTokenizer) -> None:
    spec = importlib.util.find_spec("tiktoken_ext")
    assert spec is not None and spec.submodule_search_locations
    data = Path(spec.submodule_search_locations[0]) / "data" / "cl100k_base.tiktoken"
    from_file = TiktokenTokenizer("cl100k_base", path=data)
    text = "Prefix caching reuses the KV cache of a shared opening. <|endoftext|>"
    assert from_file.encode(text) == cl100k.encode(text)


def test_special_token_text_is_counted_as_plain_text(cl100k: TiktokenTokenizer) -> None:
    assert 100257 not in cl100k.encode("<|endoftext|>")


def test_unknown_encoding_file_layout_is_a_tokenizer_error(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="known layouts are cl100k_base, o200k_base"):
        TiktokenTokenizer("p50k_base", path=tmp_path / "p50k_base.tiktoken")


def test_for_model_picks_tiktokens_encoding_for_the_model() -> None:
    assert TiktokenTokenizer.for_model("gpt-4").name == "tiktoken:cl100k_base"


def test_adapters_satisfy_the_tokenizer_protocol(
    cl100k: TiktokenTokenizer, hf_tokenizer: HFTokenizer
) -> None:
    for tokenizer in (cl100k, hf_tokenizer, AnthropicTokenCounter("claude-sonnet-4-5")):
        assert isinstance(tokenizer, Tokenizer)


def test_counts_are_memoised_by_tokenizer_name_and_text() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    text = "a static prefix that is counted on every request " * 50
    assert memoised_count("test:memo", text, count) == len(text)
    assert memoised_count("test:memo", text, count) == len(text)
    assert memoised_count("test:other-vocabulary", text, count) == len(text)
    assert calls == [text, text]


def test_hf_tokenizer_loads_from_a_local_folder(
    hf_tokenizer: HFTokenizer, hf_tokenizer_dir: Path
) -> None:
    assert hf_tokenizer.name == f"hf:{hf_tokenizer_dir.resolve()}"
    assert hf_tokenizer.count("Prefix caching") == len(hf_tokenizer.encode("Prefix caching"))
    assert {"<|im_start|>", "<|im_end|>"} <= set(hf_tokenizer.special_tokens)


def test_hf_chat_text_applies_the_models_chatml_template(hf_tokenizer: HFTokenizer) -> None:
    messages = [
        {"role": "system", "content": "You are Harbor."},
        {"role": "user", "content": "Hi"},
    ]
    assert hf_tokenizer.chat_text(messages) == (
        "<|im_start|>system\nYou are Harbor.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert not hf_tokenizer.chat_text(messages, add_generation_prompt=False).endswith("assistant\n")


def test_hf_chat_token_ids_parse_template_markers_as_special_tokens(
    hf_tokenizer: HFTokenizer,
) -> None:
    ids = hf_tokenizer.chat_token_ids([{"role": "user", "content": "Hi"}])
    im_start = hf_tokenizer.encode("<|im_start|>")
    assert len(im_start) == 1
    assert ids[0] == im_start[0]
    assert ids == hf_tokenizer.encode(hf_tokenizer.chat_text([{"role": "user", "content": "Hi"}]))


def test_hf_tokenizer_missing_folder_is_a_tokenizer_error(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="does not exist"):
        HFTokenizer(tmp_path / "no-model")


def test_anthropic_count_without_client_is_a_labelled_estimate(cl100k: TiktokenTokenizer) -> None:
    counter = AnthropicTokenCounter("claude-sonnet-4-5")
    result = counter.count_tokens("You are Harbor, the support assistant.")
    assert counter.estimate is True
    assert counter.name == "anthropic-estimate:claude-sonnet-4-5"
    assert result.estimate is True
    assert result.method.startswith("ESTIMATE")
    assert result.tokens == cl100k.count("You are Harbor, the support assistant.")


def test_anthropic_has_no_token_ids() -> None:
    with pytest.raises(TokenizerError, match="not public"):
        AnthropicTokenCounter("claude-sonnet-4-5").encode("hi")


def _counted(api: MockProvider, body: Mapping[str, object]) -> int:
    """What the (mock) count_tokens API answers for `body`."""
    request = httpx2.Request(
        "POST", "https://api.anthropic.com/v1/messages/count_tokens", json=body
    )
    answer: int = json.loads(api.handle(request).content)["input_tokens"]
    return answer


def test_anthropic_count_with_client_uses_count_tokens_once_per_text() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter("claude-sonnet-4-5", client=api.anthropic_client())
    text = "a prompt counted by the API, unique to this test"
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": text}]}
    probe = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "x"}]}
    framing = _counted(MockProvider(), probe) - 1
    assert counter.count(text) == _counted(MockProvider(), body) - framing
    assert counter.count(text) == _counted(MockProvider(), body) - framing
    assert counter.count_tokens(text).estimate is False
    assert api.paths == ["/v1/messages/count_tokens"] * 2
    assert api.bodies == [body, probe]


def test_anthropic_count_request_sends_the_whole_request() -> None:
    api = MockProvider()
    counter = AnthropicTokenCounter("claude-sonnet-4-5", client=api.anthropic_client())
    system = [{"type": "text", "text": "You are Harbor.", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": "Hi"}]
    counted = counter.count_request(system=system, messages=messages)
    assert api.body["system"] == system
    assert counted == _counted(MockProvider(), api.body)
