"""`prefixkit serve status`'s router line: how the precise router got its requests' tokens,
read from its ``/router/state`` with an operator's key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prefixkit.cli.serve_status import _router_tokens


def answering(monkeypatch: pytest.MonkeyPatch, status: int, body: Any = None) -> list[Any]:
    asked: list[Any] = []

    def get(url: str, headers: dict[str, str], timeout: float) -> httpx.Response:
        asked.append((url, headers))
        return httpx.Response(status, json=body)

    monkeypatch.setattr(httpx, "get", get)
    return asked


def test_the_line_gives_both_counts_and_the_share_asked_of_replicas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = answering(monkeypatch, 200, {"tokenized_here": 990, "tokenize_fallbacks": 10})
    line = _router_tokens("http://127.0.0.1:8000", "key-ops")
    assert line == (
        "router: 990 requests tokenized in the router, 10 asked of a replica's /tokenize (1.0%)"
    )
    assert asked == [("http://127.0.0.1:8000/router/state", {"authorization": "Bearer key-ops"})]


def test_without_an_operator_key_it_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, 401, {"error": {"message": "no key"}})
    line = _router_tokens("http://127.0.0.1:8000", None)
    assert line is not None and "--tenants FILE" in line and "PREFIXKIT_OPERATOR_KEYS" in line


def test_a_deployment_without_the_precise_router_has_no_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answering(monkeypatch, 404, {"error": {"message": "no precise router"}})
    assert _router_tokens("http://127.0.0.1:8000", "key-ops") is None
