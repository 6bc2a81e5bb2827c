"""require_extra: one clear error, naming the extra, when a part is used without it; the
SDK's clients and HF tokenizer check their extra before importing it, and importing the
SDK itself loads nothing beyond the standard library."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from prefixkit.sdk import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncVLLMClient,
    HFTokenizer,
    MissingExtraError,
    OpenAIClient,
    PrefixkitError,
    VLLMClient,
    require_extra,
)

ABSENT = "prefixkit_test_no_such_module"
NO_TOKENIZER: Any = None  # never reached: the extra is checked first


def test_installed_modules_pass_silently() -> None:
    require_extra("lint", "prefixkit lint", "json", "hashlib")


def test_a_missing_module_names_the_part_the_module_and_the_install_line() -> None:
    with pytest.raises(MissingExtraError) as raised:
        require_extra("lint", "prefixkit lint", ABSENT)
    assert str(raised.value) == (
        f"prefixkit lint needs {ABSENT}, which this installation lacks: "
        "pip install 'prefixkit[lint]'"
    )


def test_only_the_missing_modules_are_named() -> None:
    with pytest.raises(MissingExtraError, match=rf"needs {ABSENT}, {ABSENT}_too, which"):
        require_extra("serve", "the engine", "json", ABSENT, "hashlib", f"{ABSENT}_too")


def test_a_missing_extra_is_an_import_error_and_a_prefixkit_error() -> None:
    with pytest.raises(ImportError) as raised:
        require_extra("hf", "HFTokenizer", ABSENT)
    assert isinstance(raised.value, PrefixkitError)


@pytest.mark.parametrize(
    ("make", "module", "extra"),
    [
        (AnthropicClient, "anthropic", "anthropic"),
        (AsyncAnthropicClient, "anthropic", "anthropic"),
        (OpenAIClient, "openai", "openai"),
        (AsyncOpenAIClient, "openai", "openai"),
        (lambda: VLLMClient(tokenizer=NO_TOKENIZER, block_size=16), "openai", "openai"),
        (lambda: AsyncVLLMClient(tokenizer=NO_TOKENIZER, block_size=16), "openai", "openai"),
        (lambda: HFTokenizer("."), "transformers", "hf"),
    ],
)
def test_an_sdk_client_or_tokenizer_without_its_sdk_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, make: Any, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import and find_spec: not installed
    with pytest.raises(MissingExtraError, match=rf"pip install 'prefixkit\[{extra}\]'$"):
        make()


def test_a_client_passed_in_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    official: Any = object()  # any object: the wrapper keeps it without importing anthropic
    assert AnthropicClient(official).client is official


def test_importing_the_sdk_loads_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import prefixkit.sdk\n"
        "loaded = {name.split('.')[0] for name in set(sys.modules) - before}\n"
        "print(sorted(loaded - set(sys.stdlib_module_names) - {'prefixkit'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
