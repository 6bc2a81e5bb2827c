"""Fake vLLM replicas (`prefixkit.testing.fake_vllm`) for the serving tests: real HTTP
servers on loopback, stoppable mid-test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prefixkit.testing.fake_vllm import FakeVLLM


@pytest.fixture
def replicas() -> Iterator[list[FakeVLLM]]:
    started = [FakeVLLM().start(), FakeVLLM().start()]
    yield started
    for replica in started:
        replica.__exit__(None, None, None)
