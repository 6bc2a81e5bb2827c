"""Offline, rendering never touches the network: encodings load from files or not at all."""

from __future__ import annotations

import asyncio
import socket
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prefixkit.sdk import (
    AsyncOpenAIClient,
    OpenAIClient,
    Prompt,
    Segment,
    TiktokenTokenizer,
    TokenizerError,
    render_openai_chat,
    render_openai_responses,
)
from prefixkit.sdk import tokenizer as tokenizer_module
from prefixkit.testing.providers import MockProvider


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Any]]:
    """Every attempt to reach the network, each refused; tiktoken's cache is empty."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] or args)
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield attempts


def prompt() -> Prompt:
    return Prompt(system="Be brief.", messages=[Segment.dynamic("How much is egress?")])


def quietly(render: Callable[[], object]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        render()


def test_rendering_for_an_o200k_model_opens_no_socket(connections: list[Any]) -> None:
    for _ in range(3):
        quietly(lambda: render_openai_chat(prompt(), model="gpt-4o"))
        quietly(lambda: render_openai_responses(prompt(), model="gpt-4o"))
    assert connections == []


def test_the_official_client_path_opens_no_socket_but_the_mock_transport(
    connections: list[Any],
) -> None:
    api = MockProvider()
    with api.openai_client() as official:
        client = OpenAIClient(official)
        quietly(lambda: client.chat(prompt(), model="gpt-4o"))
        quietly(lambda: client.responses(prompt(), model="gpt-4o"))
    assert len(api.requests) == 2
    assert connections == []


def test_the_async_client_never_stalls_on_a_download(connections: list[Any]) -> None:
    api = MockProvider()

    async def run() -> None:
        client = AsyncOpenAIClient(api.async_openai_client())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.chat(prompt(), model="gpt-4o")
            await client.responses(prompt(), model="gpt-4o")

    asyncio.run(run())
    assert len(api.requests) == 2
    assert connections == []


def test_a_failed_load_is_remembered_not_retried_per_render(
    connections: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []
    build = tokenizer_module._build_encoding

    def counting(encoding: str, path: str | None, download: bool) -> Any:
        loads.append(encoding)
        return build(encoding, path, download)

    monkeypatch.setattr(tokenizer_module, "_build_encoding", counting)
    for _ in range(5):
        quietly(lambda: render_openai_chat(prompt(), model="gpt-4o"))
    assert loads.count("o200k_base") <= 1


def test_a_missing_encoding_says_how_to_provide_it(connections: list[Any]) -> None:
    with pytest.raises(TokenizerError, match=r"path=.*download=True"):
        TiktokenTokenizer("o200k_base")
    assert connections == []


def test_only_an_explicit_download_reaches_for_the_network(connections: list[Any]) -> None:
    with pytest.raises(TokenizerError, match="cannot download tiktoken encoding 'o200k_base'"):
        TiktokenTokenizer("o200k_base", download=True)
    assert connections != []


def test_an_encoding_loaded_after_a_failed_load_is_found(
    connections: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remembered failure is per load, not for the process: a download ends it."""
    assert tokenizer_module.local_tiktoken("o200k_base") is None
    build = tokenizer_module._build_encoding
    stand_in = build("cl100k_base", None, False)

    def downloading(encoding: str, path: str | None, download: bool) -> Any:
        return stand_in if download else build(encoding, path, download)

    monkeypatch.setattr(tokenizer_module, "_build_encoding", downloading)
    TiktokenTokenizer("o200k_base", download=True)
    loaded = tokenizer_module.local_tiktoken("o200k_base")
    assert loaded is not None and loaded.name == "tiktoken:o200k_base"
